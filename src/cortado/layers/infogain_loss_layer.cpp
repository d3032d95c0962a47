#include "cortado/layers/infogain_loss_layer.hpp"
#include "cortado/layers/loss_normalization.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>

#include "cortado/layers/softmax_layer.hpp"
#include "cortado/util/blob_io.hpp"
#include "cortado/util/io.hpp"
#ifdef CORTADO_USE_CUDA
#include "cortado/util/cuda.hpp"
#include "cortado/util/gpu_math.hpp"
#endif

namespace cortado {

template <typename Ftype, typename Btype>
void InfogainLossLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const LayerParameter& p = this->layer_param();
  const int axis = p.infogain_loss_param().axis();
  const int n = bottom[0]->num_axes();
  if (axis < -n || axis >= n) {
    this->field_error("infogain_loss_param.axis", "must be in [", -n, ", ", n, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", axis);
  }
  axis_ = bottom[0]->CanonicalAxisIndex(axis);
  has_ignore_label_ = p.loss_param().has_ignore_label();
  ignore_label_ = p.loss_param().ignore_label();
  normalization_ = NormalizationMode(p.loss_param());
  if (bottom.size() < 3) {
    if (!p.infogain_loss_param().has_source() || p.infogain_loss_param().source().empty()) {
      this->field_error("infogain_loss_param.source",
                        "is required when the infogain matrix is not given as a third bottom");
    }
    const std::string& path = p.infogain_loss_param().source();
    if (!std::ifstream(path, std::ios::binary).good()) {
      this->field_error("infogain_loss_param.source", "cannot open '", path, "'");
    }
    BlobProto proto;
    try {
      ReadBinaryProto(path, &proto);
    } catch (const Error& e) {
      this->field_error("infogain_loss_param.source", "cannot read '", path, "' as a BlobProto (binaryproto): ",
                        e.what());
    }
    file_h_.clear();
    try {
      for (double v : BlobProtoData(proto, str_cat("'", path, "'"))) file_h_.push_back(static_cast<M>(v));
    } catch (const Error& e) {
      this->field_error("infogain_loss_param.source", e.what());
    }
#ifdef CORTADO_USE_CUDA
    // The GPU path's copy; it reaches the device on the first GPU forward.
    file_h_gpu_.resize(file_h_.size());
    if (!file_h_.empty()) std::copy(file_h_.begin(), file_h_.end(), file_h_gpu_.mutable_data<M>());
#endif
  }
  if (p.loss_weight_size() == 0) {
    for (size_t i = 0; i < top.size(); ++i) this->param_.add_loss_weight(i == 0 ? 1.f : 0.f);
  }
}

template <typename Ftype, typename Btype>
void InfogainLossLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  outer_ = static_cast<int>(bottom[0]->count(0, axis_));
  channels_ = bottom[0]->shape(axis_);
  inner_ = static_cast<int>(bottom[0]->count(axis_ + 1));
  if (bottom[1]->count() != static_cast<size_t>(outer_) * inner_) {
    this->field_error("bottom[1]", "the label bottom holds ", bottom[1]->count(), " values (shape ",
                      bottom[1]->shape_string(), ") but the prediction ", bottom[0]->shape_string(), " with axis ",
                      axis_, " needs ", static_cast<int64_t>(outer_) * inner_);
  }
  const size_t kk = static_cast<size_t>(channels_) * channels_;
  if (bottom.size() > 2) {
    if (bottom[2]->count() != kk) {
      this->field_error("bottom[2]", "the infogain matrix holds ", bottom[2]->count(), " values (shape ",
                        bottom[2]->shape_string(), "), expected ", channels_, " x ", channels_);
    }
  } else if (file_h_.size() != kk) {
    this->field_error("infogain_loss_param.source", "'", this->layer_param().infogain_loss_param().source(),
                      "' holds ", file_h_.size(), " values, expected ", channels_, " x ", channels_);
  }
  top[0]->Reshape(std::vector<int>{});
  if (top.size() > 1) top[1]->ReshapeLike(*bottom[0]);
  prob_.resize(bottom[0]->count());
  scratch_.resize(channels_);
  h_.resize(kk);
  row_sum_.resize(channels_);
}

