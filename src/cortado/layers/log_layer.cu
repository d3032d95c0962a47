// Log kernels. One thread per element in a grid-stride loop (64-bit
// indexes); values are loaded into their math type (float for float16,
// double for double), computed as on the CPU path and stored once. Nothing
// accumulates.
#include "cortado/layers/log_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

__device__ __forceinline__ float log_of(float v) { return logf(v); }
__device__ __forceinline__ double log_of(double v) { return log(v); }

template <typename T>
__global__ void log_forward_kernel(int64_t n, const T* x, T* y, dmath_t<T> bs, dmath_t<T> scale, dmath_t<T> shift) {
  // shift + scale * x rounded as on the CPU (no fused multiply-add).
  CORTADO_KERNEL_LOOP(i, n) store(y, i, log_of(add_rn(shift, mul_rn(scale, load(x, i)))) * bs);
}

template <typename T>
__global__ void log_backward_kernel(int64_t n, const T* dy, const T* x, T* dx, dmath_t<T> bs, dmath_t<T> scale,
                                    dmath_t<T> shift) {
  const dmath_t<T> c = scale * bs;
  CORTADO_KERNEL_LOOP(i, n) store(dx, i, load(dy, i) * c / add_rn(shift, mul_rn(scale, load(x, i))));
}

}  // namespace

namespace gpu {

template <typename T>
void log_forward(int64_t n, const T* x, T* y, double base_scale, double scale, double shift, CUstream_st* stream) {
  if (n == 0) return;
  using M = dmath_t<dev_t<T>>;
  log_forward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(x), dev(y), M(base_scale), M(scale),
                                                                         M(shift));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void log_backward(int64_t n, const T* dy, const T* x, T* dx, double base_scale, double scale, double shift,
                  CUstream_st* stream) {
  if (n == 0) return;
  using M = dmath_t<dev_t<T>>;
  log_backward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(dy), dev(x), dev(dx), M(base_scale),
                                                                          M(scale), M(shift));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_LOG(T)                                                              \
  template void log_forward<T>(int64_t, const T*, T*, double, double, double, CUstream_st*); \
  template void log_backward<T>(int64_t, const T*, const T*, T*, double, double, double, CUstream_st*);
CORTADO_INSTANTIATE_LOG(double)
CORTADO_INSTANTIATE_LOG(float)
CORTADO_INSTANTIATE_LOG(float16)
CORTADO_INSTANTIATE_LOG(bfloat16)

}  // namespace gpu
}  // namespace cortado
