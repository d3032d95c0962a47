#include "cortado/layers/softmax_with_loss_layer.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>

namespace cortado {

template <typename Ftype, typename Btype>
void SoftmaxWithLossLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  SoftmaxLossBase<Ftype, Btype>::LayerSetUp(bottom, top);
  const LayerParameter& p = this->layer_param();
  this->SetUpSoftmax(bottom, p.softmax_param().axis(), "softmax_param.axis");
  const float eps = p.loss_param().label_smoothing();
  if (!(eps >= 0.f && eps < 1.f)) this->field_error("loss_param.label_smoothing", "must be in [0, 1), got ", eps);
  smoothing_ = eps;
}

template <typename Ftype, typename Btype>
void SoftmaxWithLossLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  this->ReshapeSoftmax(bottom, top, str_cat(" with softmax axis ", this->axis_));
  if (smoothing_ > 0 && this->channels_ < 2) {
    this->field_error("loss_param.label_smoothing", "needs at least 2 classes along the softmax axis, got ",
                      this->channels_);
  }
}

template <typename Ftype, typename Btype>
void SoftmaxWithLossLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  this->Probabilities_cpu(bottom, top);
  const std::vector<M>& prob = this->prob_;
  const int channels = this->channels_, inner = this->inner_;
  double loss = 0;
  int64_t valid = 0;
  this->ForEachPosition(bottom[1]->cpu_data<float>(), [&](int64_t base, int64_t, int l) {
    if (l < 0) return;
    const auto log_p = [&](int c) {
      return std::log(std::max(static_cast<double>(prob[base + static_cast<int64_t>(c) * inner]),
                               static_cast<double>(FLT_MIN)));
    };
    if (smoothing_ > 0) {
      double others = 0;
      for (int c = 0; c < channels; ++c) others += c == l ? 0.0 : log_p(c);
      loss -= (1 - smoothing_) * log_p(l) + smoothing_ / (channels - 1) * others;
    } else {
      loss -= log_p(l);
    }
    ++valid;
  });
  const double all = static_cast<double>(this->outer_) * inner;
  this->normalizer_ = this->Normalizer(all, static_cast<double>(valid), this->outer_);
  top[0]->mutable_cpu_data<float>()[0] = static_cast<float>(loss / this->normalizer_);
}

template <typename Ftype, typename Btype>
void SoftmaxWithLossLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                      const BlobVec& bottom) {
  this->NoGradientTo(propagate_down, 1, "label");
  if (!propagate_down[0]) return;
  const double scale = this->LossWeight(top) / this->normalizer_;
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const int channels = this->channels_, inner = this->inner_;
  const double on = 1 - smoothing_, off = smoothing_ > 0 ? smoothing_ / (channels - 1) : 0.0;
  this->ForEachPosition(bottom[1]->cpu_data<float>(), [&](int64_t base, int64_t, int l) {
    for (int c = 0; c < channels; ++c) {
      const int64_t k = base + static_cast<int64_t>(c) * inner;
      const double g = l < 0 ? 0.0 : (static_cast<double>(this->prob_[k]) - (c == l ? on : off)) * scale;
      dx[k] = static_cast<Btype>(static_cast<math_t<Btype>>(g));
    }
  });
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void SoftmaxWithLossLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  this->CheckGpuLabelError();
  cudaStream_t stream = this->context().stream();
  const int64_t positions = static_cast<int64_t>(this->outer_) * this->inner_;
  const M* prob = this->Probabilities_gpu(bottom, top);
  double* loss = this->Sized(&loss_gpu_, 2 * positions)->template mutable_gpu_data<double>();
  gpu::softmax_loss_positions(this->outer_, this->channels_, this->inner_, prob, bottom[1]->gpu_data<float>(),
                              this->has_ignore_label_, this->ignore_label_, smoothing_, loss, loss + positions,
                              this->gpu_label_error(), stream);
  gpu::softmax_loss_reduce(positions, loss, loss + positions,
                           this->FixedNormalizer(static_cast<double>(positions), this->outer_),
                           top[0]->mutable_gpu_data<float>(),
                           this->Sized(&this->norm_gpu_, 1)->template mutable_gpu_data<double>(), stream);
}

template <typename Ftype, typename Btype>
void SoftmaxWithLossLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                      const BlobVec& bottom) {
  this->NoGradientTo(propagate_down, 1, "label");
  this->CheckGpuLabelError();
  if (!propagate_down[0]) return;
  CORTADO_CHECK_EQ(this->prob_gpu_.count(), bottom[0]->count()) << "SoftmaxWithLoss backward before a GPU forward";
  // The loss weight is read in double on the device: exact whatever type wrote it.
  gpu::softmax_loss_backward(this->outer_, this->channels_, this->inner_, this->prob_gpu_.template gpu_data<M>(),
                             bottom[1]->gpu_data<float>(), this->has_ignore_label_, this->ignore_label_, smoothing_,
                             top[0]->gpu_diff<double>(), this->norm_gpu_.template gpu_data<double>(),
                             bottom[0]->mutable_gpu_diff<Btype>(), this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(SoftmaxWithLossLayer);

}  // namespace cortado