template <typename Ftype, typename Btype>
bool InfogainLossLayer<Ftype, Btype>::Ignored(float v, int64_t position) const {
  return this->ClassLabel(v, position, channels_, has_ignore_label_ ? &ignore_label_ : nullptr) < 0;
}

template <typename Ftype, typename Btype>
const typename InfogainLossLayer<Ftype, Btype>::M* InfogainLossLayer<Ftype, Btype>::Matrix(const BlobVec& bottom) {
  if (bottom.size() > 2) {
    const float* h = bottom[2]->cpu_data<float>();
    for (size_t k = 0; k < h_.size(); ++k) h_[k] = static_cast<M>(h[k]);
  } else {
    h_ = file_h_;
  }
  for (int r = 0; r < channels_; ++r) {
    M s = 0;
    for (int c = 0; c < channels_; ++c) s += h_[static_cast<size_t>(r) * channels_ + c];
    row_sum_[r] = s;
  }
  return h_.data();
}

template <typename Ftype, typename Btype>
void InfogainLossLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const float* label = bottom[1]->cpu_data<float>();
  const M* h = Matrix(bottom);
  const int64_t dim = static_cast<int64_t>(channels_) * inner_;
  M loss = 0;
  int64_t valid = 0;
  for (int o = 0; o < outer_; ++o) {
    for (int i = 0; i < inner_; ++i) {
      const int64_t base = o * dim + i;
      if (channels_ > 0) softmax_column(x + base, channels_, inner_, scratch_.data(), prob_.data() + base);
      const int64_t pos = static_cast<int64_t>(o) * inner_ + i;
      if (Ignored(label[pos], pos)) continue;
      const int l = static_cast<int>(label[pos]);
      for (int c = 0; c < channels_; ++c) {
        const M pc = std::max(prob_[base + static_cast<int64_t>(c) * inner_], static_cast<M>(FLT_MIN));
        loss -= h[static_cast<int64_t>(l) * channels_ + c] * std::log(pc);
      }
      ++valid;
    }
  }
  normalizer_ = LossNormalizer(normalization_, static_cast<double>(outer_) * inner_, static_cast<double>(valid), outer_);
  top[0]->mutable_cpu_data<float>()[0] = static_cast<float>(loss / static_cast<M>(normalizer_));
  if (top.size() > 1) {
    Ftype* y = top[1]->mutable_cpu_data<Ftype>();
    for (size_t k = 0; k < prob_.size(); ++k) y[k] = static_cast<Ftype>(prob_[k]);
  }
}

