#pragma once
// Accuracy: the fraction of predictions whose true class is among the top_k
// scores.
//
// A prediction counts as correct when fewer than top_k classes score at
// least as high as the true class, not counting the true class itself (a
// tie with the true class counts against it, as in BVLC Caffe).
//
// Bottoms: 2. bottom[0] scores: (outer, C, inner) around axis, read as Ftype
// and compared in math_t; bottom[1] labels: outer * inner values, read as
// float, each an integer in [0, C) or ignore_label.
// Tops: 1 or 2, written as float. top[0] the accuracy over non-ignored
// labels, a scalar (shape ()); 0 when every label is ignored. Optional top[1]
// (C): the accuracy per true class (0 for a class that never occurs).
// Fields:
//   accuracy_param.top_k (default 1), 1 <= top_k <= C
//   accuracy_param.axis (default 1)
//   accuracy_param.ignore_label (unset: no label is ignored)
// No backward: Backward does nothing and force_backward does not apply.
// In place: no.

#include <vector>

#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class AccuracyLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "Accuracy"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override {}

 private:
  int top_k_ = 1;
  int axis_ = 1;
  int outer_ = 0, channels_ = 0, inner_ = 0;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
};

}  // namespace cortado
