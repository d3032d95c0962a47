#include "cortado/layers/infogain_loss_layer.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <fstream>

#include "cortado/io/blob_io.hpp"
#include "cortado/io/proto_io.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void InfogainLossLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  SoftmaxLossBase<Ftype, Btype>::LayerSetUp(bottom, top);
  const LayerParameter& p = this->layer_param();
  this->SetUpSoftmax(bottom, p.infogain_loss_param().axis(), "infogain_loss_param.axis");
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
}

template <typename Ftype, typename Btype>
void InfogainLossLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  this->ReshapeSoftmax(bottom, top, str_cat(" with axis ", this->axis_));
  const int channels = this->channels_;
  const size_t kk = static_cast<size_t>(channels) * channels;
  if (bottom.size() > 2) {
    if (bottom[2]->count() != kk) {
      this->field_error("bottom[2]", "the infogain matrix holds ", bottom[2]->count(), " values (shape ",
                        bottom[2]->shape_string(), "), expected ", channels, " x ", channels);
    }
  } else if (file_h_.size() != kk) {
    this->field_error("infogain_loss_param.source", "'", this->layer_param().infogain_loss_param().source(),
                      "' holds ", file_h_.size(), " values, expected ", channels, " x ", channels);
  }
  h_.resize(kk);
  row_sum_.resize(channels);
}

template <typename Ftype, typename Btype>
const typename InfogainLossLayer<Ftype, Btype>::M* InfogainLossLayer<Ftype, Btype>::Matrix(const BlobVec& bottom) {
  if (bottom.size() > 2) {
    const float* h = bottom[2]->cpu_data<float>();
    for (size_t k = 0; k < h_.size(); ++k) h_[k] = static_cast<M>(h[k]);
  } else {
    h_ = file_h_;
  }
  const int channels = this->channels_;
  for (int r = 0; r < channels; ++r) {
    M s = 0;
    for (int c = 0; c < channels; ++c) s += h_[static_cast<size_t>(r) * channels + c];
    row_sum_[r] = s;
  }
  return h_.data();
}

template <typename Ftype, typename Btype>
void InfogainLossLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const M* h = Matrix(bottom);
  this->Probabilities_cpu(bottom, top);
  const int channels = this->channels_, inner = this->inner_;
  M loss = 0;
  int64_t valid = 0;
  this->ForEachPosition(bottom[1]->cpu_data<float>(), [&](int64_t base, int64_t, int l) {
    if (l < 0) return;
    for (int c = 0; c < channels; ++c) {
      const M pc = std::max(this->prob_[base + static_cast<int64_t>(c) * inner], static_cast<M>(FLT_MIN));
      loss -= h[static_cast<int64_t>(l) * channels + c] * std::log(pc);
    }
    ++valid;
  });
  this->normalizer_ = this->Normalizer(static_cast<double>(this->outer_) * inner, static_cast<double>(valid),
                                       this->outer_);
  top[0]->mutable_cpu_data<float>()[0] = static_cast<float>(loss / static_cast<M>(this->normalizer_));
}

template <typename Ftype, typename Btype>
void InfogainLossLayer<Ftype, Btype>::CheckPropagateDown(const std::vector<bool>& propagate_down) const {
  this->NoGradientTo(propagate_down, 1, "label");
  this->NoGradientTo(propagate_down, 2, "infogain matrix");
}

template <typename Ftype, typename Btype>
void InfogainLossLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                   const BlobVec& bottom) {
  CheckPropagateDown(propagate_down);
  if (!propagate_down[0]) return;
  using MB = math_t<Btype>;
  const MB scale = static_cast<MB>(this->LossWeight(top) / this->normalizer_);
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const int channels = this->channels_, inner = this->inner_;
  this->ForEachPosition(bottom[1]->cpu_data<float>(), [&](int64_t base, int64_t, int l) {
    for (int c = 0; c < channels; ++c) {
      const int64_t k = base + static_cast<int64_t>(c) * inner;
      MB g = 0;
      if (l >= 0) g = static_cast<MB>(this->prob_[k] * row_sum_[l] - h_[static_cast<int64_t>(l) * channels + c]) * scale;
      dx[k] = static_cast<Btype>(g);
    }
  });
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void InfogainLossLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  this->CheckGpuLabelError();
  cudaStream_t stream = this->context().stream();
  const int channels = this->channels_;
  const int64_t positions = static_cast<int64_t>(this->outer_) * this->inner_;
  M* h = this->Sized(&h_gpu_, static_cast<int64_t>(channels) * channels)->template mutable_gpu_data<M>();
  M* row_sum = this->Sized(&row_sum_gpu_, channels)->template mutable_gpu_data<M>();
  if (bottom.size() > 2) {
    gpu::infogain_matrix(channels, bottom[2]->gpu_data<float>(), h, row_sum, stream);
  } else {
    gpu::infogain_matrix(channels, file_h_gpu_.gpu_data<M>(), h, row_sum, stream);
  }
  const M* prob = this->Probabilities_gpu(bottom, top);
  gpu::infogain_loss_forward(this->outer_, channels, this->inner_, prob, bottom[1]->gpu_data<float>(),
                             this->has_ignore_label_, this->ignore_label_, h,
                             this->FixedNormalizer(static_cast<double>(positions), this->outer_),
                             this->loss_partials(positions), this->valid_partials(positions),
                             top[0]->mutable_gpu_data<float>(),
                             this->Sized(&this->norm_gpu_, 1)->template mutable_gpu_data<double>(),
                             this->gpu_label_error(), stream);
}

template <typename Ftype, typename Btype>
void InfogainLossLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                   const BlobVec& bottom) {
  CheckPropagateDown(propagate_down);
  this->CheckGpuLabelError();
  if (!propagate_down[0]) return;
  CORTADO_CHECK_EQ(this->prob_gpu_.count(), bottom[0]->count()) << "InfogainLoss backward before a GPU forward";
  gpu::infogain_loss_backward(this->outer_, this->channels_, this->inner_, this->prob_gpu_.template gpu_data<M>(),
                              bottom[1]->gpu_data<float>(), this->has_ignore_label_, this->ignore_label_,
                              h_gpu_.gpu_data<M>(), row_sum_gpu_.gpu_data<M>(), top[0]->gpu_diff<double>(),
                              this->norm_gpu_.template gpu_data<double>(), bottom[0]->mutable_gpu_diff<Btype>(),
                              this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(InfogainLossLayer);

}  // namespace cortado
