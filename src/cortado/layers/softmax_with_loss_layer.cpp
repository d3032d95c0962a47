#include "cortado/layers/softmax_with_loss_layer.hpp"
#include "cortado/layers/loss_normalization.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cortado/layers/softmax_layer.hpp"
#ifdef CORTADO_USE_CUDA
#include "cortado/util/cuda.hpp"
#include "cortado/util/gpu_math.hpp"
#endif

namespace cortado {

template <typename Ftype, typename Btype>
void SoftmaxWithLossLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const LayerParameter& p = this->layer_param();
  const int axis = p.softmax_param().axis();
  const int n = bottom[0]->num_axes();
  if (axis < -n || axis >= n) {
    this->field_error("softmax_param.axis", "must be in [", -n, ", ", n, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", axis);
  }
  axis_ = bottom[0]->CanonicalAxisIndex(axis);
  has_ignore_label_ = p.loss_param().has_ignore_label();
  ignore_label_ = p.loss_param().ignore_label();
  normalization_ = NormalizationMode(p.loss_param());
  const float eps = p.loss_param().label_smoothing();
  if (!(eps >= 0.f && eps < 1.f)) this->field_error("loss_param.label_smoothing", "must be in [0, 1), got ", eps);
  smoothing_ = eps;
  // A loss layer: its loss top weighs 1 unless the prototxt says otherwise
  // (SetUp applies the weights right after LayerSetUp).
  if (p.loss_weight_size() == 0) {
    for (size_t i = 0; i < top.size(); ++i) this->param_.add_loss_weight(i == 0 ? 1.f : 0.f);
  }
}

template <typename Ftype, typename Btype>
void SoftmaxWithLossLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  outer_ = static_cast<int>(bottom[0]->count(0, axis_));
  channels_ = bottom[0]->shape(axis_);
  inner_ = static_cast<int>(bottom[0]->count(axis_ + 1));
  if (bottom[1]->count() != static_cast<size_t>(outer_) * inner_) {
    this->field_error("bottom[1]", "the label bottom holds ", bottom[1]->count(), " values (shape ",
                      bottom[1]->shape_string(), ") but the prediction ", bottom[0]->shape_string(),
                      " with softmax axis ", axis_, " needs ", static_cast<int64_t>(outer_) * inner_);
  }
  if (smoothing_ > 0 && channels_ < 2) {
    this->field_error("loss_param.label_smoothing", "needs at least 2 classes along the softmax axis, got ",
                      channels_);
  }
  top[0]->Reshape(std::vector<int>{});
  if (top.size() > 1) top[1]->ReshapeLike(*bottom[0]);
  prob_.resize(bottom[0]->count());
  scratch_.resize(channels_);
}

template <typename Ftype, typename Btype>
bool SoftmaxWithLossLayer<Ftype, Btype>::Ignored(float v, int64_t position) const {
  return this->ClassLabel(v, position, channels_, has_ignore_label_ ? &ignore_label_ : nullptr) < 0;
}

template <typename Ftype, typename Btype>
void SoftmaxWithLossLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const float* label = bottom[1]->cpu_data<float>();
  const int64_t dim = static_cast<int64_t>(channels_) * inner_;
  double loss = 0;
  int64_t valid = 0;
  for (int o = 0; o < outer_; ++o) {
    for (int i = 0; i < inner_; ++i) {
      const int64_t base = o * dim + i;
      if (channels_ > 0) softmax_column(x + base, channels_, inner_, scratch_.data(), prob_.data() + base);
      const int64_t pos = static_cast<int64_t>(o) * inner_ + i;
      if (Ignored(label[pos], pos)) continue;
      const int l = static_cast<int>(label[pos]);
      const auto log_p = [&](int c) {
        return std::log(std::max(static_cast<double>(prob_[base + static_cast<int64_t>(c) * inner_]),
                                 static_cast<double>(FLT_MIN)));
      };
      if (smoothing_ > 0) {
        double others = 0;
        for (int c = 0; c < channels_; ++c) others += c == l ? 0.0 : log_p(c);
        loss -= (1 - smoothing_) * log_p(l) + smoothing_ / (channels_ - 1) * others;
      } else {
        loss -= log_p(l);
      }
      ++valid;
    }
  }
  const double all = static_cast<double>(outer_) * inner_;
  normalizer_ = LossNormalizer(normalization_, all, has_ignore_label_ ? static_cast<double>(valid) : all, outer_);
  top[0]->mutable_cpu_data<float>()[0] = static_cast<float>(loss / normalizer_);
  if (top.size() > 1) {
    Ftype* y = top[1]->mutable_cpu_data<Ftype>();
    for (size_t k = 0; k < prob_.size(); ++k) y[k] = static_cast<Ftype>(prob_[k]);
  }
}

