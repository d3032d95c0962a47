// Kernels of BiasLayer; x, y are (outer, dim, inner).
// Forward: a grid-stride loop, a thread per V values of one channel (16-byte
// loads where inner and the pointers allow), or channels last (inner 1) per
// V neighbouring channels of one row, y = x + b[d] in float (double for
// double), rounded once. Backward: sum dy per bias value d in float
// (double for double), many blocks per value (channel_reduce.cuh).

#include "cortado/layers/bias_layer.hpp"
#include "cortado/storage_types.hpp"
#include "channel_reduce.cuh"
#include "vector_access.cuh"
#include "device_values.cuh"

namespace cortado {

namespace {

using namespace kernels;

// One thread per V values of one channel (V divides inner), the channel
// found once per V values.
template <typename I, int V, typename T>
__global__ void forward_kernel(int64_t vectors, int64_t dim, int64_t inner, const T* x, const T* b, T* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(q, vectors) {
    const int64_t j = q * V;
    const M bv = load(b, kernels::channel_of<I>(j, inner, dim));
    const VecOf<T, V> in = load_vec<V>(x, j);
    VecOf<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) store(out.v, k, M(load(in.v, k)) + bv);
    store_vec<V>(y, j, out);
  }
}

// Channels last (inner 1, dim a multiple of V): one thread per V
// neighbouring channels of one row, b read as V values too; the channel once
// per V values.
template <typename I, int V, typename T>
__global__ void forward_rows_kernel(int64_t vectors, int64_t dim, const T* x, const T* b, T* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(q, vectors) {
    const int64_t j = q * V;
    const int64_t d = static_cast<int64_t>(static_cast<I>(j) % static_cast<I>(dim));
    const VecOf<T, V> in = load_vec<V>(x, j), bv = load_vec<V>(b, d);
    VecOf<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) store(out.v, k, M(load(in.v, k)) + M(load(bv.v, k)));
    store_vec<V>(y, j, out);
  }
}

template <typename T>
struct SumDy {
  const T* dy;
  template <int V, typename A>
  __device__ __forceinline__ void add(int64_t j, int64_t, A* acc) const {
    const VecOf<T, V> g = load_vec<V>(dy, j);
#pragma unroll
    for (int k = 0; k < V; ++k) acc[0] += load(g.v, k);
  }
};
template <typename T>
struct FinishDb {
  bool accumulate;
  T* db;
  __device__ void operator()(int64_t d, const dmath_t<T>* t) const {
    using M = dmath_t<T>;
    store(db, d, (accumulate ? M(load(db, d)) : M(0)) + t[0]);
  }
};

}  // namespace

namespace gpu {

template <typename T>
void bias_forward(int64_t outer, int64_t dim, int64_t inner, const T* x, const T* b, T* y, CUstream_st* stream) {
  const int64_t total = outer * dim * inner;
  if (total == 0) return;
  constexpr int V = static_cast<int>(16 / sizeof(T));
  if (inner == 1 && vector_width(dim, sizeof(T), {x, y, b}) > 1)  // channels last
    CORTADO_LAUNCH_INDEXED_V(forward_rows_kernel, V, total, stream, total / V, dim, dev(x), dev(b), dev(y));
  else if (vector_width(inner, sizeof(T), {x, y}) > 1)
    CORTADO_LAUNCH_INDEXED_V(forward_kernel, V, total, stream, total / V, dim, inner, dev(x), dev(b), dev(y));
  else
    CORTADO_LAUNCH_INDEXED_V(forward_kernel, 1, total, stream, total, dim, inner, dev(x), dev(b), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void bias_backward(int64_t outer, int64_t dim, int64_t inner, const T* dy, bool accumulate, T* db,
                   CUstream_st* stream) {
  if (dim == 0) return;
  using D = dev_t<T>;
  kernels::channel_reduce_vec<1, dmath_t<D>, sizeof(T)>(kernels::ChannelShape{outer, dim, inner}, {dy},
                                                        SumDy<D>{dev(dy)}, FinishDb<D>{accumulate, dev(db)}, stream);
}

#define CORTADO_INSTANTIATE_BIAS_GPU(T)                                                                  \
  template void bias_forward<T>(int64_t, int64_t, int64_t, const T*, const T*, T*, CUstream_st*);       \
  template void bias_backward<T>(int64_t, int64_t, int64_t, const T*, bool, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_BIAS_GPU)
#undef CORTADO_INSTANTIATE_BIAS_GPU

}  // namespace gpu

}  // namespace cortado