template <typename Ftype, typename Btype>
void InfogainLossLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                   const BlobVec& bottom) {
  if (propagate_down.size() > 1 && propagate_down[1]) {
    this->field_error("propagate_down", "cannot back-propagate to the label bottom");
  }
  if (propagate_down.size() > 2 && propagate_down[2]) {
    this->field_error("propagate_down", "cannot back-propagate to the infogain matrix bottom");
  }
  if (!propagate_down[0]) return;
  using MB = math_t<Btype>;
  const MB scale = static_cast<MB>(top[0]->cpu_diff<double>()[0] / normalizer_);
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const float* label = bottom[1]->cpu_data<float>();
  const int64_t dim = static_cast<int64_t>(channels_) * inner_;
  for (int o = 0; o < outer_; ++o) {
    for (int i = 0; i < inner_; ++i) {
      const int64_t base = o * dim + i;
      const int64_t pos = static_cast<int64_t>(o) * inner_ + i;
      const bool ignored = Ignored(label[pos], pos);
      const int l = ignored ? 0 : static_cast<int>(label[pos]);
      for (int c = 0; c < channels_; ++c) {
        const int64_t k = base + static_cast<int64_t>(c) * inner_;
        MB g = 0;
        if (!ignored) {
          g = static_cast<MB>(prob_[k] * row_sum_[l] - h_[static_cast<int64_t>(l) * channels_ + c]) * scale;
        }
        dx[k] = static_cast<Btype>(g);
      }
    }
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void InfogainLossLayer<Ftype, Btype>::CheckGpuLabelError() {
  label_error_.Rethrow([this](float v, int64_t p) { Ignored(v, p); });
}

template <typename Ftype, typename Btype>
void InfogainLossLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  CheckGpuLabelError();
  void* error = label_error_.device_word();
  cudaStream_t stream = this->context().stream();
  const int64_t count = static_cast<int64_t>(bottom[0]->count());
  const int64_t positions = static_cast<int64_t>(outer_) * inner_;
  const size_t kk = static_cast<size_t>(channels_) * channels_;
  const size_t blocks = static_cast<size_t>(cuda::blocks_for(positions));
  if (h_gpu_.count() != kk) h_gpu_.resize(kk);
  if (row_sum_gpu_.count() != static_cast<size_t>(channels_)) row_sum_gpu_.resize(channels_);
  if (prob_gpu_.count() != static_cast<size_t>(count)) prob_gpu_.resize(count);
  if (partial_gpu_.count() != blocks) partial_gpu_.resize(blocks);
  if (valid_gpu_.count() != blocks) valid_gpu_.resize(blocks);
  if (norm_gpu_.count() != 1) norm_gpu_.resize(1);

  M* h = h_gpu_.mutable_gpu_data<M>();
  M* row_sum = row_sum_gpu_.mutable_gpu_data<M>();
  if (bottom.size() > 2) {
    gpu::infogain_matrix(channels_, bottom[2]->gpu_data<float>(), h, row_sum, stream);
  } else {
    gpu::infogain_matrix(channels_, file_h_gpu_.gpu_data<M>(), h, row_sum, stream);
  }
  M* prob = prob_gpu_.mutable_gpu_data<M>();
  gpu::softmax_forward(outer_, channels_, inner_, bottom[0]->gpu_data<Ftype>(), prob, stream);
  double fixed = 1;  // the normalizer, or -1: the valid count, known on the device only
  switch (normalization_) {
    case LossParameter::FULL: fixed = static_cast<double>(positions); break;
    case LossParameter::VALID: fixed = has_ignore_label_ ? -1.0 : static_cast<double>(positions); break;
    case LossParameter::BATCH_SIZE: fixed = outer_; break;
    case LossParameter::NONE: fixed = 1; break;
  }
  gpu::infogain_loss_forward(outer_, channels_, inner_, prob, bottom[1]->gpu_data<float>(), has_ignore_label_,
                             ignore_label_, h, fixed, partial_gpu_.mutable_gpu_data<M>(),
                             valid_gpu_.mutable_gpu_data<double>(), top[0]->mutable_gpu_data<float>(),
                             norm_gpu_.mutable_gpu_data<double>(), static_cast<unsigned long long*>(error), stream);
  if (top.size() > 1) {
    gpu_convert(type_of<M>(), prob, type_of<Ftype>(), top[1]->mutable_gpu_data<Ftype>(), count, stream);
  }
}

template <typename Ftype, typename Btype>
void InfogainLossLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                   const BlobVec& bottom) {
  if (propagate_down.size() > 1 && propagate_down[1]) {
    this->field_error("propagate_down", "cannot back-propagate to the label bottom");
  }
  if (propagate_down.size() > 2 && propagate_down[2]) {
    this->field_error("propagate_down", "cannot back-propagate to the infogain matrix bottom");
  }
  CheckGpuLabelError();
  if (!propagate_down[0]) return;
  CORTADO_CHECK_EQ(prob_gpu_.count(), bottom[0]->count()) << "InfogainLoss backward before a GPU forward";
  gpu::infogain_loss_backward(outer_, channels_, inner_, prob_gpu_.gpu_data<M>(), bottom[1]->gpu_data<float>(),
                              has_ignore_label_, ignore_label_, h_gpu_.gpu_data<M>(), row_sum_gpu_.gpu_data<M>(),
                              top[0]->gpu_diff<double>(), norm_gpu_.gpu_data<double>(),
                              bottom[0]->mutable_gpu_diff<Btype>(), this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(InfogainLossLayer);

}  // namespace cortado
