#pragma once
// ContrastiveLoss (Hadsell, Chopra, LeCun 2006) over N pairs of C-vectors.
//
//   d_n = a_n - b_n, D_n = |d_n|^2 (math_t<Ftype>)
//   similar pair (y_n != 0): l_n = D_n
//   dissimilar pair: l_n = max(margin - sqrt(D_n), 0)^2, or with
//     legacy_version max(margin - D_n, 0)
//   loss = sum_n l_n / (2 N)
//   backward (alpha = +-w / N for a / b, w the loss top's diff):
//     similar: alpha * d_n; dissimilar: legacy -alpha * d_n where
//     margin - D_n > 0; else -alpha * (margin - sqrt(D_n)) / (sqrt(D_n) + 1e-4)
//     * d_n where margin - sqrt(D_n) > 0; 0 otherwise.
//
// Bottoms: 3. a and b: (N, C, ...) of the same shape; y: N values read as
// float (the similarity flag, truncated to an integer; non-zero = similar).
// Tops: 1, the loss, a scalar (shape ()), written as float.
// Fields: contrastive_loss_param.margin (default 1.0),
//   contrastive_loss_param.legacy_version (default false); loss_weight
//   (default 1: a loss layer).
// Errors: a and b of different shapes, y count other than N (FieldError
// "bottom[1]" / "bottom[2]"); propagate_down to y.
// In place: no. GPU: no GPU path yet (the CPU path runs).

#include <vector>

#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class ContrastiveLossLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "ContrastiveLoss"; }
  int ExactNumBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 2; }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;

 private:
  using M = math_t<Ftype>;
  double margin_ = 1;
  bool legacy_ = false;
  int num_ = 1, dim_ = 0;
  std::vector<M> diff_;     // a - b
  std::vector<M> dist_sq_;  // (N)
};

}  // namespace cortado
