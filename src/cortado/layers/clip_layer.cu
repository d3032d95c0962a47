// Clip kernels. One thread per element in a grid-stride loop (64-bit
// indexes); values are loaded into their math type, compared and stored
// once. The bounds are rounded to the math type as on the CPU path. Nothing
// accumulates.
#include "cortado/layers/clip_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void clip_forward_kernel(int64_t n, const T* x, T* y, dmath_t<T> lo, dmath_t<T> hi) {
  CORTADO_KERNEL_LOOP(i, n) {
    const dmath_t<T> v = load(x, i);
    store(y, i, v < lo ? lo : (v > hi ? hi : v));
  }
}

template <typename T>
__global__ void clip_backward_kernel(int64_t n, const T* dy, const T* y, T* dx, dmath_t<T> lo, dmath_t<T> hi) {
  CORTADO_KERNEL_LOOP(i, n) {
    const dmath_t<T> v = load(y, i);
    store(dx, i, lo < v && v < hi ? load(dy, i) : dmath_t<T>(0));
  }
}

}  // namespace

namespace gpu {

template <typename T>
void clip_forward(int64_t n, const T* x, T* y, double lo, double hi, CUstream_st* stream) {
  if (n == 0) return;
  using M = dmath_t<dev_t<T>>;
  clip_forward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(x), dev(y), M(lo), M(hi));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void clip_backward(int64_t n, const T* dy, const T* y, T* dx, double lo, double hi, CUstream_st* stream) {
  if (n == 0) return;
  using M = dmath_t<dev_t<T>>;
  clip_backward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(dy), dev(y), dev(dx), M(lo),
                                                                           M(hi));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_CLIP(T)                                                    \
  template void clip_forward<T>(int64_t, const T*, T*, double, double, CUstream_st*); \
  template void clip_backward<T>(int64_t, const T*, const T*, T*, double, double, CUstream_st*);
CORTADO_INSTANTIATE_CLIP(double)
CORTADO_INSTANTIATE_CLIP(float)
CORTADO_INSTANTIATE_CLIP(float16)
CORTADO_INSTANTIATE_CLIP(bfloat16)

}  // namespace gpu
}  // namespace cortado
