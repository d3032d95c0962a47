// MVN kernels. One thread per row (grid-stride, 64-bit indexes): the thread
// makes the CPU's passes over its row in the CPU's order (sum, squared
// deviations, write; or sums of g and g*y, write). Statistics accumulate in
// S (float, or double for double storage); backward sums in dmath_t of the
// storage type. Each output is stored once.
#include "cortado/layers/mvn_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T, typename S>
__global__ void mvn_forward_kernel(int64_t num, int64_t dim, bool normalize, S eps, const T* x, T* y, S* sigma) {
  CORTADO_KERNEL_LOOP(r, num) {
    const int64_t base = r * dim;
    S sum = 0;
    for (int64_t d = 0; d < dim; ++d) sum = add_rn(sum, static_cast<S>(load(x, base + d)));
    const S mu = sum / static_cast<S>(dim);
    S sq = 0;
    for (int64_t d = 0; d < dim; ++d) {
      const S c = static_cast<S>(load(x, base + d)) - mu;
      sq = add_rn(sq, mul_rn(c, c));
    }
    const S s = sqrt(sq / static_cast<S>(dim));
    sigma[r] = s;
    const S scale = normalize ? S(1) / (s + eps) : S(1);
    for (int64_t d = 0; d < dim; ++d) store(y, base + d, mul_rn(static_cast<S>(load(x, base + d)) - mu, scale));
  }
}

template <typename T, typename S>
__global__ void mvn_backward_kernel(int64_t num, int64_t dim, bool normalize, double eps, const T* y, const T* dy,
                                    const S* sigma, T* dx) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(r, num) {
    const int64_t base = r * dim;
    M sum_g = 0, sum_gy = 0;
    for (int64_t d = 0; d < dim; ++d) {
      const M g = load(dy, base + d);
      sum_g = add_rn(sum_g, g);
      sum_gy = add_rn(sum_gy, mul_rn(g, load(y, base + d)));
    }
    const M mean_g = sum_g / static_cast<M>(dim);
    const M mean_gy = normalize ? sum_gy / static_cast<M>(dim) : M(0);
    const M scale = normalize ? M(1) / (static_cast<M>(sigma[r]) + static_cast<M>(eps)) : M(1);
    for (int64_t d = 0; d < dim; ++d) {
      const M v = load(dy, base + d) - mean_g - mul_rn(load(y, base + d), mean_gy);
      store(dx, base + d, mul_rn(v, scale));
    }
  }
}

}  // namespace

namespace gpu {

template <typename T, typename S>
void mvn_forward(int64_t num, int64_t dim, bool normalize, double eps, const T* x, T* y, S* sigma,
                 CUstream_st* stream) {
  if (num == 0 || dim == 0) return;
  mvn_forward_kernel<dev_t<T>, S><<<cuda::blocks_for(num), cuda::kThreads, 0, stream>>>(
      num, dim, normalize, static_cast<S>(eps), dev(x), dev(y), sigma);
  CORTADO_KERNEL_CHECK();
}

template <typename T, typename S>
void mvn_backward(int64_t num, int64_t dim, bool normalize, double eps, const T* y, const T* dy, const S* sigma,
                  T* dx, CUstream_st* stream) {
  if (num == 0 || dim == 0) return;
  mvn_backward_kernel<dev_t<T>, S><<<cuda::blocks_for(num), cuda::kThreads, 0, stream>>>(
      num, dim, normalize, eps, dev(y), dev(dy), sigma, dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_MVN(T, S)                                                                       \
  template void mvn_forward<T, S>(int64_t, int64_t, bool, double, const T*, T*, S*, CUstream_st*);       \
  template void mvn_backward<T, S>(int64_t, int64_t, bool, double, const T*, const T*, const S*, T*,     \
                                   CUstream_st*);
#define CORTADO_INSTANTIATE_MVN_T(T) CORTADO_INSTANTIATE_MVN(T, math_t<T>)
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_MVN_T)

}  // namespace gpu
}  // namespace cortado
