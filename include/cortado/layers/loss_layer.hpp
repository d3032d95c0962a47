#pragma once
// The loss family's shared definition (Caffe's LossLayer), header-only and
// included by the loss layers alone.
//
// LossLayer<Ftype, Btype> is what every loss layer derives from:
// - Loss weight: a loss layer's tops weigh 1 for top[0] and 0 for any other
//   top unless the prototxt gives loss_weight. LossLayer::LayerSetUp writes
//   these defaults; a derived LayerSetUp calls it (SetUp applies the weights
//   right after LayerSetUp). top[0] is a scalar (shape ()), written as float.
// - Blob counts: 2 bottoms (prediction, labels or targets) and 1 top unless a
//   layer says otherwise; force_backward never reaches bottom[1].
// - Labels: ReshapeLabels checks that bottom[1] holds one label per position
//   of the prediction (the FieldError "bottom[1]: the label bottom holds K
//   values (shape S) but the prediction P<how> needs N"); Label() reads one
//   label value as a class index in [0, classes) through Layer::ClassLabel
//   (a FieldError on bottom[1] naming the value and its position otherwise),
//   or -1 for loss_param.ignore_label. On the GPU a kernel cannot throw: it
//   records the first bad label in label_error_ (gpu_label_error.hpp) and
//   CheckGpuLabelError() raises the same FieldError on the next pass.
// - loss_param: ReadLossParam() reads ignore_label and the normalization
//   (loss_normalization.hpp) for the layers that honour them; Normalizer()
//   is the divisor on the CPU, FixedNormalizer() the one a kernel is given
//   (-1: the valid count, summed on the device).
// - Gradients: NoGradientTo() is the field error of propagate_down to a
//   bottom that takes none (labels, targets, the infogain matrix).
//
// SoftmaxLossBase<Ftype, Btype> adds what SoftmaxWithLoss and InfogainLoss
// share: a softmax over an axis of bottom[0] ((outer, C, inner) around it;
// one label per (outer, inner) position, read as float), the probabilities
// kept in math_t<Ftype> on the host (prob_) or the device (prob_gpu_), the
// optional top[1] holding them in Ftype, 1 or 2 tops (the Net adds the loss
// top when none is named), and the walk over the positions.

