#pragma once
// InfogainLoss (BVLC Caffe's current form): softmax over `axis`, then a
// loss weighted by an infogain matrix H (K x K, K the number of classes).
//
//   p = softmax(x) along axis (kept in math_t<Ftype>)
//   loss = -sum_{valid n} sum_k H[label_n, k] log(max(p[n, k], FLT_MIN)) / normalizer
//   backward: dx[n, k] = w / normalizer * (p[n, k] * sum_j H[label_n, j] - H[label_n, k]),
//             0 where the label is ignored; w the loss top's diff.
// With H the identity this is SoftmaxWithLoss.
//
// Bottoms: 2 or 3. bottom[0] x: (outer, K, inner) around axis; bottom[1]
// labels: outer * inner values, read as float, integers in [0, K) or
// ignore_label; optional bottom[2] H: K * K values (read as float; no
// gradient). Without bottom[2], H is read once at set-up from
// infogain_loss_param.source.
// Tops: 1 or 2. top[0] the loss, a scalar (shape ()), written as float;
// optional top[1] the probabilities (bottom[0]'s shape, Ftype).
// Fields:
//   infogain_loss_param.source: path of a BlobProto (binaryproto) holding H
//     (K * K values, data or double_data); required without bottom[2].
//   infogain_loss_param.axis (default 1)
//   loss_param.ignore_label, loss_param.normalization (default VALID),
//   loss_param.normalize: as for SoftmaxWithLoss.
//   loss_weight: default 1 for top[0], 0 for top[1].
// Errors (FieldError): no source and no third bottom, an unreadable source
// ("infogain_loss_param.source", naming the path), H of the wrong count, a
// bad axis, a label count mismatch or a label that is not a class index;
// propagate_down to the labels or H.
// In place: no. GPU: no GPU path yet (the CPU path runs).

#include <string>
#include <vector>

#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class InfogainLossLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "InfogainLoss"; }
  int MinBottomBlobs() const override { return 2; }
  int MaxBottomBlobs() const override { return 3; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AutoTopBlobs() const override { return true; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;

 private:
  using M = math_t<Ftype>;
  bool Ignored(float v, int64_t position) const;
  /// H as M values: from bottom[2] when present, else the matrix read at set-up.
  const M* Matrix(const BlobVec& bottom);

  int axis_ = 1;
  int outer_ = 0, channels_ = 0, inner_ = 0;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  LossParameter::NormalizationMode normalization_ = LossParameter::VALID;
  double normalizer_ = 1;
  std::vector<M> file_h_;   // H from the source file (K * K)
  std::vector<M> h_;        // H of the last forward
  std::vector<M> row_sum_;  // (K) sum_j H[k, j]
  std::vector<M> prob_;     // (outer, K, inner)
  std::vector<M> scratch_;  // (K)
};

}  // namespace cortado
