// BNLL kernels. One thread per element in a grid-stride loop (64-bit
// indexes); values are loaded into their math type (float for float16,
// double for double), computed as on the CPU path and stored once. Nothing
// accumulates.
#include "cortado/layers/bnll_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

__device__ __forceinline__ float log1p_of(float v) { return log1pf(v); }
__device__ __forceinline__ double log1p_of(double v) { return log1p(v); }

template <typename T>
__global__ void bnll_forward_kernel(int64_t n, const T* x, T* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const M v = load(x, i);
    store(y, i, v > M(0) ? v + log1p_of(exp_of(-v)) : log1p_of(exp_of(v)));
  }
}

template <typename T>
__global__ void bnll_backward_kernel(int64_t n, const T* dy, const T* x, T* dx) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const M v = load(x, i);
    const M e = exp_of(M(50) < v ? M(50) : v);  // std::min's order: a NaN x stays NaN, as on the CPU
    store(dx, i, load(dy, i) * e / (e + M(1)));
  }
}

}  // namespace

namespace gpu {

template <typename T>
void bnll_forward(int64_t n, const T* x, T* y, CUstream_st* stream) {
  if (n == 0) return;
  bnll_forward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(x), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void bnll_backward(int64_t n, const T* dy, const T* x, T* dx, CUstream_st* stream) {
  if (n == 0) return;
  bnll_backward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(dy), dev(x), dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_BNLL(T)                                   \
  template void bnll_forward<T>(int64_t, const T*, T*, CUstream_st*); \
  template void bnll_backward<T>(int64_t, const T*, const T*, T*, CUstream_st*);
CORTADO_INSTANTIATE_BNLL(double)
CORTADO_INSTANTIATE_BNLL(float)
CORTADO_INSTANTIATE_BNLL(float16)
CORTADO_INSTANTIATE_BNLL(bfloat16)

}  // namespace gpu
}  // namespace cortado
