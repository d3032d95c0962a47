#pragma once
// The kernels of ElementwiseLayer (include/cortado/layers/elementwise_layer.hpp),
// for .cu files only: an op's .cu includes this and its header, then writes
// CORTADO_INSTANTIATE_ELEMENTWISE_GPU(XOp).
//
// One thread per V values in a grid-stride loop (64-bit indexes): V = 16 /
// sizeof(T) (one 16-byte load or store per array) where every pointer is
// 16-byte aligned and the count a multiple of V, else V = 1
// (vector_access.cuh). Each value is loaded from its storage type into its
// math type (float for __half and __nv_bfloat16, the type itself otherwise),
// passed through the op (copied to the kernel by value, its parameters in
// registers) and stored once, rounding to nearest even. Nothing accumulates.
// The backward loads only what the op's kBackwardReads names.

#include "cortado/layers/elementwise_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"
#include "vector_access.cuh"

namespace cortado {
namespace kernels {

template <int V, typename Op, typename T>
__global__ void elementwise_forward_kernel(int64_t vectors, const T* x, T* y, Op op) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(q, vectors) {
    const VecOf<T, V> in = load_vec<V>(x, q * V);
    VecOf<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) store(out.v, k, op.template forward<M>(load(in.v, k)));
    store_vec<V>(y, q * V, out);
  }
}

template <int V, typename Op, typename T>
__global__ void elementwise_backward_kernel(int64_t vectors, const T* x, const T* y, const T* dy, T* dx, Op op) {
  using M = dmath_t<T>;
  constexpr ElementwiseReads r = Op::kBackwardReads;
  constexpr bool reads_x = r == ElementwiseReads::kX || r == ElementwiseReads::kXY;
  constexpr bool reads_y = r == ElementwiseReads::kY || r == ElementwiseReads::kXY;
  CORTADO_KERNEL_LOOP(q, vectors) {
    const int64_t j = q * V;
    VecOf<T, V> xv{}, yv{};
    if (reads_x) xv = load_vec<V>(x, j);
    if (reads_y) yv = load_vec<V>(y, j);
    const VecOf<T, V> g = load_vec<V>(dy, j);
    VecOf<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const M a = reads_x ? M(load(xv.v, k)) : M(0);
      const M b = reads_y ? M(load(yv.v, k)) : M(0);
      store(out.v, k, op.template backward<M>(a, b, M(load(g.v, k))));
    }
    store_vec<V>(dx, j, out);
  }
}

}  // namespace kernels

namespace gpu {

template <typename Op, typename T>
void elementwise_forward(int64_t n, const T* x, T* y, const Op& op, CUstream_st* stream) {
  if (n == 0) return;
  constexpr int V = static_cast<int>(16 / sizeof(T));
  if (kernels::vector_width(n, sizeof(T), {x, y}) > 1) {
    kernels::elementwise_forward_kernel<V><<<cuda::blocks_for(n / V), cuda::kThreads, 0, stream>>>(
        n / V, kernels::dev(x), kernels::dev(y), op);
  } else {
    kernels::elementwise_forward_kernel<1><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
        n, kernels::dev(x), kernels::dev(y), op);
  }
  CORTADO_KERNEL_CHECK();
}

template <typename Op, typename T>
void elementwise_backward(int64_t n, const T* x, const T* y, const T* dy, T* dx, const Op& op,
                          CUstream_st* stream) {
  if constexpr (Op::kBackwardReads != ElementwiseReads::kNone) {
    if (n == 0) return;
    constexpr ElementwiseReads r = Op::kBackwardReads;
    const T* xr = r == ElementwiseReads::kX || r == ElementwiseReads::kXY ? x : nullptr;
    const T* yr = r == ElementwiseReads::kY || r == ElementwiseReads::kXY ? y : nullptr;
    constexpr int V = static_cast<int>(16 / sizeof(T));
    if (kernels::vector_width(n, sizeof(T), {xr, yr, dy, dx}) > 1) {
      kernels::elementwise_backward_kernel<V><<<cuda::blocks_for(n / V), cuda::kThreads, 0, stream>>>(
          n / V, kernels::dev(x), kernels::dev(y), kernels::dev(dy), kernels::dev(dx), op);
    } else {
      kernels::elementwise_backward_kernel<1><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
          n, kernels::dev(x), kernels::dev(y), kernels::dev(dy), kernels::dev(dx), op);
    }
    CORTADO_KERNEL_CHECK();
  }
}

}  // namespace gpu
}  // namespace cortado

#define CORTADO_ELEMENTWISE_GPU_TYPE_(Op, T)                                                                  \
  template void ::cortado::gpu::elementwise_forward<Op, T>(int64_t, const T*, T*, const Op&, CUstream_st*); \
  template void ::cortado::gpu::elementwise_backward<Op, T>(int64_t, const T*, const T*, const T*, T*,      \
                                                            const Op&, CUstream_st*);
/// In the op's .cu: the launchers of Op for every storage type (an op
/// without a backward gets an empty backward launcher, which nothing calls).
#define CORTADO_INSTANTIATE_ELEMENTWISE_GPU(Op) \
  CORTADO_FOR_EACH_STORAGE_TYPE_WITH(CORTADO_ELEMENTWISE_GPU_TYPE_, Op) static_assert(true, "")
