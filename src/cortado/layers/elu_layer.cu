// ELU kernels. One thread per element in a grid-stride loop (64-bit
// indexes); values are loaded into their math type (float for float16,
// double for double), computed as on the CPU path and stored once. Nothing
// accumulates.
#include "cortado/layers/elu_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

__device__ __forceinline__ float expm1_of(float v) { return expm1f(v); }
__device__ __forceinline__ double expm1_of(double v) { return expm1(v); }

template <typename T>
__global__ void elu_forward_kernel(int64_t n, const T* x, T* y, dmath_t<T> alpha, dmath_t<T> lambda) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const M v = load(x, i);
    store(y, i, lambda * (v > M(0) ? v : alpha * expm1_of(v)));
  }
}

template <typename T>
__global__ void elu_backward_kernel(int64_t n, const T* dy, const T* x, const T* y, T* dx, dmath_t<T> lambda,
                                    dmath_t<T> lambda_alpha) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const M g = load(dy, i);
    store(dx, i, load(x, i) > M(0) ? g * lambda : g * (load(y, i) + lambda_alpha));
  }
}

}  // namespace

namespace gpu {

template <typename T>
void elu_forward(int64_t n, const T* x, T* y, double alpha, double lambda, CUstream_st* stream) {
  if (n == 0) return;
  using M = dmath_t<dev_t<T>>;
  elu_forward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(x), dev(y), M(alpha), M(lambda));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void elu_backward(int64_t n, const T* dy, const T* x, const T* y, T* dx, double alpha, double lambda,
                  CUstream_st* stream) {
  if (n == 0) return;
  using M = dmath_t<dev_t<T>>;
  elu_backward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(dy), dev(x), dev(y), dev(dx),
                                                                          M(lambda), M(lambda * alpha));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_ELU(T)                                                    \
  template void elu_forward<T>(int64_t, const T*, T*, double, double, CUstream_st*); \
  template void elu_backward<T>(int64_t, const T*, const T*, const T*, T*, double, double, CUstream_st*);
CORTADO_INSTANTIATE_ELU(double)
CORTADO_INSTANTIATE_ELU(float)
CORTADO_INSTANTIATE_ELU(float16)
CORTADO_INSTANTIATE_ELU(bfloat16)

}  // namespace gpu
}  // namespace cortado
