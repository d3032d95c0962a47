#pragma once
// Storage types and the one list of (Ftype, Btype) pairs Cortado instantiates.
//
// The pairs: every pair over {float, float16}, plus (double, double) for
// gradient checks. CORTADO_INSTANTIATE_LAYER instantiates a layer class for
// exactly this list, and dispatch_pair() (used by the layer factory) walks the
// same list, so adding a type is a change here and nowhere else.

#include <string>

#include "cortado/common.hpp"
#include "cortado/float16.hpp"
#include "cortado.pb.h"

namespace cortado {

template <typename T> struct type_id;
template <> struct type_id<double> { static constexpr Type value = DOUBLE; };
template <> struct type_id<float> { static constexpr Type value = FLOAT; };
template <> struct type_id<float16> { static constexpr Type value = FLOAT16; };
template <typename T> constexpr Type type_of() { return type_id<T>::value; }

inline size_t type_size(Type t) {
  switch (t) {
    case DOUBLE: return sizeof(double);
    case FLOAT: return sizeof(float);
    case FLOAT16: return sizeof(float16);
  }
  return 0;
}

inline const char* type_name(Type t) {
  switch (t) {
    case DOUBLE: return "DOUBLE";
    case FLOAT: return "FLOAT";
    case FLOAT16: return "FLOAT16";
  }
  return "?";
}

/// Short name used in test names: f64, f32, f16.
inline const char* type_short(Type t) {
  switch (t) {
    case DOUBLE: return "f64";
    case FLOAT: return "f32";
    case FLOAT16: return "f16";
  }
  return "?";
}

constexpr int kNumTypes = 3;

/// Calls f.template operator()<T>() with T the C++ type of t.
template <typename F>
decltype(auto) dispatch_type(Type t, F&& f) {
  switch (t) {
    case DOUBLE: return f(double{});
    case FLOAT: return f(float{});
    case FLOAT16: break;
  }
  return f(float16{});
}

/// Whether (f, b) is one of the instantiated pairs.
inline bool is_supported_pair(Type f, Type b) {
  if (f == DOUBLE || b == DOUBLE) return f == b;
  return true;
}

}  // namespace cortado

#define CORTADO_INSTANTIATE_LAYER(Class)          \
  template class Class<double, double>;           \
  template class Class<float, float>;             \
  template class Class<float, ::cortado::float16>; \
  template class Class<::cortado::float16, float>; \
  template class Class<::cortado::float16, ::cortado::float16>
