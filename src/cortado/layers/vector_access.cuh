#pragma once
// 16-byte loads and stores for elementwise kernels, and the plane-per-block
// mapping of the fused BatchNorm kernels (.cu files only).
//
// A kernel templated on V moves V values of a storage type per load: V = 16 /
// the widest element size it touches (8 __half, 4 float, 2 double), when
// every array's base is 16-byte aligned and each row (a plane, or the whole
// array) holds a multiple of V values; otherwise V = 1. vector_width() makes
// that choice on the host.
// Plane mapping: block b handles planes b, b + gridDim.x, ... of (outer,
// channels, inner) = (N, C, S); the channel is p % C, once per plane, not a
// division per element; the block's threads stride over the plane's S values.

#include <cstdint>
#include <initializer_list>

#include "device_values.cuh"

namespace cortado {
namespace kernels {

template <typename T, int V>
struct alignas(sizeof(T) * V) VecOf {
  T v[V];
};

template <int V, typename T>
__device__ __forceinline__ VecOf<T, V> load_vec(const T* p, int64_t i) {
  return *reinterpret_cast<const VecOf<T, V>*>(p + i);
}
template <int V, typename T>
__device__ __forceinline__ void store_vec(T* p, int64_t i, const VecOf<T, V>& v) {
  *reinterpret_cast<VecOf<T, V>*>(p + i) = v;
}

/// v rounded to storage type T and read back in its math type: where the
/// unfused layer stores a value that the next layer reads.
template <typename T, typename M>
__device__ __forceinline__ M stored(M v) {
  T t;
  store(&t, 0, v);
  return load(&t, 0);
}

/// 16 / `widest` when every pointer (null ones ignored) is 16-byte aligned
/// and `row` is a multiple of it, else 1.
inline int vector_width(int64_t row, size_t widest, std::initializer_list<const void*> ptrs) {
  const int v = static_cast<int>(16 / widest);
  if (v <= 1 || row % v != 0) return 1;
  for (const void* p : ptrs)
    if (p && reinterpret_cast<uintptr_t>(p) % 16 != 0) return 1;
  return v;
}

/// Grid and block for the plane mapping: at most 2^20 blocks (each walks
/// several planes beyond that), threads rounded up to a warp for short planes.
inline dim3 plane_grid(int64_t planes) {
  return dim3(static_cast<unsigned>(planes < (int64_t(1) << 20) ? planes : (int64_t(1) << 20)));
}
inline dim3 plane_block(int64_t row_vectors) {
  int64_t t = (row_vectors + 31) / 32 * 32;
  if (t < 32) t = 32;
  if (t > 256) t = 256;
  return dim3(static_cast<unsigned>(t));
}

}  // namespace kernels
}  // namespace cortado
