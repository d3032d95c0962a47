// MultinomialLogisticLoss kernels.
//
// mll_forward: one thread per sample in a grid-stride loop over
// cuda::blocks_for(N) blocks. The thread reads its label (float) and the
// labelled probability, and accumulates -log(max(p, 1e-20)) in math_t (float
// for float16); block sums go to the partial buffer (loss_sum.cuh) and
// loss_finish divides by N. A label that is not a class index contributes
// nothing and is recorded with atomicMin in a pinned host word.
//
// mll_backward: one thread per element of dp (64-bit indexes): zero, except
// at the label, where -s / max(p, 1e-20) is computed in math_t of the diff
// type with the scale s = w / N formed in double on the device and rounded
// once, as the CPU path does.
#include "cortado/layers/multinomial_logistic_loss_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"
#include "loss_sum.cuh"

namespace cortado {
namespace {

using namespace kernels;

constexpr double kLogThreshold = 1e-20;  // the CPU path's clamp

template <typename T>
__global__ void mll_forward_kernel(int num, int dim, const T* p, const float* label, dmath_t<T>* partial,
                                   unsigned long long* error) {
  using M = dmath_t<T>;
  const M threshold = static_cast<M>(kLogThreshold);
  M sum = 0;
  CORTADO_KERNEL_LOOP(n, num) {
    const float v = label[n];
    const int l = class_of(v, dim);
    if (l < 0) {
      atomicMin(error, bad_label_key(n, v));
      continue;
    }
    const M q = load(p, n * dim + l);
    sum = add_rn(sum, -log_of(q < threshold ? threshold : q));  // the CPU's loss -= log(max(q, threshold))
  }
  write_block_sums(sum, partial);
}

template <typename T, typename B>
__global__ void mll_backward_kernel(int64_t count, int dim, int num, const T* p, const float* label,
                                    const double* weight, B* dp) {
  using M = dmath_t<T>;
  using MB = dmath_t<B>;
  const MB scale = static_cast<MB>(weight[0] / num);
  const MB threshold = static_cast<MB>(kLogThreshold);
  CORTADO_KERNEL_LOOP(k, count) {
    const int d = static_cast<int>(k % dim);
    if (class_of(label[k / dim], dim) != d) {
      store(dp, k, MB(0));
      continue;
    }
    const MB q = static_cast<MB>(static_cast<M>(load(p, k)));
    store(dp, k, -scale / (q < threshold ? threshold : q));
  }
}

}  // namespace

namespace gpu {

template <typename T>
void multinomial_logistic_loss_forward(int num, int dim, const T* p, const float* label, math_t<T>* partial,
                                       float* top, unsigned long long* error, CUstream_st* stream) {
  // Launched even for num == 0: the top must still be written.
  const int blocks = cuda::blocks_for(num);
  mll_forward_kernel<<<blocks, cuda::kThreads, 0, stream>>>(num, dim, dev(p), label, partial, error);
  CORTADO_KERNEL_CHECK();
  loss_finish<math_t<T>>(blocks, partial, nullptr, num > 1 ? num : 1, top, nullptr, stream);
}

template <typename T, typename B>
void multinomial_logistic_loss_backward(int num, int dim, const T* p, const float* label, const double* weight,
                                        B* dp, CUstream_st* stream) {
  const int64_t count = int64_t(num) * dim;
  if (count == 0) return;
  mll_backward_kernel<<<cuda::blocks_for(count), cuda::kThreads, 0, stream>>>(count, dim, num, dev(p), label, weight,
                                                                             dev(dp));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_MLL_FORWARD(T)                                                                        \
  template void multinomial_logistic_loss_forward<T>(int, int, const T*, const float*, math_t<T>*, float*, \
                                                     unsigned long long*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_MLL_FORWARD)
#define CORTADO_INSTANTIATE_MLL_BACKWARD(T, B)                                                                  \
  template void multinomial_logistic_loss_backward<T, B>(int, int, const T*, const float*, const double*, B*, \
                                                         CUstream_st*);
// For every layer pair (F, B).
#define CORTADO_INSTANTIATE_MLL_BACKWARD_PAIR(_, F, B) CORTADO_INSTANTIATE_MLL_BACKWARD(F, B)
CORTADO_FOR_EACH_PAIR(CORTADO_INSTANTIATE_MLL_BACKWARD_PAIR, _)

}  // namespace gpu
}  // namespace cortado
