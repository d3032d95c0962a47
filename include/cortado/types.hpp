#pragma once
// Storage types and the one list of (Ftype, Btype) pairs Cortado instantiates.
//
// The pairs: every pair over {float, float16}, plus (bfloat16, bfloat16) and
// (double, double) for gradient checks. CORTADO_FOR_EACH_PAIR is that list:
// CORTADO_INSTANTIATE_LAYER instantiates a layer class for exactly it, and
// the layer factory walks it, so adding a pair is a change here and nowhere
// else. bfloat16 pairs only with itself: mixing it with float in one layer
// has no use the net-level boundaries between layers do not already give.

#include <array>
#include <string>

#include "cortado/bfloat16.hpp"
#include "cortado/common.hpp"
#include "cortado.pb.h"

namespace cortado {

template <typename T> struct type_id;
template <> struct type_id<double> { static constexpr Type value = DOUBLE; };
template <> struct type_id<float> { static constexpr Type value = FLOAT; };
template <> struct type_id<float16> { static constexpr Type value = FLOAT16; };
template <> struct type_id<bfloat16> { static constexpr Type value = BFLOAT16; };
template <typename T> constexpr Type type_of() { return type_id<T>::value; }

/// The storage types, in the order of type_index().
constexpr int kNumTypes = 4;
constexpr std::array<Type, kNumTypes> kAllTypes = {DOUBLE, FLOAT, FLOAT16, BFLOAT16};

/// 0 .. kNumTypes-1: t's slot in per-type arrays (the proto's numbers are
/// not dense: BFLOAT16 is 1000, clear of NVCaffe's values).
constexpr int type_index(Type t) {
  switch (t) {
    case DOUBLE: return 0;
    case FLOAT: return 1;
    case FLOAT16: return 2;
    case BFLOAT16: return 3;
  }
  return 1;
}

inline size_t type_size(Type t) {
  switch (t) {
    case DOUBLE: return sizeof(double);
    case FLOAT: return sizeof(float);
    case FLOAT16: return sizeof(float16);
    case BFLOAT16: return sizeof(bfloat16);
  }
  return 0;
}

inline const char* type_name(Type t) {
  switch (t) {
    case DOUBLE: return "DOUBLE";
    case FLOAT: return "FLOAT";
    case FLOAT16: return "FLOAT16";
    case BFLOAT16: return "BFLOAT16";
  }
  return "?";
}

/// Short name used in test names: f64, f32, f16, bf16.
inline const char* type_short(Type t) {
  switch (t) {
    case DOUBLE: return "f64";
    case FLOAT: return "f32";
    case FLOAT16: return "f16";
    case BFLOAT16: return "bf16";
  }
  return "?";
}

/// Whether t is a 16-bit storage type (computed in float).
inline bool is_half_type(Type t) { return t == FLOAT16 || t == BFLOAT16; }

/// The compute type of a layer's GPU GEMMs and convolutions for a storage
/// type, given its forward_math / backward_math field (has: set at all):
/// float16 accumulates in FP32 unless FLOAT16 is asked for; bfloat16 always
/// in FP32 (cuBLAS and cuDNN have no bfloat16 accumulation); float and double
/// in themselves.
inline Type gpu_math_type(Type storage, bool has, Type requested) {
  if (storage == FLOAT16) return has && requested == FLOAT16 ? FLOAT16 : FLOAT;
  if (storage == BFLOAT16) return FLOAT;
  return storage;
}

/// Calls f(T{}) with T the C++ type of t.
template <typename F>
decltype(auto) dispatch_type(Type t, F&& f) {
  switch (t) {
    case DOUBLE: return f(double{});
    case FLOAT: return f(float{});
    case FLOAT16: return f(float16{});
    case BFLOAT16: break;
  }
  return f(bfloat16{});
}

/// Whether (f, b) is one of the instantiated pairs.
inline bool is_supported_pair(Type f, Type b) {
  if (f == DOUBLE || b == DOUBLE || f == BFLOAT16 || b == BFLOAT16) return f == b;
  return true;
}

}  // namespace cortado

/// M(X, F, B) for every instantiated pair (X is passed through).
#define CORTADO_FOR_EACH_PAIR(M, X)                   \
  M(X, double, double)                                \
  M(X, float, float)                                  \
  M(X, float, ::cortado::float16)                     \
  M(X, ::cortado::float16, float)                     \
  M(X, ::cortado::float16, ::cortado::float16)        \
  M(X, ::cortado::bfloat16, ::cortado::bfloat16)

#define CORTADO_INSTANTIATE_PAIR_(Class, F, B) template class Class<F, B>;
/// Instantiates Class<F, B> for every pair (use as CORTADO_INSTANTIATE_LAYER(X);).
#define CORTADO_INSTANTIATE_LAYER(Class) \
  CORTADO_FOR_EACH_PAIR(CORTADO_INSTANTIATE_PAIR_, Class) static_assert(true, "")
