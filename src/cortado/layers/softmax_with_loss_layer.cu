// SoftmaxWithLoss kernels (the softmax itself is gpu::softmax_forward).
//
// softmax_loss_positions: one thread per (outer, inner) position in a
// grid-stride loop; it checks the label (read as float) and writes the
// position's -log(max(p, FLT_MIN)) (with label smoothing the target-weighted
// sum over the C classes, the thread looping over them), computed in double,
// and a valid flag
// (both double) to a per-position buffer. A label that is not a class index
// and not ignore_label counts as ignored and is recorded with atomicMin in a
// pinned host word, so that the host can report the first one.
//
// softmax_loss_reduce: loss_finish (loss_sum.cuh) over the positions' losses
// and valid flags, in double: one block, each thread sums a strided share,
// then a shared-memory tree; thread 0 picks the normalizer and writes the
// loss to the float top and the normalizer to device memory for the
// backward. The order of the sum is fixed, so the loss is the same run after
// run.
//
// softmax_loss_backward: one thread per element of (outer, C, inner); the
// gradient is computed in double and rounded through math_t of the diff type
// (double -> float -> half for float16), as the CPU path rounds.
#include <cfloat>

#include "cortado/layers/softmax_with_loss_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"
#include "loss_sum.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename M>
__global__ void loss_positions_kernel(int64_t positions, int channels, int inner, const M* prob, const float* label,
                                      bool has_ignore_label, int ignore_label, double smoothing, double* loss,
                                      double* valid, unsigned long long* error) {
  CORTADO_KERNEL_LOOP(p, positions) {
    const float v = label[p];
    const int l = class_of(v, channels, has_ignore_label, ignore_label);
    if (l < 0) {
      if (l == -2) atomicMin(error, bad_label_key(p, v));
      loss[p] = 0;
      valid[p] = 0;
      continue;
    }
    const int64_t base = (p / inner) * int64_t(channels) * inner + p % inner;
    const auto log_p = [&](int c) {
      return log(fmax(static_cast<double>(prob[base + int64_t(c) * inner]), static_cast<double>(FLT_MIN)));
    };
    if (smoothing > 0) {
      double others = 0;
      for (int c = 0; c < channels; ++c) others += c == l ? 0.0 : log_p(c);
      loss[p] = -((1 - smoothing) * log_p(l) + smoothing / (channels - 1) * others);
    } else {
      loss[p] = -log_p(l);
    }
    valid[p] = 1;
  }
}

template <typename M, typename B>
__global__ void loss_backward_kernel(int64_t count, int channels, int inner, const M* prob, const float* label,
                                     bool has_ignore_label, int ignore_label, double smoothing,
                                     const double* weight, const double* normalizer, B* dx) {
  const double scale = weight[0] / normalizer[0];
  const double on = 1 - smoothing, off = smoothing > 0 ? smoothing / (channels - 1) : 0.0;
  const int64_t dim = int64_t(channels) * inner;
  CORTADO_KERNEL_LOOP(k, count) {
    const int64_t o = k / dim, c = (k % dim) / inner, i = k % inner;
    const int l = class_of(label[o * inner + i], channels, has_ignore_label, ignore_label);
    const double g = l < 0 ? 0.0 : (static_cast<double>(prob[k]) - (c == l ? on : off)) * scale;
    store(dx, k, static_cast<dmath_t<B>>(g));
  }
}

}  // namespace

namespace gpu {

template <typename M>
void softmax_loss_positions(int outer, int channels, int inner, const M* prob, const float* label,
                            bool has_ignore_label, int ignore_label, double smoothing, double* loss, double* valid,
                            unsigned long long* error, CUstream_st* stream) {
  const int64_t positions = int64_t(outer) * inner;
  if (positions == 0) return;
  loss_positions_kernel<<<cuda::blocks_for(positions), cuda::kThreads, 0, stream>>>(
      positions, channels, inner, prob, label, has_ignore_label, ignore_label, smoothing, loss, valid, error);
  CORTADO_KERNEL_CHECK();
}

void softmax_loss_reduce(int64_t positions, const double* loss, const double* valid, double fixed_normalizer,
                         float* top, double* normalizer_out, CUstream_st* stream) {
  loss_finish<double>(positions, loss, valid, fixed_normalizer, top, normalizer_out, stream);
}

template <typename M, typename B>
void softmax_loss_backward(int outer, int channels, int inner, const M* prob, const float* label,
                           bool has_ignore_label, int ignore_label, double smoothing, const double* weight,
                           const double* normalizer, B* dx, CUstream_st* stream) {
  const int64_t count = int64_t(outer) * channels * inner;
  if (count == 0) return;
  loss_backward_kernel<<<cuda::blocks_for(count), cuda::kThreads, 0, stream>>>(
      count, channels, inner, prob, label, has_ignore_label, ignore_label, smoothing, weight, normalizer, dev(dx));
  CORTADO_KERNEL_CHECK();
}

template void softmax_loss_positions<double>(int, int, int, const double*, const float*, bool, int, double, double*,
                                             double*, unsigned long long*, CUstream_st*);
template void softmax_loss_positions<float>(int, int, int, const float*, const float*, bool, int, double, double*,
                                            double*, unsigned long long*, CUstream_st*);
#define CORTADO_INSTANTIATE_LOSS_BACKWARD(M, B)                                                                 \
  template void softmax_loss_backward<M, B>(int, int, int, const M*, const float*, bool, int, double,       \
                                            const double*, const double*, B*, CUstream_st*);
#define CORTADO_INSTANTIATE_LOSS_BACKWARD_T(T) CORTADO_INSTANTIATE_LOSS_BACKWARD(math_t<T>, T)
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_LOSS_BACKWARD_T)

}  // namespace gpu
}  // namespace cortado
