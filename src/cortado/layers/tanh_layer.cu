// TanH kernels. One thread per element in a grid-stride loop (64-bit
// indexes); each value is loaded from its storage type into its math type
// (float for float16, double for double), computed and stored once. Nothing
// accumulates. The backward works from the output y, as the CPU path does.
#include "cortado/layers/tanh_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

__device__ __forceinline__ float tanh_of(float v) { return tanhf(v); }
__device__ __forceinline__ double tanh_of(double v) { return tanh(v); }

template <typename T>
__global__ void tanh_forward_kernel(int64_t n, const T* x, T* y) {
  CORTADO_KERNEL_LOOP(i, n) store(y, i, tanh_of(load(x, i)));
}

template <typename T>
__global__ void tanh_backward_kernel(int64_t n, const T* dy, const T* y, T* dx) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const M s = load(y, i);
    const M g = load(dy, i);
    store(dx, i, g * (M(1) - s * s));
  }
}

}  // namespace

namespace gpu {

template <typename T>
void tanh_forward(int64_t n, const T* x, T* y, CUstream_st* stream) {
  if (n == 0) return;
  tanh_forward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(x), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void tanh_backward(int64_t n, const T* dy, const T* y, T* dx, CUstream_st* stream) {
  if (n == 0) return;
  tanh_backward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(dy), dev(y), dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_TANH(T)                                   \
  template void tanh_forward<T>(int64_t, const T*, T*, CUstream_st*); \
  template void tanh_backward<T>(int64_t, const T*, const T*, T*, CUstream_st*);
CORTADO_INSTANTIATE_TANH(double)
CORTADO_INSTANTIATE_TANH(float)
CORTADO_INSTANTIATE_TANH(float16)
CORTADO_INSTANTIATE_TANH(bfloat16)

}  // namespace gpu
}  // namespace cortado
