// float16 against an independent reference: the value of every half pattern
// computed from its fields, and float -> half rounding decided by comparing
// distances to the two neighbouring halves.
#include "cortado/float16.hpp"
#include "cortado/util/math.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace cortado {
namespace {

// The exact value of a half bit pattern, from its fields (NaN for NaNs).
double half_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0x1f) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else {
    v = std::ldexp(1024 + mant, exp - 25);
  }
  return sign ? -v : v;
}

TEST(Float16, EveryPatternToFloatIsExact) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float16 h = float16::from_bits(static_cast<uint16_t>(b));
    const double want = half_value(static_cast<uint16_t>(b));
    const float got = float(h);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "pattern " << b;
      EXPECT_TRUE(isnan(h));
    } else {
      ASSERT_EQ(double(got), want) << "pattern 0x" << std::hex << b;
      EXPECT_EQ(std::signbit(got), (b & 0x8000) != 0);
    }
  }
}

TEST(Float16, EveryPatternRoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float16 h = float16::from_bits(static_cast<uint16_t>(b));
    const float16 back = float16(float(h));
    if (isnan(h)) {
      EXPECT_TRUE(isnan(back)) << "pattern " << b;
    } else {
      ASSERT_EQ(back.x, h.x) << "pattern 0x" << std::hex << b;
    }
  }
}

// Between each pair of adjacent finite halves: just below, at, and just above
// the midpoint. Ties go to the even pattern.
TEST(Float16, RoundsToNearestEvenBetweenNeighbours) {
  for (uint32_t b = 0; b < 0x7bff; ++b) {  // positive finite, excluding the largest
    const double lo = half_value(static_cast<uint16_t>(b)), hi = half_value(static_cast<uint16_t>(b + 1));
    const double mid = (lo + hi) / 2;  // exact in float: halves have 11 significant bits
    const float fmid = static_cast<float>(mid);
    ASSERT_EQ(double(fmid), mid);
    const uint16_t even = (b % 2 == 0) ? b : b + 1;
    EXPECT_EQ(float16(fmid).x, even) << "tie between 0x" << std::hex << b << " and 0x" << b + 1;
    EXPECT_EQ(float16(std::nextafter(fmid, 0.f)).x, b) << "below midpoint of 0x" << std::hex << b;
    EXPECT_EQ(float16(std::nextafter(fmid, 1e9f)).x, b + 1) << "above midpoint of 0x" << std::hex << b;
    EXPECT_EQ(float16(-fmid).x, even | 0x8000) << "negative tie at 0x" << std::hex << b;
  }
}

TEST(Float16, OverflowsToInfinity) {
  EXPECT_EQ(float16(65504.f).x, 0x7bff);
  EXPECT_EQ(float16(65519.99f).x, 0x7bff);  // below the midpoint to 2^16: rounds down
  EXPECT_EQ(float16(65520.f).x, 0x7c00);    // the midpoint ties to even: Inf
  EXPECT_EQ(float16(1e6f).x, 0x7c00);
  EXPECT_EQ(float16(-1e6f).x, 0xfc00);
  EXPECT_EQ(float16(std::numeric_limits<float>::infinity()).x, 0x7c00);
  EXPECT_TRUE(isinf(float16(-std::numeric_limits<float>::infinity())));
  EXPECT_EQ(float16(std::numeric_limits<float>::max()).x, 0x7c00);
}

TEST(Float16, SubnormalsAndUnderflow) {
  const float tiny = std::ldexp(1.f, -24);  // smallest subnormal half
  EXPECT_EQ(float16(tiny).x, 0x0001);
  EXPECT_EQ(float16(std::ldexp(1.f, -25)).x, 0x0000);  // exactly half of it: tie to even (zero)
  EXPECT_EQ(float16(std::nextafter(std::ldexp(1.f, -25), 1.f)).x, 0x0001);
  EXPECT_EQ(float16(std::ldexp(1.f, -26)).x, 0x0000);
  EXPECT_EQ(float16(-std::ldexp(1.f, -26)).x, 0x8000);  // signed zero
  EXPECT_EQ(float16(std::ldexp(1.f, -14)).x, 0x0400);  // smallest normal
  EXPECT_EQ(float16(std::ldexp(1023.f, -24)).x, 0x03ff);  // largest subnormal
  EXPECT_EQ(float16(std::numeric_limits<float>::denorm_min()).x, 0x0000);
  EXPECT_EQ(float(float16::from_bits(0x0001)), tiny);
}

TEST(Float16, NaNStaysNaN) {
  const float16 n(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(isnan(n));
  EXPECT_FALSE(isinf(n));
  EXPECT_TRUE(std::isnan(float(n)));
  EXPECT_TRUE(isnan(float16(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(isnan(float16(std::numeric_limits<float>::signaling_NaN())));
}

TEST(Float16, ArithmeticRoundsOnce) {
  float16 a(1.f);
  a += std::ldexp(1.f, -11);  // exactly half an ulp at 1: ties to even, stays 1
  EXPECT_EQ(a.x, float16(1.f).x);
  a += std::ldexp(1.f, -10);
  EXPECT_EQ(float(a), 1.f + std::ldexp(1.f, -10));
  float16 b(3.f);
  b *= 0.5f;
  EXPECT_EQ(float(b), 1.5f);
}

TEST(Float16, MathTypeAndEpsilon) {
  static_assert(std::is_same_v<math_t<float16>, float>);
  static_assert(std::is_same_v<math_t<double>, double>);
  EXPECT_EQ(type_epsilon<float16>(), std::ldexp(1.0, -10));
  EXPECT_EQ(float(float16(1.f + type_epsilon<float16>())), 1.f + std::ldexp(1.f, -10));
}

}  // namespace
}  // namespace cortado

namespace cortado {
namespace {

// The bulk conversions (F16C where the CPU has it) agree with the scalar
// conversion on every half pattern and on floats around every rounding edge.
TEST(Float16, BulkConversionMatchesScalar) {
  std::vector<float16> halves(65536);
  for (uint32_t b = 0; b < 65536; ++b) halves[b] = float16::from_bits(static_cast<uint16_t>(b));
  std::vector<float> floats(65536);
  convert_array<float16, float>(65536, halves.data(), floats.data());
  for (uint32_t b = 0; b < 65536; ++b) {
    if (isnan(halves[b])) {
      ASSERT_TRUE(std::isnan(floats[b]));
    } else {
      ASSERT_EQ(floats[b], float(halves[b])) << b;
    }
  }
  // Midpoints between neighbours and their float neighbours, plus overflow
  // and underflow edges, in an odd count so the scalar tail runs too.
  std::vector<float> in;
  for (uint32_t b = 0; b < 0x7bff; b += 7) {
    const float mid = (float(float16::from_bits(b)) + float(float16::from_bits(b + 1))) / 2;
    in.insert(in.end(), {mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f), -mid});
  }
  in.insert(in.end(), {65504.f, 65519.f, 65520.f, 1e30f, -1e30f, std::ldexp(1.f, -25), std::ldexp(1.f, -26),
                       std::numeric_limits<float>::infinity(), 0.f, -0.f, std::numeric_limits<float>::denorm_min()});
  std::vector<float16> out(in.size());
  convert_array<float, float16>(static_cast<int64_t>(in.size()), in.data(), out.data());
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i].x, float16(in[i]).x) << "value " << in[i];
}

}  // namespace
}  // namespace cortado
