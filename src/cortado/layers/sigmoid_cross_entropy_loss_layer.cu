// SigmoidCrossEntropyLoss kernels.
//
// sce_forward: one thread per element in a grid-stride loop (64-bit indexes)
// over cuda::blocks_for(n) blocks. A thread skips elements whose target is
// ignore_label, accumulates max(x, 0) - x t + log(1 + exp(-|x|)) in math_t
// (float for float16) and counts the others in double; block sums go to the
// partial buffers (loss_sum.cuh), and loss_finish divides by the normalizer.
// Each term is evaluated like the CPU path's (one rounding per operation, no
// fused multiply-add); only the order of the sum differs.
//
// sce_backward: one thread per element, sigmoid(x) - t in math_t of the diff
// type, times the scale formed in double from the loss weight and the
// normalizer on the device, as the CPU path forms it.
#include "cortado/layers/sigmoid_cross_entropy_loss_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"
#include "loss_sum.cuh"

namespace cortado {
namespace {

using namespace kernels;

// log(1 + exp(-|v|)): the tail of the stable softplus.
__device__ __forceinline__ float softplus_tail(float v) { return log1pf(expf(-fabsf(v))); }
__device__ __forceinline__ double softplus_tail(double v) { return log1p(exp(-fabs(v))); }

template <typename T>
__global__ void sce_forward_kernel(int64_t n, const T* x, const float* target, bool has_ignore_label,
                                   int ignore_label, dmath_t<T>* partial, double* valid_partial) {
  using M = dmath_t<T>;
  M sum = 0;
  double valid = 0;
  CORTADO_KERNEL_LOOP(i, n) {
    const float t = target[i];
    if (has_ignore_label && t == static_cast<float>(ignore_label)) continue;
    const M v = load(x, i);
    const M positive = v < M(0) ? M(0) : v;  // std::max(v, 0), NaN kept as the CPU keeps it
    sum = add_rn(sum, add_rn(add_rn(positive, -mul_rn(v, static_cast<M>(t))), softplus_tail(v)));
    valid += 1;
  }
  write_block_sums(sum, valid, partial, valid_partial);
}

template <typename T, typename B>
__global__ void sce_backward_kernel(int64_t n, const T* x, const float* target, bool has_ignore_label,
                                    int ignore_label, const double* weight, const double* normalizer, B* dx) {
  using M = dmath_t<T>;
  using MB = dmath_t<B>;
  const MB scale = static_cast<MB>(weight[0] / normalizer[0]);
  CORTADO_KERNEL_LOOP(i, n) {
    const float t = target[i];
    if (has_ignore_label && t == static_cast<float>(ignore_label)) {
      store(dx, i, MB(0));
      continue;
    }
    const MB s = sigmoid_of(static_cast<MB>(static_cast<M>(load(x, i))));
    store(dx, i, mul_rn(scale, s - static_cast<MB>(t)));
  }
}

}  // namespace

namespace gpu {

template <typename T>
void sigmoid_cross_entropy_loss_forward(int64_t n, const T* x, const float* target, bool has_ignore_label,
                                        int ignore_label, double fixed_normalizer, math_t<T>* partial, double* valid,
                                        float* top, double* normalizer_out, CUstream_st* stream) {
  // Launched even for n == 0: the top and the normalizer must still be written.
  const int blocks = cuda::blocks_for(n);
  sce_forward_kernel<<<blocks, cuda::kThreads, 0, stream>>>(n, dev(x), target, has_ignore_label, ignore_label,
                                                            partial, valid);
  CORTADO_KERNEL_CHECK();
  loss_finish<math_t<T>>(blocks, partial, valid, fixed_normalizer, top, normalizer_out, stream);
}

template <typename T, typename B>
void sigmoid_cross_entropy_loss_backward(int64_t n, const T* x, const float* target, bool has_ignore_label,
                                         int ignore_label, const double* weight, const double* normalizer, B* dx,
                                         CUstream_st* stream) {
  if (n == 0) return;
  sce_backward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
      n, dev(x), target, has_ignore_label, ignore_label, weight, normalizer, dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_SCE_FORWARD(T)                                                                    \
  template void sigmoid_cross_entropy_loss_forward<T>(int64_t, const T*, const float*, bool, int, double,     \
                                                      math_t<T>*, double*, float*, double*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_SCE_FORWARD)
#define CORTADO_INSTANTIATE_SCE_BACKWARD(T, B)                                                                  \
  template void sigmoid_cross_entropy_loss_backward<T, B>(int64_t, const T*, const float*, bool, int,           \
                                                          const double*, const double*, B*, CUstream_st*);
// For every layer pair (F, B).
#define CORTADO_INSTANTIATE_SCE_BACKWARD_PAIR(_, F, B) CORTADO_INSTANTIATE_SCE_BACKWARD(F, B)
CORTADO_FOR_EACH_PAIR(CORTADO_INSTANTIATE_SCE_BACKWARD_PAIR, _)

}  // namespace gpu
}  // namespace cortado
