// Exp kernels. One thread per element in a grid-stride loop (64-bit
// indexes); values are loaded into their math type (float for float16,
// double for double), computed as on the CPU path and stored once. Nothing
// accumulates. The backward works from the output y.
#include "cortado/layers/exp_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void exp_forward_kernel(int64_t n, const T* x, T* y, dmath_t<T> inner, dmath_t<T> outer) {
  CORTADO_KERNEL_LOOP(i, n) store(y, i, outer * exp_of(inner * load(x, i)));
}

template <typename T>
__global__ void exp_backward_kernel(int64_t n, const T* dy, const T* y, T* dx, dmath_t<T> inner) {
  CORTADO_KERNEL_LOOP(i, n) store(dx, i, load(dy, i) * inner * load(y, i));
}

}  // namespace

namespace gpu {

template <typename T>
void exp_forward(int64_t n, const T* x, T* y, double inner, double outer, CUstream_st* stream) {
  if (n == 0) return;
  using M = dmath_t<dev_t<T>>;
  exp_forward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(x), dev(y), M(inner), M(outer));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void exp_backward(int64_t n, const T* dy, const T* y, T* dx, double inner, CUstream_st* stream) {
  if (n == 0) return;
  using M = dmath_t<dev_t<T>>;
  exp_backward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(dy), dev(y), dev(dx), M(inner));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_EXP(T)                                                 \
  template void exp_forward<T>(int64_t, const T*, T*, double, double, CUstream_st*); \
  template void exp_backward<T>(int64_t, const T*, const T*, T*, double, CUstream_st*);
CORTADO_INSTANTIATE_EXP(double)
CORTADO_INSTANTIATE_EXP(float)
CORTADO_INSTANTIATE_EXP(float16)
CORTADO_INSTANTIATE_EXP(bfloat16)

}  // namespace gpu
}  // namespace cortado