#include <cstdint>
#include <string>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"
#include "cortado/layers/gpu_label_error.hpp"
#include "cortado/layers/loss_normalization.hpp"
#include "cortado/layers/softmax_layer.hpp"
#include "cortado/util/cuda.hpp"
#include "cortado/util/gpu_math.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class LossLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  BlobRules blob_rules() const override { return BlobRules().Bottoms(2).Tops(1).NoForcedBackwardTo(1); }

  /// The default loss weights (1 for top[0], 0 for the others) when the
  /// prototxt gives none. Derived layers call it from their LayerSetUp.
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override {
    if (this->layer_param().loss_weight_size() == 0) {
      for (size_t i = 0; i < top.size(); ++i) this->param_.add_loss_weight(i == 0 ? 1.f : 0.f);
    }
  }

 protected:
  using M = math_t<Ftype>;

  /// loss_param.ignore_label and the normalization mode.
  void ReadLossParam() {
    const LossParameter& p = this->layer_param().loss_param();
    has_ignore_label_ = p.has_ignore_label();
    ignore_label_ = p.ignore_label();
    normalization_ = NormalizationMode(p);
  }
  /// Whether a target equals ignore_label (the layers that compare targets, not class indexes).
  bool IgnoredTarget(float t) const { return has_ignore_label_ && t == static_cast<float>(ignore_label_); }
  /// The divisor of the summed loss: `full` positions, `valid` of them not ignored, `batch` the outer count.
  double Normalizer(double full, double valid, double batch) const {
    return LossNormalizer(normalization_, full, valid, batch);
  }
  /// The normalizer a kernel is given: as Normalizer, or -1 where it is the
  /// valid count (VALID with an ignore_label), which only the device knows.
  double FixedNormalizer(double full, double batch) const {
    if (normalization_ == LossParameter::VALID && has_ignore_label_) return -1.0;
    return Normalizer(full, full, batch);
  }

  /// Checks that bottom[1] holds `positions` labels for the prediction
  /// bottom[0] (`how` ends the message, e.g. " with axis 1"), and sets the
  /// class count Label() checks against.
  void ReshapeLabels(const BlobVec& bottom, int64_t positions, int classes, const std::string& how = "") {
    if (bottom[1]->count() != static_cast<size_t>(positions)) {
      this->field_error("bottom[1]", "the label bottom holds ", bottom[1]->count(), " values (shape ",
                        bottom[1]->shape_string(), ") but the prediction ", bottom[0]->shape_string(), how,
                        " needs ", positions);
    }
    classes_ = classes;
  }
  /// The losses over N samples of D class scores, one label each: bottom[0]
  /// (N, ...) with D = count / N, N labels in bottom[1], a scalar top[0].
  void ReshapeSamples(const BlobVec& bottom, const BlobVec& top, int* num, int* dim) {
    if (bottom[0]->num_axes() < 1) this->field_error("bottom[0]", "needs at least one axis (N, ...)");
    *num = bottom[0]->shape(0);
    *dim = *num > 0 ? static_cast<int>(bottom[0]->count() / *num) : 0;
    ReshapeLabels(bottom, *num, *dim);
    top[0]->Reshape(std::vector<int>{});
  }
  /// The class label value v at `position` names, -1 if it is ignore_label
  /// (only after ReadLossParam); a FieldError if it is neither.
  int Label(float v, int64_t position) const {
    return this->ClassLabel(v, position, classes_, has_ignore_label_ ? &ignore_label_ : nullptr);
  }
  /// A FieldError if propagate_down asks for a gradient to bottom[index] (the `what` bottom).
  void NoGradientTo(const std::vector<bool>& propagate_down, size_t index, const char* what) const {
    if (propagate_down.size() > index && propagate_down[index]) {
      this->field_error("propagate_down", "cannot back-propagate to the ", what, " bottom");
    }
  }
  /// The loss top's diff w (its loss weight, or the loss scale the solver put there), read in double: exact
  /// whatever type wrote it.
  static double LossWeight(const BlobVec& top) { return top[0]->cpu_diff<double>()[0]; }

#ifdef CORTADO_USE_CUDA
  /// Throws the FieldError of a bad label a GPU pass recorded, if any.
  void CheckGpuLabelError() {
    label_error_.Rethrow([this](float v, int64_t p) { Label(v, p); });
  }
  /// The pinned word a kernel records the first bad label in.
  unsigned long long* gpu_label_error() { return static_cast<unsigned long long*>(label_error_.device_word()); }
  /// Device scratch of the two-stage loss sum over n items (loss_sum.cuh):
  /// cuda::blocks_for(n) partial sums in M, and as many valid counts.
  M* loss_partials(int64_t n) { return Sized(&partial_gpu_, cuda::blocks_for(n))->template mutable_gpu_data<M>(); }
  double* valid_partials(int64_t n) { return Sized(&valid_gpu_, cuda::blocks_for(n))->template mutable_gpu_data<double>(); }
  /// (1) the normalizer of the last GPU forward, for the backward.
  Tensor norm_gpu_{DOUBLE};

  static Tensor* Sized(Tensor* t, int64_t n) {
    if (t->count() != static_cast<size_t>(n)) t->resize(n);
    return t;
  }
#endif

  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  LossParameter::NormalizationMode normalization_ = LossParameter::VALID;
  double normalizer_ = 1;  // the divisor of the last CPU forward
  int classes_ = 0;        // Label()'s class count

 private:
#ifdef CORTADO_USE_CUDA
  Tensor partial_gpu_{type_of<M>()};
  Tensor valid_gpu_{DOUBLE};
#endif
  GpuLabelError label_error_;
};

template <typename Ftype, typename Btype>
class SoftmaxLossBase : public LossLayer<Ftype, Btype> {
 public:
  using LossLayer<Ftype, Btype>::LossLayer;
  BlobRules blob_rules() const override { return BlobRules().Bottoms(2).Tops(1, 2).AutoTops().NoForcedBackwardTo(1); }

