#pragma once
// EuclideanLoss: half the mean squared distance between two blobs.
//
//   d = a - b (elementwise, kept in math_t<Ftype>)
//   loss = sum(d^2) / (2 N), N = a.shape(0) (the batch), summed in math_t
//   backward: da = w / N * d, db = -w / N * d, w the loss top's diff.
//
// Bottoms: 2, same count (shapes may differ, e.g. (N, C) and (N, C, 1, 1)).
// Tops: 1, the loss, a scalar (shape ()), written as float.
// Fields: loss_weight (default 1: a loss layer). No other parameters.
// Errors: bottoms of different counts (FieldError "bottom[1]").
// Both bottoms may receive gradients. In place: no.
// GPU: no GPU path yet (the CPU path runs on a GPU context).

#include <vector>

#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class EuclideanLossLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "EuclideanLoss"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int) const override { return true; }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;

 private:
  using M = math_t<Ftype>;
  std::vector<M> diff_;  // a - b
  int num_ = 1;
};

}  // namespace cortado
