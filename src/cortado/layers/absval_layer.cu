// AbsVal kernels. One thread per element in a grid-stride loop (64-bit
// indexes); values are loaded into their math type and stored once. Nothing
// accumulates; results are exact and identical to the CPU path.
#include "cortado/layers/absval_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void absval_forward_kernel(int64_t n, const T* x, T* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const M v = load(x, i);
    store(y, i, fabs(v));  // as std::fabs: +0 for -0, NaN's sign cleared
  }
}

template <typename T>
__global__ void absval_backward_kernel(int64_t n, const T* dy, const T* x, T* dx) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const M v = load(x, i);
    const M s = v > M(0) ? M(1) : (v < M(0) ? M(-1) : M(0));
    store(dx, i, s * load(dy, i));
  }
}

}  // namespace

namespace gpu {

template <typename T>
void absval_forward(int64_t n, const T* x, T* y, CUstream_st* stream) {
  if (n == 0) return;
  absval_forward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(x), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void absval_backward(int64_t n, const T* dy, const T* x, T* dx, CUstream_st* stream) {
  if (n == 0) return;
  absval_backward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(dy), dev(x), dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_ABSVAL(T)                                   \
  template void absval_forward<T>(int64_t, const T*, T*, CUstream_st*); \
  template void absval_backward<T>(int64_t, const T*, const T*, T*, CUstream_st*);
CORTADO_INSTANTIATE_ABSVAL(double)
CORTADO_INSTANTIATE_ABSVAL(float)
CORTADO_INSTANTIATE_ABSVAL(float16)
CORTADO_INSTANTIATE_ABSVAL(bfloat16)

}  // namespace gpu
}  // namespace cortado