 protected:
  using M = math_t<Ftype>;

  /// The softmax axis from `field` (in [-axes, axes) of bottom[0]), and loss_param.
  void SetUpSoftmax(const BlobVec& bottom, int axis, const char* field) {
    const int n = bottom[0]->num_axes();
    if (axis < -n || axis >= n) {
      this->field_error(field, "must be in [", -n, ", ", n, ") for a bottom of shape ", bottom[0]->shape_string(),
                        ", got ", axis);
    }
    axis_ = bottom[0]->CanonicalAxisIndex(axis);
    this->ReadLossParam();
  }
  /// (outer, C, inner) around the axis, the label count (`how` as in
  /// ReshapeLabels), the scalar top[0] and top[1] like bottom[0].
  void ReshapeSoftmax(const BlobVec& bottom, const BlobVec& top, const std::string& how) {
    outer_ = static_cast<int>(bottom[0]->count(0, axis_));
    channels_ = bottom[0]->shape(axis_);
    inner_ = static_cast<int>(bottom[0]->count(axis_ + 1));
    this->ReshapeLabels(bottom, static_cast<int64_t>(outer_) * inner_, channels_, how);
    top[0]->Reshape(std::vector<int>{});
    if (top.size() > 1) top[1]->ReshapeLike(*bottom[0]);
    prob_.resize(bottom[0]->count());
    scratch_.resize(channels_);
  }
  /// Calls f(base, pos, l) for every (outer, inner) position in order: base
  /// the index of its class 0 in (outer, C, inner) (class c at base + c *
  /// inner), pos its index among the labels, l its class or -1 if ignored.
  template <typename F>
  void ForEachPosition(const float* label, F&& f) const {
    const int64_t dim = static_cast<int64_t>(channels_) * inner_;
    for (int o = 0; o < outer_; ++o) {
      for (int i = 0; i < inner_; ++i) {
        const int64_t pos = static_cast<int64_t>(o) * inner_ + i;
        f(o * dim + i, pos, this->Label(label[pos], pos));
      }
    }
  }
  /// prob_ = softmax(x) column by column, and top[1] = Ftype(prob_) if present.
  void Probabilities_cpu(const BlobVec& bottom, const BlobVec& top) {
    const Ftype* x = bottom[0]->cpu_data<Ftype>();
    const int64_t dim = static_cast<int64_t>(channels_) * inner_;
    for (int o = 0; o < outer_; ++o) {
      for (int i = 0; i < inner_ && channels_ > 0; ++i) {
        const int64_t base = o * dim + i;
        softmax_column(x + base, channels_, inner_, scratch_.data(), prob_.data() + base);
      }
    }
    if (top.size() > 1) {
      Ftype* y = top[1]->mutable_cpu_data<Ftype>();
      for (size_t k = 0; k < prob_.size(); ++k) y[k] = static_cast<Ftype>(prob_[k]);
    }
  }
#ifdef CORTADO_USE_CUDA
  /// The same on the device, into prob_gpu_ (returned) and top[1].
  const M* Probabilities_gpu(const BlobVec& bottom, const BlobVec& top) {
    cudaStream_t stream = this->context().stream();
    const int64_t count = static_cast<int64_t>(bottom[0]->count());
    M* prob = this->Sized(&prob_gpu_, count)->template mutable_gpu_data<M>();
    gpu::softmax_forward(outer_, channels_, inner_, bottom[0]->gpu_data<Ftype>(), prob, stream);
    if (top.size() > 1) {
      gpu_convert(type_of<M>(), prob, type_of<Ftype>(), top[1]->mutable_gpu_data<Ftype>(), count, stream);
    }
    return prob;
  }
  Tensor prob_gpu_{type_of<M>()};  // (outer, C, inner) in M
#endif

  int axis_ = 1;
  int outer_ = 0, channels_ = 0, inner_ = 0;
  std::vector<M> prob_;     // (outer, C, inner)
  std::vector<M> scratch_;  // (C)
};

}  // namespace cortado
