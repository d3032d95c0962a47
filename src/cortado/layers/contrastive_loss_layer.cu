// ContrastiveLoss kernels.
//
// contrastive_forward: one thread per pair n in a grid-stride loop over
// cuda::blocks_for(N) blocks. The thread walks its C-vector in order (so D_n
// is summed exactly as the CPU path sums it, one rounding per operation, in
// math_t: float for float16), keeps d and D_n for the backward, and
// accumulates l_n in math_t; block sums go to the partial buffer
// (loss_sum.cuh) and loss_finish divides by 2 N. Embeddings are short, so a
// thread per pair is enough, and it keeps the similar / margin decisions
// identical to the CPU path's.
//
// contrastive_backward: one thread per element (64-bit indexes) writes both
// bottom diffs; beta_n is recomputed from D_n by each thread of the pair, in
// math_t of the diff type, with alpha = +-w / N formed in double from the
// loss weight on the device, as on the CPU.
#include "cortado/layers/contrastive_loss_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"
#include "loss_sum.cuh"

namespace cortado {
namespace {

using namespace kernels;

__device__ __forceinline__ float sqrt_of(float v) { return sqrtf(v); }
__device__ __forceinline__ double sqrt_of(double v) { return sqrt(v); }

template <typename T>
__global__ void contrastive_forward_kernel(int num, int dim, const T* a, const T* b, const float* y, double margin,
                                           bool legacy, dmath_t<T>* diff, dmath_t<T>* dist_sq, dmath_t<T>* partial) {
  using M = dmath_t<T>;
  const M m0 = static_cast<M>(margin);
  M sum = 0;
  CORTADO_KERNEL_LOOP(n, num) {
    M d2 = 0;
    for (int c = 0; c < dim; ++c) {
      const int64_t k = n * dim + c;
      const M d = M(load(a, k)) - M(load(b, k));
      diff[k] = d;
      d2 = add_rn(d2, mul_rn(d, d));
    }
    dist_sq[n] = d2;
    M l;
    if (static_cast<int>(y[n]) != 0) {
      l = d2;
    } else if (legacy) {
      const M r = m0 - d2;
      l = r < M(0) ? M(0) : r;  // std::max(r, 0)
    } else {
      const M r = m0 - sqrt_of(d2);
      const M m = r < M(0) ? M(0) : r;
      l = mul_rn(m, m);
    }
    sum = add_rn(sum, l);
  }
  write_block_sums(sum, partial);
}

/// The factor of d_n in the gradient of the bottom whose scale is alpha.
template <typename MB>
__device__ __forceinline__ MB beta_of(MB alpha, MB d2, bool similar, bool legacy, MB margin) {
  if (similar) return alpha;
  if (legacy) return margin - d2 > MB(0) ? -alpha : MB(0);
  const MB dist = sqrt_of(d2);
  const MB m = margin - dist;
  return m > MB(0) ? mul_rn(-alpha, m) / add_rn(dist, MB(1e-4)) : MB(0);
}

template <typename M, typename B>
__global__ void contrastive_backward_kernel(int64_t count, int dim, int num, const M* diff, const M* dist_sq,
                                            const float* y, double margin, bool legacy, const double* weight, B* da,
                                            B* db) {
  using MB = dmath_t<B>;
  const double w = weight[0];
  const MB alpha_a = static_cast<MB>(w / num);
  const MB alpha_b = static_cast<MB>(-w / num);
  const MB m0 = static_cast<MB>(margin);
  CORTADO_KERNEL_LOOP(k, count) {
    const int64_t n = k / dim;
    const MB d2 = static_cast<MB>(dist_sq[n]);
    const bool similar = static_cast<int>(y[n]) != 0;
    const MB d = static_cast<MB>(diff[k]);
    if (da) store(da, k, mul_rn(beta_of(alpha_a, d2, similar, legacy, m0), d));
    if (db) store(db, k, mul_rn(beta_of(alpha_b, d2, similar, legacy, m0), d));
  }
}

}  // namespace

namespace gpu {

template <typename T>
void contrastive_loss_forward(int num, int dim, const T* a, const T* b, const float* y, double margin, bool legacy,
                              math_t<T>* diff, math_t<T>* dist_sq, math_t<T>* partial, float* top,
                              CUstream_st* stream) {
  // Launched even for num == 0: the top must still be written.
  const int blocks = cuda::blocks_for(num);
  contrastive_forward_kernel<<<blocks, cuda::kThreads, 0, stream>>>(num, dim, dev(a), dev(b), y, margin, legacy,
                                                                    diff, dist_sq, partial);
  CORTADO_KERNEL_CHECK();
  // 2 N is exact in A, as the CPU path's M(2) * N is.
  loss_finish<math_t<T>>(blocks, partial, nullptr, 2.0 * (num > 1 ? num : 1), top, nullptr, stream);
}

template <typename M, typename B>
void contrastive_loss_backward(int num, int dim, const M* diff, const M* dist_sq, const float* y, double margin,
                               bool legacy, const double* weight, B* da, B* db, CUstream_st* stream) {
  const int64_t count = int64_t(num) * dim;
  if (count == 0) return;
  contrastive_backward_kernel<<<cuda::blocks_for(count), cuda::kThreads, 0, stream>>>(
      count, dim, num, diff, dist_sq, y, margin, legacy, weight, dev(da), dev(db));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_CONTRASTIVE_FORWARD(T)                                                                 \
  template void contrastive_loss_forward<T>(int, int, const T*, const T*, const float*, double, bool, math_t<T>*, \
                                            math_t<T>*, math_t<T>*, float*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_CONTRASTIVE_FORWARD)
#define CORTADO_INSTANTIATE_CONTRASTIVE_BACKWARD(M, B)                                                       \
  template void contrastive_loss_backward<M, B>(int, int, const M*, const M*, const float*, double, bool, \
                                                const double*, B*, B*, CUstream_st*);
#define CORTADO_INSTANTIATE_CONTRASTIVE_BACKWARD_T(T) CORTADO_INSTANTIATE_CONTRASTIVE_BACKWARD(math_t<T>, T)
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_CONTRASTIVE_BACKWARD_T)

}  // namespace gpu
}  // namespace cortado
