#pragma once
// IEEE 754 binary16 on the host.
//
// Contract:
// - Same 16-bit layout as CUDA's __half (1 sign, 5 exponent, 10 mantissa bits),
//   so buffers move between host and device without conversion.
// - float -> float16 rounds to nearest, ties to even; values at or above
//   65520 in magnitude become Inf; values below the smallest subnormal half
//   (2^-25 after rounding) become signed zero; NaN stays NaN (quiet).
// - float16 -> float is exact.
// - Arithmetic converts to float, computes in float, and rounds once.
// Software conversion: it is exhaustively tested over all 65,536 patterns and
// needs no CPU feature flags. Bulk conversions go through convert_array (in
// math.hpp) so that a vectorized path can replace the loop in one place.

#include <cstdint>
#include <cstring>
#include <limits>

namespace cortado {

namespace detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline uint16_t float_to_half_bits(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);
  }
  if (abs >= 0x477ff000u) {  // >= 65520: rounds to Inf
    return sign | 0x7c00u;
  }
  if (abs < 0x38800000u) {  // below 2^-14: subnormal half or zero
    // Align the mantissa (with its implicit 1) so that the half subnormal
    // unit 2^-24 is bit 0 after a shift; round to nearest even by hand.
    const uint32_t exp = abs >> 23;
    if (exp < 102) return sign;  // < 2^-25: rounds to zero
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  // Normal: rebias the exponent (127 -> 15) and round 13 dropped bits.
  uint32_t half = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exponent: correct
  return sign | static_cast<uint16_t>(half);
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return bits_float(sign);
  // Subnormal: value = mant * 2^-24, exact in float.
  const float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
  return sign ? -v : v;
}

}  // namespace detail

struct float16 {
  uint16_t x = 0;

  float16() = default;
  float16(float f) : x(detail::float_to_half_bits(f)) {}  // NOLINT: implicit like __half
  explicit float16(double d) : float16(static_cast<float>(d)) {}
  explicit float16(int i) : float16(static_cast<float>(i)) {}

  static float16 from_bits(uint16_t b) {
    float16 h;
    h.x = b;
    return h;
  }
  operator float() const { return detail::half_bits_to_float(x); }  // NOLINT

  float16& operator+=(float v) { return *this = float16(float(*this) + v); }
  float16& operator-=(float v) { return *this = float16(float(*this) - v); }
  float16& operator*=(float v) { return *this = float16(float(*this) * v); }
  float16& operator/=(float v) { return *this = float16(float(*this) / v); }
};

static_assert(sizeof(float16) == 2, "float16 must be 2 bytes like __half");

inline bool isnan(float16 h) { return (h.x & 0x7c00u) == 0x7c00u && (h.x & 0x3ffu) != 0; }
inline bool isinf(float16 h) { return (h.x & 0x7fffu) == 0x7c00u; }

/// The type arithmetic on T runs in: float for float16, T otherwise.
template <typename T> struct math_type { using type = T; };
template <> struct math_type<float16> { using type = float; };
template <typename T> using math_t = typename math_type<T>::type;

/// Machine epsilon of a storage type (2^-10 for float16).
template <typename T> constexpr double type_epsilon() { return std::numeric_limits<T>::epsilon(); }
template <> constexpr double type_epsilon<float16>() { return 1.0 / 1024.0; }

/// Largest finite value of a storage type.
template <typename T> constexpr double type_max() { return std::numeric_limits<T>::max(); }
template <> constexpr double type_max<float16>() { return 65504.0; }

}  // namespace cortado
