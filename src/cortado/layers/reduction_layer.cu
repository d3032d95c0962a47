// Reduction kernels. Forward: one thread per output n (grid-stride, 64-bit
// indexes) sums f(x[n, d]) over its row in dmath_t (float for half, double for
// double) in the same order as the CPU, multiplies by coeff and stores once.
// Backward: one thread per bottom element, no accumulation.
#include "cortado/layers/reduction_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void reduction_forward_kernel(int64_t num, int64_t dim, int op, dmath_t<T> coeff, const T* x, T* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(n, num) {
    M sum = 0;
    for (int64_t d = 0; d < dim; ++d) {
      const M v = load(x, n * dim + d);
      sum = add_rn(sum, op == 2 ? (v < M(0) ? -v : v) : op == 3 ? mul_rn(v, v) : v);
    }
    store(y, n, mul_rn(coeff, sum));
  }
}

template <typename T>
__global__ void reduction_backward_kernel(int64_t count, int64_t dim, int op, dmath_t<T> coeff, const T* x,
                                          const T* dy, T* dx) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(k, count) {
    const M g = mul_rn(coeff, load(dy, k / dim));
    const M v = load(x, k);
    M r = g;
    if (op == 2) r = v > M(0) ? g : v < M(0) ? -g : M(0);
    if (op == 3) r = mul_rn(mul_rn(M(2), v), g);
    store(dx, k, r);
  }
}

}  // namespace

namespace gpu {

template <typename T>
void reduction_forward(int64_t num, int64_t dim, int op, double coeff, const T* x, T* y, CUstream_st* stream) {
  if (num == 0) return;
  using D = dev_t<T>;
  reduction_forward_kernel<D><<<cuda::blocks_for(num), cuda::kThreads, 0, stream>>>(
      num, dim, op, static_cast<dmath_t<D>>(coeff), dev(x), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void reduction_backward(int64_t num, int64_t dim, int op, double coeff, const T* x, const T* dy, T* dx,
                        CUstream_st* stream) {
  const int64_t count = num * dim;
  if (count == 0) return;
  using D = dev_t<T>;
  reduction_backward_kernel<D><<<cuda::blocks_for(count), cuda::kThreads, 0, stream>>>(
      count, dim, op, static_cast<dmath_t<D>>(coeff), dev(x), dev(dy), dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_REDUCTION(T)                                                                   \
  template void reduction_forward<T>(int64_t, int64_t, int, double, const T*, T*, CUstream_st*);          \
  template void reduction_backward<T>(int64_t, int64_t, int, double, const T*, const T*, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_REDUCTION)

}  // namespace gpu
}  // namespace cortado
