#include "cortado/layers/accuracy_layer.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cortado/util/cuda.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void AccuracyLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const AccuracyParameter& p = this->layer_param().accuracy_param();
  const int n = bottom[0]->num_axes();
  if (p.axis() < -n || p.axis() >= n) {
    this->field_error("accuracy_param.axis", "must be in [", -n, ", ", n, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", p.axis());
  }
  axis_ = bottom[0]->CanonicalAxisIndex(p.axis());
  if (p.top_k() < 1) this->field_error("accuracy_param.top_k", "must be at least 1, got ", p.top_k());
  top_k_ = static_cast<int>(std::min<uint32_t>(p.top_k(), 1u << 30));
  has_ignore_label_ = p.has_ignore_label();
  ignore_label_ = p.ignore_label();
}

template <typename Ftype, typename Btype>
void AccuracyLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  outer_ = static_cast<int>(bottom[0]->count(0, axis_));
  channels_ = bottom[0]->shape(axis_);
  inner_ = static_cast<int>(bottom[0]->count(axis_ + 1));
  if (top_k_ > channels_) {
    this->field_error("accuracy_param.top_k", "is ", top_k_, " but the prediction ", bottom[0]->shape_string(),
                      " has only ", channels_, " classes on axis ", axis_);
  }
  if (bottom[1]->count() != static_cast<size_t>(outer_) * inner_) {
    this->field_error("bottom[1]", "the label bottom holds ", bottom[1]->count(), " values (shape ",
                      bottom[1]->shape_string(), ") but the prediction ", bottom[0]->shape_string(),
                      " with axis ", axis_, " needs ", static_cast<int64_t>(outer_) * inner_);
  }
  top[0]->Reshape(std::vector<int>{});
  if (top.size() > 1) top[1]->Reshape(std::vector<int>{channels_});
}

template <typename Ftype, typename Btype>
void AccuracyLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const float* label = bottom[1]->cpu_data<float>();
  const int64_t dim = static_cast<int64_t>(channels_) * inner_;
  std::vector<int64_t> class_count(channels_, 0), class_correct(channels_, 0);
  int64_t count = 0, correct = 0;
  for (int o = 0; o < outer_; ++o) {
    for (int i = 0; i < inner_; ++i) {
      const int64_t pos = static_cast<int64_t>(o) * inner_ + i;
      const float v = label[pos];
      if (has_ignore_label_ && v == static_cast<float>(ignore_label_)) continue;
      const int l = this->ClassLabel(v, pos, channels_);
      const Ftype* col = x + o * dim + i;
      const M truth = static_cast<M>(col[static_cast<int64_t>(l) * inner_]);
      // Classes other than l scoring >= truth. Unlike Caffe (where a NaN
      // compares false and so counts as correct, and a net whose scores are
      // all NaN reports accuracy 1), a NaN score makes the prediction wrong:
      // a NaN truth loses, and a NaN rival counts as scoring higher.
      int better = truth != truth ? top_k_ : 0;
      for (int c = 0; c < channels_ && better < top_k_; ++c) {
        if (c != l && !(static_cast<M>(col[static_cast<int64_t>(c) * inner_]) < truth)) ++better;
      }
      ++count;
      ++class_count[l];
      if (better < top_k_) {
        ++correct;
        ++class_correct[l];
      }
    }
  }
  top[0]->mutable_cpu_data<float>()[0] = count > 0 ? static_cast<float>(static_cast<double>(correct) / count) : 0.f;
  if (top.size() > 1) {
    float* per_class = top[1]->mutable_cpu_data<float>();
    for (int c = 0; c < channels_; ++c) {
      per_class[c] = class_count[c] > 0 ? static_cast<float>(static_cast<double>(class_correct[c]) / class_count[c]) : 0.f;
    }
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void AccuracyLayer<Ftype, Btype>::CheckGpuLabelError() {
  label_error_.Rethrow([this](float v, int64_t p) { this->ClassLabel(v, p, channels_); });
}

template <typename Ftype, typename Btype>
void AccuracyLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  CheckGpuLabelError();
  void* error = label_error_.device_word();
  cudaStream_t stream = this->context().stream();
  const size_t bytes = (2 + 2 * static_cast<size_t>(channels_)) * sizeof(unsigned);
  if (!counts_gpu_ || counts_gpu_->size() != bytes) counts_gpu_ = std::make_unique<SyncedMemory>(bytes);
  unsigned* counts = static_cast<unsigned*>(counts_gpu_->mutable_gpu_data());
  CORTADO_CUDA_CHECK(cudaMemsetAsync(counts, 0, bytes, stream));
  gpu::accuracy_count(outer_, channels_, inner_, top_k_, bottom[0]->gpu_data<Ftype>(), bottom[1]->gpu_data<float>(),
                      has_ignore_label_, ignore_label_, counts, static_cast<unsigned long long*>(error), stream);
  gpu::accuracy_finish(channels_, counts, top[0]->mutable_gpu_data<float>(),
                       top.size() > 1 ? top[1]->mutable_gpu_data<float>() : nullptr, stream);
}
#endif

CORTADO_INSTANTIATE_LAYER(AccuracyLayer);

}  // namespace cortado
