// Sigmoid kernels. One thread per element in a grid-stride loop (64-bit
// indexes); each value is loaded from its storage type into its math type
// (float for float16, double for double), computed and stored once. Nothing
// accumulates. The backward works from the output y, as the CPU path does.
#include "cortado/layers/sigmoid_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void sigmoid_forward_kernel(int64_t n, const T* x, T* y) {
  CORTADO_KERNEL_LOOP(i, n) store(y, i, sigmoid_of(load(x, i)));
}

template <typename T>
__global__ void sigmoid_backward_kernel(int64_t n, const T* dy, const T* y, T* dx) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const M s = load(y, i);
    const M g = load(dy, i);
    store(dx, i, g * s * (M(1) - s));
  }
}

}  // namespace

namespace gpu {

template <typename T>
void sigmoid_forward(int64_t n, const T* x, T* y, CUstream_st* stream) {
  if (n == 0) return;
  sigmoid_forward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(x), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void sigmoid_backward(int64_t n, const T* dy, const T* y, T* dx, CUstream_st* stream) {
  if (n == 0) return;
  sigmoid_backward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(dy), dev(y), dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_SIGMOID(T)                                   \
  template void sigmoid_forward<T>(int64_t, const T*, T*, CUstream_st*); \
  template void sigmoid_backward<T>(int64_t, const T*, const T*, T*, CUstream_st*);
CORTADO_INSTANTIATE_SIGMOID(double)
CORTADO_INSTANTIATE_SIGMOID(float)
CORTADO_INSTANTIATE_SIGMOID(float16)
CORTADO_INSTANTIATE_SIGMOID(bfloat16)

}  // namespace gpu
}  // namespace cortado
