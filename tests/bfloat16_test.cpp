// bfloat16 against an independent reference: the value of every pattern
// computed from its fields, and float -> bfloat16 rounding decided by
// comparing distances to the two neighbouring values.
#include "cortado/bfloat16.hpp"
#include "cortado/types.hpp"
#include "cortado/util/math.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace cortado {
namespace {

// The exact value of a bfloat16 bit pattern, from its fields (NaN for NaNs).
double bf16_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 7) & 0xff, mant = h & 0x7f;
  double v;
  if (exp == 0xff) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exp == 0) {
    v = std::ldexp(mant, -133);  // subnormal: mant * 2^-126 * 2^-7
  } else {
    v = std::ldexp(128 + mant, exp - 134);
  }
  return sign ? -v : v;
}

TEST(BFloat16, EveryPatternToFloatIsExact) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const bfloat16 h = bfloat16::from_bits(static_cast<uint16_t>(b));
    const double want = bf16_value(static_cast<uint16_t>(b));
    const float got = float(h);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "pattern " << b;
      EXPECT_TRUE(isnan(h));
      EXPECT_FALSE(isinf(h));
    } else {
      ASSERT_EQ(double(got), want) << "pattern 0x" << std::hex << b;
      EXPECT_EQ(std::signbit(got), (b & 0x8000) != 0);
      EXPECT_EQ(isinf(h), std::isinf(want));
      EXPECT_FALSE(isnan(h));
    }
  }
}

TEST(BFloat16, EveryPatternRoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const bfloat16 h = bfloat16::from_bits(static_cast<uint16_t>(b));
    const bfloat16 back = bfloat16(float(h));
    if (isnan(h)) {
      EXPECT_TRUE(isnan(back)) << "pattern " << b;
      EXPECT_EQ(back.x & 0x8000, h.x & 0x8000) << "NaN keeps its sign";
    } else {
      ASSERT_EQ(back.x, h.x) << "pattern 0x" << std::hex << b;
    }
  }
}

// Between each pair of adjacent finite values, subnormals included: just
// below, at, and just above the midpoint. Ties go to the even pattern.
TEST(BFloat16, RoundsToNearestEvenBetweenNeighbours) {
  for (uint32_t b = 0; b < 0x7f7f; ++b) {  // positive finite, excluding the largest
    const double lo = bf16_value(static_cast<uint16_t>(b)), hi = bf16_value(static_cast<uint16_t>(b + 1));
    const double mid = (lo + hi) / 2;  // exact in float: 9 significant bits
    const float fmid = static_cast<float>(mid);
    ASSERT_EQ(double(fmid), mid);
    const uint16_t even = (b % 2 == 0) ? b : b + 1;
    ASSERT_EQ(bfloat16(fmid).x, even) << "tie between 0x" << std::hex << b << " and 0x" << b + 1;
    ASSERT_EQ(bfloat16(std::nextafter(fmid, 0.f)).x, b) << "below midpoint of 0x" << std::hex << b;
    ASSERT_EQ(bfloat16(std::nextafter(fmid, std::numeric_limits<float>::infinity())).x, b + 1) << "above midpoint of 0x" << std::hex << b;
    ASSERT_EQ(bfloat16(-fmid).x, even | 0x8000) << "negative tie at 0x" << std::hex << b;
  }
}

