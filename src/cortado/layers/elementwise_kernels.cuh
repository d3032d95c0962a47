#pragma once
// The kernels of ElementwiseLayer (include/cortado/layers/elementwise_layer.hpp),
// for .cu files only: an op's .cu includes this and its header, then writes
// CORTADO_INSTANTIATE_ELEMENTWISE_GPU(XOp).
//
// One thread per element in a grid-stride loop (64-bit indexes). Each value
// is loaded from its storage type into its math type (float for __half and
// __nv_bfloat16, the type itself otherwise), passed through the op (copied
// to the kernel by value, its parameters in registers) and stored once,
// rounding to nearest even. Nothing accumulates. The backward loads only
// what the op's kBackwardReads names.

#include "cortado/layers/elementwise_layer.hpp"
#include "cortado/util/storage_types.hpp"
#include "device_values.cuh"

namespace cortado {
namespace kernels {

template <typename Op, typename T>
__global__ void elementwise_forward_kernel(int64_t n, const T* x, T* y, Op op) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) store(y, i, op.template forward<M>(load(x, i)));
}

template <typename Op, typename T>
__global__ void elementwise_backward_kernel(int64_t n, const T* x, const T* y, const T* dy, T* dx, Op op) {
  using M = dmath_t<T>;
  constexpr ElementwiseReads r = Op::kBackwardReads;
  constexpr bool reads_x = r == ElementwiseReads::kX || r == ElementwiseReads::kXY;
  constexpr bool reads_y = r == ElementwiseReads::kY || r == ElementwiseReads::kXY;
  CORTADO_KERNEL_LOOP(i, n) {
    const M xv = reads_x ? load(x, i) : M(0);
    const M yv = reads_y ? load(y, i) : M(0);
    store(dx, i, op.template backward<M>(xv, yv, load(dy, i)));
  }
}

}  // namespace kernels

namespace gpu {

template <typename Op, typename T>
void elementwise_forward(int64_t n, const T* x, T* y, const Op& op, CUstream_st* stream) {
  if (n == 0) return;
  kernels::elementwise_forward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, kernels::dev(x),
                                                                                         kernels::dev(y), op);
  CORTADO_KERNEL_CHECK();
}

template <typename Op, typename T>
void elementwise_backward(int64_t n, const T* x, const T* y, const T* dy, T* dx, const Op& op,
                          CUstream_st* stream) {
  if constexpr (Op::kBackwardReads != ElementwiseReads::kNone) {
    if (n == 0) return;
    kernels::elementwise_backward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
        n, kernels::dev(x), kernels::dev(y), kernels::dev(dy), kernels::dev(dx), op);
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
