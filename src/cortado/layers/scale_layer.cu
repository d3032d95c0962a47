// Kernels of ScaleLayer; x, y are (outer, dim, inner).
// Forward and dx: grid-stride loops, a thread per V values of one channel
// (16-byte loads where inner and the pointers allow), or channels last
// (inner 1) per V neighbouring channels of one row, computing in float
// (double for double) and rounding once. Parameter gradients: sum dy * x and
// sum dy per scale value d in float (double for double), many blocks per
// value (channel_reduce.cuh); the finishing step writes ds[d] and db[d].

#include "cortado/layers/scale_layer.hpp"
#include "cortado/storage_types.hpp"
#include "channel_reduce.cuh"
#include "device_values.cuh"
#include "vector_access.cuh"

namespace cortado {

namespace {

using namespace kernels;

// One thread per V values of one channel (V divides inner), the channel
// found once per V values.
template <typename I, int V, typename T>
__global__ void forward_kernel(int64_t vectors, int64_t dim, int64_t inner, const T* x, const T* s, const T* b,
                               T* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(q, vectors) {
    const int64_t j = q * V;
    const int64_t d = kernels::channel_of<I>(j, inner, dim);
    const M sv = load(s, d), bv = b ? M(load(b, d)) : M(0);
    const VecOf<T, V> in = load_vec<V>(x, j);
    VecOf<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const M v = M(load(in.v, k)) * sv;
      store(out.v, k, b ? v + bv : v);
    }
    store_vec<V>(y, j, out);
  }
}

// Channels last (inner 1, dim a multiple of V): one thread per V
// neighbouring channels of one row, the scales (and biases) read as V values
// too; the channel once per V values. The same arithmetic per value.
template <typename I, int V, typename T>
__global__ void forward_rows_kernel(int64_t vectors, int64_t dim, const T* x, const T* s, const T* b, T* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(q, vectors) {
    const int64_t j = q * V;
    const int64_t d = static_cast<int64_t>(static_cast<I>(j) % static_cast<I>(dim));
    const VecOf<T, V> in = load_vec<V>(x, j), sv = load_vec<V>(s, d);
    VecOf<T, V> bv{};
    if (b) bv = load_vec<V>(b, d);
    VecOf<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const M v = M(load(in.v, k)) * M(load(sv.v, k));
      store(out.v, k, b ? v + M(load(bv.v, k)) : v);
    }
    store_vec<V>(y, j, out);
  }
}

// The parameter gradients: sum dy * x (ds) and sum dy (db) per scale value,
// through channel_reduce.cuh (many blocks per value, a fixed order).
template <typename T, typename X>
struct SumParams {
  const T* dy;
  const X* x;  // in the forward's type, as the CPU reads it; null: no ds
  template <int V, typename A>
  __device__ __forceinline__ void add(int64_t j, int64_t, A* acc) const {
    using M = dmath_t<T>;
    const VecOf<T, V> g = load_vec<V>(dy, j);
    VecOf<X, V> xv{};
    if (x) xv = load_vec<V>(x, j);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const M gk = load(g.v, k);
      if (x) acc[0] += gk * M(load(xv.v, k));
      acc[1] += gk;
    }
  }
};
template <typename T>
struct FinishParams {
  T* ds;
  bool accumulate_s;
  T* db;
  __device__ void operator()(int64_t d, const dmath_t<T>* t) const {
    using M = dmath_t<T>;
    if (ds) store(ds, d, (accumulate_s ? M(load(ds, d)) : M(0)) + t[0]);
    if (db) store(db, d, M(load(db, d)) + t[1]);
  }
};

}  // namespace

namespace gpu {

template <typename T>
void scale_forward(int64_t outer, int64_t dim, int64_t inner, const T* x, const T* s, const T* b, T* y,
                   CUstream_st* stream) {
  const int64_t total = outer * dim * inner;
  if (total == 0) return;
  constexpr int V = static_cast<int>(16 / sizeof(T));
  if (inner == 1 && vector_width(dim, sizeof(T), {x, y, s, b}) > 1)  // channels last
    CORTADO_LAUNCH_INDEXED_V(forward_rows_kernel, V, total, stream, total / V, dim, dev(x), dev(s), dev(b), dev(y));
  else if (vector_width(inner, sizeof(T), {x, y}) > 1)
    CORTADO_LAUNCH_INDEXED_V(forward_kernel, V, total, stream, total / V, dim, inner, dev(x), dev(s), dev(b), dev(y));
  else
    CORTADO_LAUNCH_INDEXED_V(forward_kernel, 1, total, stream, total, dim, inner, dev(x), dev(s), dev(b), dev(y));
  CORTADO_KERNEL_CHECK();
}

// dx = dy * s[d]: the forward's arithmetic without a bias.
template <typename T>
void scale_backward_dx(int64_t outer, int64_t dim, int64_t inner, const T* dy, const T* s, T* dx,
                       CUstream_st* stream) {
  scale_forward<T>(outer, dim, inner, dy, s, nullptr, dx, stream);
}

template <typename T, typename X>
void scale_backward_params(int64_t outer, int64_t dim, int64_t inner, const T* dy, const X* x, T* ds,
                           bool accumulate_s, T* db, CUstream_st* stream) {
  if (dim == 0) return;
  using D = dev_t<T>;
  const X* xr = ds ? x : nullptr;
  constexpr size_t widest = sizeof(T) > sizeof(X) ? sizeof(T) : sizeof(X);
  kernels::channel_reduce_vec<2, dmath_t<D>, widest>(
      kernels::ChannelShape{outer, dim, inner}, {dy, xr},
      SumParams<D, dev_t<X>>{dev(dy), dev(xr)}, FinishParams<D>{dev(ds), accumulate_s, dev(db)}, stream);
}

#define CORTADO_INSTANTIATE_SCALE_GPU(T)                                                                          \
  template void scale_forward<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, T*, CUstream_st*);     \
  template void scale_backward_dx<T>(int64_t, int64_t, int64_t, const T*, const T*, T*, CUstream_st*);           \
  template void scale_backward_params<T, T>(int64_t, int64_t, int64_t, const T*, const T*, T*, bool, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_SCALE_GPU)
#undef CORTADO_INSTANTIATE_SCALE_GPU
// The mixed pairs: gradients in one type, the saved input in the other.
template void scale_backward_params<float, float16>(int64_t, int64_t, int64_t, const float*, const float16*, float*,
                                                    bool, float*, CUstream_st*);
template void scale_backward_params<float16, float>(int64_t, int64_t, int64_t, const float16*, const float*,
                                                    float16*, bool, float16*, CUstream_st*);

}  // namespace gpu

}  // namespace cortado
