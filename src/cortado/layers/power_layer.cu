// Power kernels. One thread per element in a grid-stride loop (64-bit
// indexes); each value is loaded into its math type (float for float16,
// double for double), computed with the same special cases as the CPU path
// and stored once. Nothing accumulates.
#include "cortado/layers/power_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

__device__ __forceinline__ float pow_of(float b, float e) { return powf(b, e); }
__device__ __forceinline__ double pow_of(double b, double e) { return pow(b, e); }

template <typename T>
__global__ void power_forward_kernel(int64_t n, const T* x, T* y, dmath_t<T> power, dmath_t<T> scale,
                                     dmath_t<T> shift) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    // Rounded as the CPU rounds (no fused multiply-add): near shift = -scale * x
    // a fused one would differ from it by far more than an ulp.
    const M b = scale == M(0) ? shift : add_rn(shift, mul_rn(scale, load(x, i)));
    store(y, i, power == M(1) ? b : pow_of(b, power));
  }
}

template <typename T>
__global__ void power_backward_kernel(int64_t n, const T* dy, const T* x, T* dx, dmath_t<T> power,
                                      dmath_t<T> scale, dmath_t<T> shift) {
  using M = dmath_t<T>;
  const M diff_scale = power * scale;
  CORTADO_KERNEL_LOOP(i, n) {
    const M g = load(dy, i);
    M d;
    if (diff_scale == M(0)) {
      d = M(0);
    } else if (power == M(1)) {
      d = diff_scale * g;
    } else {
      const M b = add_rn(shift, mul_rn(scale, load(x, i)));
      d = diff_scale * (power == M(2) ? b : pow_of(b, power - M(1))) * g;
    }
    store(dx, i, d);
  }
}

}  // namespace

namespace gpu {

template <typename T>
void power_forward(int64_t n, const T* x, T* y, double power, double scale, double shift, CUstream_st* stream) {
  if (n == 0) return;
  using M = dmath_t<dev_t<T>>;
  power_forward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(x), dev(y), M(power), M(scale),
                                                                           M(shift));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void power_backward(int64_t n, const T* dy, const T* x, T* dx, double power, double scale, double shift,
                    CUstream_st* stream) {
  if (n == 0) return;
  using M = dmath_t<dev_t<T>>;
  power_backward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(dy), dev(x), dev(dx), M(power),
                                                                            M(scale), M(shift));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_POWER(T)                                                              \
  template void power_forward<T>(int64_t, const T*, T*, double, double, double, CUstream_st*); \
  template void power_backward<T>(int64_t, const T*, const T*, T*, double, double, double, CUstream_st*);
CORTADO_INSTANTIATE_POWER(double)
CORTADO_INSTANTIATE_POWER(float)
CORTADO_INSTANTIATE_POWER(float16)
CORTADO_INSTANTIATE_POWER(bfloat16)

}  // namespace gpu
}  // namespace cortado
