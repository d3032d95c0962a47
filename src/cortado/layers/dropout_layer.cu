// Dropout kernels. One thread per element in a grid-stride loop (64-bit
// indexes): the mask (drawn on the host, one unsigned per element) selects
// x * scale or 0, computed in math_t (float for float16) and stored once.
// Nothing accumulates.
#include "cortado/layers/dropout_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void dropout_kernel(int64_t n, const T* x, const unsigned* mask, dmath_t<T> scale, T* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) store(y, i, mask[i] ? load(x, i) * scale : M(0));
}

}  // namespace

namespace gpu {

template <typename T>
void dropout_forward(int64_t n, const T* x, const unsigned* mask, double scale, T* y, CUstream_st* stream) {
  if (n == 0) return;
  using D = dev_t<T>;
  dropout_kernel<D><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(x), mask,
                                                                        static_cast<dmath_t<D>>(scale), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void dropout_backward(int64_t n, const T* dy, const unsigned* mask, double scale, T* dx, CUstream_st* stream) {
  dropout_forward(n, dy, mask, scale, dx, stream);
}

#define CORTADO_INSTANTIATE_DROPOUT(T)                                                                  \
  template void dropout_forward<T>(int64_t, const T*, const unsigned*, double, T*, CUstream_st*); \
  template void dropout_backward<T>(int64_t, const T*, const unsigned*, double, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_DROPOUT)

}  // namespace gpu
}  // namespace cortado
