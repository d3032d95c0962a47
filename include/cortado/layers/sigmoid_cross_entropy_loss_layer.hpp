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
// targets. In place: no. GPU: no GPU path yet (the CPU path runs).

#include <vector>

#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class SigmoidCrossEntropyLossLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "SigmoidCrossEntropyLoss"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;

 private:
  using M = math_t<Ftype>;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  LossParameter::NormalizationMode normalization_ = LossParameter::VALID;
  int outer_ = 1;
  double normalizer_ = 1;
};

}  // namespace cortado