TEST(BFloat16, KeepsFloatRangeAndOverflowsOnlyPastIt) {
  EXPECT_EQ(bfloat16(65520.f).x, 0x4780);  // Inf in float16, 65536 here
  EXPECT_FALSE(isinf(bfloat16(1e38f)));
  EXPECT_EQ(float(bfloat16::from_bits(0x7f7f)), static_cast<float>(type_max<bfloat16>()));
  // Past the midpoint between the largest finite value and 2^128: Inf.
  const double top = bf16_value(0x7f7f), mid = top + std::ldexp(1.0, 127 - 8);
  EXPECT_EQ(bfloat16(std::nextafter(static_cast<float>(mid), 0.f)).x, 0x7f7f);
  EXPECT_EQ(bfloat16(std::numeric_limits<float>::max()).x, 0x7f80);  // above the midpoint
  EXPECT_EQ(bfloat16(std::numeric_limits<float>::infinity()).x, 0x7f80);
  EXPECT_EQ(bfloat16(-std::numeric_limits<float>::infinity()).x, 0xff80);
  // Gradients that vanish in float16 stay: 2^-30 and a float subnormal.
  EXPECT_EQ(float(bfloat16(std::ldexp(1.f, -30))), std::ldexp(1.f, -30));
  EXPECT_EQ(float(bfloat16(std::ldexp(1.f, -130))), std::ldexp(1.f, -130));
  EXPECT_EQ(bfloat16(std::numeric_limits<float>::denorm_min()).x, 0x0000);  // 2^-149 ties down to 0
  EXPECT_EQ(bfloat16(-std::ldexp(1.f, -140)).x, 0x8000);  // signed zero
}

TEST(BFloat16, NaNStaysQuietNaN) {
  EXPECT_TRUE(isnan(bfloat16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(isnan(bfloat16(-std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload lives only in the dropped bits must not become Inf.
  float payload;
  const uint32_t bits = 0x7f800001u;
  std::memcpy(&payload, &bits, sizeof(payload));
  const bfloat16 n(payload);
  EXPECT_TRUE(isnan(n));
  EXPECT_EQ(n.x & 0x0040, 0x0040);  // quiet
  EXPECT_TRUE(isnan(bfloat16(std::numeric_limits<float>::signaling_NaN())));
}

TEST(BFloat16, ArithmeticRoundsOnceAndTypeFacts) {
  bfloat16 a(1.f);
  a += std::ldexp(1.f, -8);  // exactly half an ulp at 1: ties to even, stays 1
  EXPECT_EQ(a.x, bfloat16(1.f).x);
  a += std::ldexp(1.f, -7);
  EXPECT_EQ(float(a), 1.f + std::ldexp(1.f, -7));
  static_assert(std::is_same_v<math_t<bfloat16>, float>);
  static_assert(is_half_v<bfloat16> && is_half_v<float16> && !is_half_v<float>);
  EXPECT_EQ(type_epsilon<bfloat16>(), std::ldexp(1.0, -7));
  EXPECT_EQ(type_of<bfloat16>(), BFLOAT16);
  EXPECT_EQ(type_size(BFLOAT16), 2u);
  EXPECT_STREQ(type_name(BFLOAT16), "BFLOAT16");
  EXPECT_TRUE(is_supported_pair(BFLOAT16, BFLOAT16));
  EXPECT_FALSE(is_supported_pair(FLOAT, BFLOAT16));
  EXPECT_FALSE(is_supported_pair(BFLOAT16, FLOAT16));
  for (int i = 0; i < kNumTypes; ++i) EXPECT_EQ(type_index(kAllTypes[i]), i);
}

// Bulk conversions between every pair of storage types agree with the
// scalar path through float (bfloat16 <-> float16 rounds once, from the
// exact float value).
TEST(BFloat16, BulkConversionsMatchScalar) {
  std::vector<bfloat16> b(65536);
  for (uint32_t i = 0; i < 65536; ++i) b[i] = bfloat16::from_bits(static_cast<uint16_t>(i));
  std::vector<float> f(65536);
  std::vector<float16> h(65536);
  convert_array<bfloat16, float>(65536, b.data(), f.data());
  convert_array<bfloat16, float16>(65536, b.data(), h.data());
  for (uint32_t i = 0; i < 65536; ++i) {
    if (isnan(b[i])) {
      ASSERT_TRUE(std::isnan(f[i]) && isnan(h[i]));
      continue;
    }
    ASSERT_EQ(f[i], float(b[i])) << i;
    ASSERT_EQ(h[i].x, float16(float(b[i])).x) << i;
  }
  std::vector<bfloat16> back(65536);
  convert_array<float16, bfloat16>(65536, h.data(), back.data());
  for (uint32_t i = 0; i < 65536; ++i)
    if (!isnan(h[i])) ASSERT_EQ(back[i].x, bfloat16(float(h[i])).x) << i;
}

}  // namespace
}  // namespace cortado