template <typename Ftype, typename Btype>
void SoftmaxWithLossLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                      const BlobVec& bottom) {
  if (propagate_down.size() > 1 && propagate_down[1]) {
    this->field_error("propagate_down", "cannot back-propagate to the label bottom");
  }
  if (!propagate_down[0]) return;
  // The loss weight is read in double: exact whatever type wrote it.
  const double scale = top[0]->cpu_diff<double>()[0] / normalizer_;
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const float* label = bottom[1]->cpu_data<float>();
  const int64_t dim = static_cast<int64_t>(channels_) * inner_;
  for (int o = 0; o < outer_; ++o) {
    for (int i = 0; i < inner_; ++i) {
      const int64_t base = o * dim + i;
      const int64_t pos = static_cast<int64_t>(o) * inner_ + i;
      const bool ignored = Ignored(label[pos], pos);
      const int l = ignored ? -1 : static_cast<int>(label[pos]);
      const double on = 1 - smoothing_, off = smoothing_ > 0 ? smoothing_ / (channels_ - 1) : 0.0;
      for (int c = 0; c < channels_; ++c) {
        const int64_t k = base + static_cast<int64_t>(c) * inner_;
        const double g = ignored ? 0.0 : (static_cast<double>(prob_[k]) - (c == l ? on : off)) * scale;
        dx[k] = static_cast<Btype>(static_cast<math_t<Btype>>(g));
      }
    }
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void SoftmaxWithLossLayer<Ftype, Btype>::CheckGpuLabelError() {
  label_error_.Rethrow([this](float v, int64_t p) { Ignored(v, p); });
}

template <typename Ftype, typename Btype>
void SoftmaxWithLossLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  CheckGpuLabelError();
  void* error = label_error_.device_word();
  cudaStream_t stream = this->context().stream();
  const int64_t count = static_cast<int64_t>(bottom[0]->count());
  const int64_t positions = static_cast<int64_t>(outer_) * inner_;
  if (prob_gpu_.count() != static_cast<size_t>(count)) prob_gpu_.resize(count);
  if (loss_gpu_.count() != static_cast<size_t>(2 * positions)) loss_gpu_.resize(2 * positions);
  if (norm_gpu_.count() != 1) norm_gpu_.resize(1);

  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  const float* label = bottom[1]->gpu_data<float>();
  M* prob = prob_gpu_.mutable_gpu_data<M>();
  gpu::softmax_forward(outer_, channels_, inner_, x, prob, stream);
  double* loss = loss_gpu_.mutable_gpu_data<double>();
  gpu::softmax_loss_positions(outer_, channels_, inner_, prob, label, has_ignore_label_, ignore_label_, smoothing_,
                              loss, loss + positions, static_cast<unsigned long long*>(error), stream);
  double fixed = 1;  // the normalizer, or -1: the valid count, known on the device only
  switch (normalization_) {
    case LossParameter::FULL: fixed = static_cast<double>(positions); break;
    case LossParameter::VALID: fixed = has_ignore_label_ ? -1.0 : static_cast<double>(positions); break;
    case LossParameter::BATCH_SIZE: fixed = outer_; break;
    case LossParameter::NONE: fixed = 1; break;
  }
  gpu::softmax_loss_reduce(positions, loss, loss + positions, fixed, top[0]->mutable_gpu_data<float>(),
                           norm_gpu_.mutable_gpu_data<double>(), stream);
  if (top.size() > 1) gpu_convert(type_of<M>(), prob, type_of<Ftype>(), top[1]->mutable_gpu_data<Ftype>(), count, stream);
}

template <typename Ftype, typename Btype>
void SoftmaxWithLossLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                      const BlobVec& bottom) {
  if (propagate_down.size() > 1 && propagate_down[1]) {
    this->field_error("propagate_down", "cannot back-propagate to the label bottom");
  }
  CheckGpuLabelError();
  if (!propagate_down[0]) return;
  CORTADO_CHECK_EQ(prob_gpu_.count(), bottom[0]->count()) << "SoftmaxWithLoss backward before a GPU forward";
  // The loss weight is read in double on the device: exact whatever type wrote it.
  const double* weight = top[0]->gpu_diff<double>();
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  gpu::softmax_loss_backward(outer_, channels_, inner_, prob_gpu_.gpu_data<M>(), bottom[1]->gpu_data<float>(),
                             has_ignore_label_, ignore_label_, smoothing_, weight, norm_gpu_.gpu_data<double>(),
                             dx, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(SoftmaxWithLossLayer);

}  // namespace cortado
