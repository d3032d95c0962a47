#pragma once
// SoftmaxWithLoss: softmax over `axis` followed by the multinomial logistic
// loss, fused for numerical stability.
//
//   p = softmax(x) along axis (computed and kept in math_t: double for the
//       (double, double) pair, float otherwise)
//   q[n, c] = target: [c == label_n], or with label smoothing eps
//             (loss_param.label_smoothing) 1 - eps on the label and
//             eps / (C - 1) on each of the C - 1 other classes
//   loss = -sum_{valid n} sum_c q[n, c] log(max(p[n, c], FLT_MIN)) / normalizer
//          (eps = 0: -sum_{valid n} log(max(p[n, label_n], FLT_MIN)) / normalizer)
//   backward: dx[n, c] = w / normalizer * (p[n, c] - q[n, c]); 0 where
//             the label is ignore_label. w is the loss top's diff (its loss
//             weight, or the loss scale the solver put there).
//
// Label smoothing and NVCaffe: NVCaffe's GPU backward subtracts eps / (C - 1)
// from every class, the label's included, then 1 - eps from the label's, so
// its targets sum to 1 + eps / (C - 1) and its gradient is not that of a
// cross-entropy (the surplus pushes every score up); its CPU path and its
// loss value ignore eps. Cortado takes NVCaffe's intended targets (they sum
// to 1), on both paths, and reports the smoothed cross-entropy above, the
// loss its gradient descends (NVCaffe logs the plain -log p[label] instead;
// the smoothed loss never falls to 0, its floor being the targets' entropy).
//
// Bottoms: 2. bottom[0] x: (outer, C, inner) around axis; bottom[1] labels:
// outer * inner values (any shape, e.g. (N) or (N, 1, H, W)), read as float,
// each an integer in [0, C) or ignore_label.
// Tops: 1 or 2. top[0] the loss, a scalar (shape ()), written as float;
// optional top[1] the probabilities, bottom[0]'s shape, in Ftype (its diff is
// not back-propagated).
// Fields:
//   softmax_param.axis (default 1)
//   loss_param.ignore_label (unset: no label is ignored)
//   loss_param.normalization: FULL (outer * inner), VALID (non-ignored count,
//     the default), BATCH_SIZE (outer), NONE (1); the normalizer is at least 1.
//   loss_param.normalize (deprecated; used only when normalization is unset):
//     true = VALID, false = BATCH_SIZE.
//   loss_param.label_smoothing eps (default 0; NVCaffe's field): in [0, 1);
//     needs C >= 2 when positive.
//   loss_weight: default 1 for top[0] and 0 for top[1] (a loss layer).
// Errors: a label outside [0, C) that is not ignore_label (FieldError naming
// the value and C); a label count that does not match; propagate_down to the
// labels.
// In place: no.
// Family: SoftmaxLossBase (loss_layer.hpp) holds the axis, the label checks,
// the normalization, the loss weight and the probabilities.
// GPU (softmax_with_loss_layer.cu): the probabilities are kept on the device
// in math_t (gpu::softmax_forward); one thread per position computes its
// -log p in double, one block sums the losses and the valid count (double)
// (loss_finish, loss_sum.cuh) and writes loss / normalizer to top[0] as
// float, all without leaving the device. The backward reads the normalizer and the loss weight on the
// device, computes in double and rounds through math_t<Btype> like the CPU.
// Labels that are not class indices cannot throw inside a kernel: the first
// one is recorded in pinned host memory, the position counts as ignored, and
// the layer's next Backward or Forward (after the Net has synchronized)
// raises the same FieldError as the CPU path.

#include <vector>

#include "cortado/config.hpp"
#include "cortado/layers/loss_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class SoftmaxWithLossLayer : public SoftmaxLossBase<Ftype, Btype> {
 public:
  CORTADO_LAYER_TYPE(SoftmaxLossBase, "SoftmaxWithLoss")
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  using M = math_t<Ftype>;
  double smoothing_ = 0;  // loss_param.label_smoothing
#ifdef CORTADO_USE_CUDA
  Tensor loss_gpu_{DOUBLE};  // (2, outer * inner): per-position loss, then valid flags
#endif
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// Per position p of outer * inner (labels read as float): loss[p] = -sum_c q[c] log(max(prob[c], FLT_MIN))
/// in double (q: the one-hot label, smoothed by `smoothing` as in the header) and valid[p] = 1, or 0 and 0
/// where the label is ignored or not a class index; the first bad label is recorded in *error (pinned,
/// device-mapped) as (p << 32) | float bits, by atomicMin.
template <typename M>
void softmax_loss_positions(int outer, int channels, int inner, const M* prob, const float* label,
                            bool has_ignore_label, int ignore_label, double smoothing, double* loss, double* valid,
                            unsigned long long* error, CUstream_st* stream);
/// One block (loss_finish of loss_sum.cuh): top = sum(loss) / normalizer as float, *normalizer_out =
/// normalizer (double), where normalizer = max(1, fixed_normalizer), or max(1, sum(valid)) when
/// fixed_normalizer < 0.
void softmax_loss_reduce(int64_t positions, const double* loss, const double* valid, double fixed_normalizer,
                         float* top, double* normalizer_out, CUstream_st* stream);
/// dx[n, c] = w / normalizer * (prob[n, c] - q[n, c]) (0 at ignored or bad labels), w = *weight, q the
/// (smoothed) target, computed in double, stored through math_t<B>.
template <typename M, typename B>
void softmax_loss_backward(int outer, int channels, int inner, const M* prob, const float* label,
                           bool has_ignore_label, int ignore_label, double smoothing, const double* weight,
                           const double* normalizer, B* dx, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
