#pragma once
// HingeLoss: one-vs-all hinge loss for N samples of D class scores.
//
//   m[n, d] = max(0, 1 - s x[n, d]), s = +1 when d == label_n, else -1
//   L1 (default): loss = sum m / N;   L2: loss = sum m^2 / N   (math_t<Ftype>)
//   backward: dx[n, d] = -s * w / N * (L1: [m > 0];  L2: 2 m), w the loss
//             top's diff.
//
// Bottoms: 2. bottom[0] x: (N, ...), D = count / N; bottom[1] labels: N
// values, read as float, each an integer in [0, D).
// Tops: 1, the loss, a scalar (shape ()), written as float.
// Fields: hinge_loss_param.norm: L1 (default) or L2; loss_weight (default 1).
// Errors: a label that is not a class index (FieldError "bottom[1]" naming the
// value and D); a label count other than N; propagate_down to the labels.
// In place: no. GPU: no GPU path yet (the CPU path runs).

#include <vector>

#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class HingeLossLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "HingeLoss"; }
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

  bool l2_ = false;
  int num_ = 1, dim_ = 0;
  std::vector<M> margin_;  // m
};

}  // namespace cortado
