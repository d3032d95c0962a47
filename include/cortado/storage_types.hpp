#pragma once
// The one list of the storage types that .cu files instantiate their
// launchers for, so that adding a type (FP8, say) is a change here and not in
// every .cu file. The (Ftype, Btype) pairs of the layer classes are listed in
// types.hpp (CORTADO_FOR_EACH_PAIR).
//
// A .cu file writes its instantiation once, for one type T, and applies it to
// the list:
//   #define CORTADO_INSTANTIATE_RELU(T) template void relu_forward<T>(int64_t, const T*, T*, CUstream_st*);
//   CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_RELU)
// A launcher that also takes T's math type writes math_t<T> in the
// instantiation (float for the 16-bit types, the type itself otherwise).

#include "cortado/bfloat16.hpp"
#include "cortado/float16.hpp"

/// M(X, T) for every storage type T: double, float, float16, bfloat16 (X is
/// passed through, as CORTADO_FOR_EACH_PAIR does).
#define CORTADO_FOR_EACH_STORAGE_TYPE_WITH(M, X) \
  M(X, double)                                   \
  M(X, float)                                    \
  M(X, ::cortado::float16)                       \
  M(X, ::cortado::bfloat16)

#define CORTADO_STORAGE_TYPE_APPLY_(M, T) M(T)
/// M(T) for every storage type T.
#define CORTADO_FOR_EACH_STORAGE_TYPE(M) CORTADO_FOR_EACH_STORAGE_TYPE_WITH(CORTADO_STORAGE_TYPE_APPLY_, M)
