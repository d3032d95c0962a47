#pragma once
// SigmoidCrossEntropyLoss: cross-entropy between sigmoid(x) and targets t in
// [0, 1], in the numerically stable form
//
//   l(x, t) = max(x, 0) - x t + log(1 + exp(-|x|))
//   loss = sum over non-ignored elements of l / normalizer (math_t<Ftype>)
//   backward: dx = w / normalizer * (sigmoid(x) - t), 0 where ignored;
//             w the loss top's diff.
//
// Bottoms: 2 of the same count. bottom[0] x: (N, ...) scores in Ftype;
// bottom[1] t: targets, read as float.
// Tops: 1, the loss, a scalar (shape ()), written as float.
// Fields:
//   loss_param.ignore_label (unset: nothing ignored): elements whose target
//     equals it contribute neither loss nor gradient.
//   loss_param.normalization: FULL (count), VALID (non-ignored count; the
//     default), BATCH_SIZE (N = x.shape(0)), NONE (1); at least 1.
//   loss_param.normalize (deprecated; used only when normalization is unset):
//     true = VALID, false = BATCH_SIZE.
//   loss_weight (default 1: a loss layer).
// Errors: counts that differ (FieldError "bottom[1]"); propagate_down to the
// targets. In place: no. Family: LossLayer (loss_layer.hpp).
// GPU (sigmoid_cross_entropy_loss_layer.cu): one kernel sums the elements'
// losses in math_t and counts the non-ignored ones (double) per block; a
// second adds the block sums, picks the normalizer (the valid count is known
// on the device only) and writes the loss to top[0] and the normalizer to
// device memory for the backward, all without leaving the device.

#include <vector>

#include "cortado/config.hpp"
#include "cortado/layers/loss_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class SigmoidCrossEntropyLossLayer : public LossLayer<Ftype, Btype> {
 public:
  CORTADO_LAYER_TYPE(LossLayer, "SigmoidCrossEntropyLoss")
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  using M = math_t<Ftype>;
  int outer_ = 1;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// top[0] = float(sum l(x, t) / A(normalizer)) over the n elements whose target (read as float) is not
/// ignore_label, l in A = math_t<T>; normalizer = max(1, fixed_normalizer), or max(1, valid count) when
/// fixed_normalizer < 0; *normalizer_out = normalizer. partial and valid are scratch of
/// cuda::blocks_for(n) values each.
template <typename T>
void sigmoid_cross_entropy_loss_forward(int64_t n, const T* x, const float* target, bool has_ignore_label,
                                        int ignore_label, double fixed_normalizer, math_t<T>* partial, double* valid,
                                        float* top, double* normalizer_out, CUstream_st* stream);
/// dx = B(s * (sigmoid(x) - t)), s = math_t<B>(*weight / *normalizer) (both double); 0 where ignored.
template <typename T, typename B>
void sigmoid_cross_entropy_loss_backward(int64_t n, const T* x, const float* target, bool has_ignore_label,
                                         int ignore_label, const double* weight, const double* normalizer, B* dx,
                                         CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
