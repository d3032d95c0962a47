#pragma once
// bfloat16 ("brain float") on the host: the upper half of an IEEE binary32.
//
// Contract:
// - Same 16-bit layout as CUDA's __nv_bfloat16 (1 sign, 8 exponent, 7
//   mantissa bits), so buffers move between host and device unchanged.
// - float -> bfloat16 rounds to nearest, ties to even. The exponent range is
//   float's: only values at or above 2^128 * (1 - 2^-9) in magnitude become
//   Inf, float subnormals round like any other value, NaN stays NaN (quiet,
//   sign kept).
// - bfloat16 -> float is exact (a 16-bit shift).
// - Arithmetic converts to float, computes in float, and rounds once.
// Why a second 16-bit type: float16 needs loss scaling because its range
// ends at 65504 and its normals at 2^-14; bfloat16 keeps float's range and
// pays with 8 bits of precision instead of 11 (epsilon 2^-7).
// Exhaustively tested over all 65,536 patterns (tests/bfloat16_test.cpp).

#include <cstdint>
#include <type_traits>

#include "cortado/float16.hpp"

namespace cortado {

namespace detail {

// Without branches, so that a loop of it vectorizes (convert_array).
inline uint16_t float_to_bfloat_bits(float f) {
  const uint32_t u = float_bits(f);
  // Round the 16 dropped bits to nearest even; a carry moves into the
  // exponent, and past the largest finite value it gives Inf, as it must.
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x0040u;  // NaN: keep the sign, make it quiet
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

inline float bfloat_bits_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

}  // namespace detail

struct bfloat16 {
  uint16_t x = 0;

  bfloat16() = default;
  bfloat16(float f) : x(detail::float_to_bfloat_bits(f)) {}  // NOLINT: implicit like float16
  explicit bfloat16(double d) : bfloat16(static_cast<float>(d)) {}
  explicit bfloat16(int i) : bfloat16(static_cast<float>(i)) {}

  static bfloat16 from_bits(uint16_t b) {
    bfloat16 h;
    h.x = b;
    return h;
  }
  operator float() const { return detail::bfloat_bits_to_float(x); }  // NOLINT

  bfloat16& operator+=(float v) { return *this = bfloat16(float(*this) + v); }
  bfloat16& operator-=(float v) { return *this = bfloat16(float(*this) - v); }
  bfloat16& operator*=(float v) { return *this = bfloat16(float(*this) * v); }
  bfloat16& operator/=(float v) { return *this = bfloat16(float(*this) / v); }
};

static_assert(sizeof(bfloat16) == 2, "bfloat16 must be 2 bytes like __nv_bfloat16");

inline bool isnan(bfloat16 h) { return (h.x & 0x7f80u) == 0x7f80u && (h.x & 0x7fu) != 0; }
inline bool isinf(bfloat16 h) { return (h.x & 0x7fffu) == 0x7f80u; }

template <> struct math_type<bfloat16> { using type = float; };
/// 2^-7.
template <> constexpr double type_epsilon<bfloat16>() { return 1.0 / 128.0; }
/// (2 - 2^-7) * 2^127.
template <> constexpr double type_max<bfloat16>() { return 3.3895313892515355e38; }

/// Whether T is one of the 16-bit storage types that compute in float.
template <typename T>
constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

}  // namespace cortado
