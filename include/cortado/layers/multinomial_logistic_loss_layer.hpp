#pragma once
// MultinomialLogisticLoss: negative log-likelihood of given probabilities.
//
//   loss = -sum_n log(max(p[n, label_n], 1e-20)) / N   (math_t<Ftype>)
//   backward: dp[n, label_n] = -w / N / max(p[n, label_n], 1e-20), 0
//             elsewhere; w the loss top's diff.
//
// Bottoms: 2. bottom[0] p: (N, ...) probabilities, D = count / N per sample;
// bottom[1] labels: N values, read as float, each an integer in [0, D).
// Tops: 1, the loss, a scalar (shape ()), written as float.
// Fields: loss_weight (default 1: a loss layer).
// Errors: a label that is not a class index (FieldError "bottom[1]"); a
// label count other than N; propagate_down to the labels.
// In place: no. GPU: no GPU path yet (the CPU path runs).

#include <vector>

#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class MultinomialLogisticLossLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "MultinomialLogisticLoss"; }
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
  int Label(float v, int n) const;
  int num_ = 1, dim_ = 0;
};

}  // namespace cortado
