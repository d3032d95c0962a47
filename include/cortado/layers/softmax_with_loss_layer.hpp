#pragma once
// SoftmaxWithLoss: softmax over `axis` followed by the multinomial logistic
// loss, fused for numerical stability.
//
//   p = softmax(x) along axis (computed and kept in math_t: double for the
//       (double, double) pair, float otherwise)
//   loss = -sum_{valid n} log(max(p[n, label_n], FLT_MIN)) / normalizer
//   backward: dx[n, c] = w / normalizer * (p[n, c] - [c == label_n]); 0 where
//             the label is ignore_label. w is the loss top's diff (its loss
//             weight, or the loss scale the solver put there).
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
//   loss_weight: default 1 for top[0] and 0 for top[1] (a loss layer).
// Errors: a label outside [0, C) that is not ignore_label (FieldError naming
// the value and C); a label count that does not match; propagate_down to the
// labels.
// In place: no.

#include <vector>

#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class SoftmaxWithLossLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "SoftmaxWithLoss"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AutoTopBlobs() const override { return true; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;

 private:
  using M = math_t<Ftype>;
  /// Whether label value v is ignored; throws FieldError if it is not a class index.
  bool Ignored(float v, int64_t position) const;

  int axis_ = 1;
  int outer_ = 0, channels_ = 0, inner_ = 0;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  LossParameter::NormalizationMode normalization_ = LossParameter::VALID;
  double normalizer_ = 1;
  std::vector<M> prob_;     // (outer, C, inner)
  std::vector<M> scratch_;  // (C)
};

}  // namespace cortado
