#include "cortado/layers/embed_layer.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <vector>

#include "cortado/layers/param_blobs.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void EmbedLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const EmbedParameter& p = this->layer_param().embed_param();
  if (!p.has_num_output() || p.num_output() == 0 || p.num_output() > static_cast<uint32_t>(INT_MAX)) {
    this->field_error("embed_param.num_output", "must be set and in 1..", INT_MAX, ", got ", p.num_output());
  }
  if (!p.has_input_dim() || p.input_dim() == 0 || p.input_dim() > static_cast<uint32_t>(INT_MAX)) {
    this->field_error("embed_param.input_dim", "must be set and in 1..", INT_MAX, ", got ", p.input_dim());
  }
  CheckFiller(*this, p.weight_filler(), "embed_param.weight_filler");
  if (p.bias_term()) CheckFiller(*this, p.bias_filler(), "embed_param.bias_filler");
  num_output_ = static_cast<int>(p.num_output());
  input_dim_ = static_cast<int>(p.input_dim());
  bias_term_ = p.bias_term();
  SetUpWeightAndBias(*this, &this->blobs_, {input_dim_, num_output_}, " (input_dim, num_output)", bias_term_,
                     {num_output_}, p.weight_filler(), p.bias_filler(), "embed_param",
                     [this](const std::vector<int>& shape) { return this->make_param(shape); });
  this->param_propagate_down_.assign(this->blobs_.size(), true);
}

template <typename Ftype, typename Btype>
void EmbedLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0] == top[0]) this->field_error("top", "Embed cannot be computed in place");
  std::vector<int> shape = bottom[0]->shape();
  shape.push_back(num_output_);
  top[0]->Reshape(shape);
  m_ = static_cast<int64_t>(bottom[0]->count());
}

template <typename Ftype, typename Btype>
void EmbedLayer<Ftype, Btype>::CheckIndex(float v, int64_t m) const {
  if (!(v >= 0.f) || static_cast<float>(static_cast<int64_t>(v)) != v || v >= static_cast<float>(input_dim_)) {
    this->field_error("bottom[0]", "value ", v, " at position ", m,
                      " is not an index: expected an integer in [0, ", input_dim_, ") (embed_param.input_dim)");
  }
}

template <typename Ftype, typename Btype>
void EmbedLayer<Ftype, Btype>::CheckIndexes(const float* idx) const {
  for (int64_t m = 0; m < m_; ++m) CheckIndex(idx[m], m);
}

template <typename Ftype, typename Btype>
void EmbedLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  const float* idx = bottom[0]->cpu_data<float>();
  CheckIndexes(idx);
  const Ftype* w = this->blobs_[0]->template cpu_data<Ftype>();
  const Ftype* b = bias_term_ ? this->blobs_[1]->template cpu_data<Ftype>() : nullptr;
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const int64_t n = num_output_;
  for (int64_t m = 0; m < m_; ++m) {
    const Ftype* row = w + static_cast<int64_t>(idx[m]) * n;
    for (int64_t d = 0; d < n; ++d) {
      y[m * n + d] = b ? static_cast<Ftype>(static_cast<M>(row[d]) + static_cast<M>(b[d])) : row[d];
    }
  }
}

template <typename Ftype, typename Btype>
void EmbedLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  using M = math_t<Btype>;
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const int64_t n = num_output_;
  if (this->param_propagate_down(0)) {
    const float* idx = bottom[0]->cpu_data<float>();
    std::map<int64_t, std::vector<int64_t>> rows;  // index -> positions, ascending
    for (int64_t m = 0; m < m_; ++m) rows[static_cast<int64_t>(idx[m])].push_back(m);
    Btype* dw = this->blobs_[0]->template mutable_cpu_diff<Btype>();
    std::vector<M> acc(n);
    for (const auto& [r, positions] : rows) {
      std::fill(acc.begin(), acc.end(), M(0));
      for (int64_t m : positions) {
        for (int64_t d = 0; d < n; ++d) acc[d] += static_cast<M>(dy[m * n + d]);
      }
      for (int64_t d = 0; d < n; ++d) dw[r * n + d] = static_cast<Btype>(static_cast<M>(dw[r * n + d]) + acc[d]);
    }
  }
  if (bias_term_ && this->param_propagate_down(1)) {
    Btype* db = this->blobs_[1]->template mutable_cpu_diff<Btype>();
    for (int64_t d = 0; d < n; ++d) {
      M sum = 0;
      for (int64_t m = 0; m < m_; ++m) sum += static_cast<M>(dy[m * n + d]);
      db[d] = static_cast<Btype>(static_cast<M>(db[d]) + sum);
    }
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void EmbedLayer<Ftype, Btype>::CheckGpuIndexError() {
  index_error_.Rethrow([this](float v, int64_t p) { CheckIndex(v, p); });
}

// The indexes stay on the device: the kernel checks them, and a bad one it
// met is thrown here on a later call (see the header).
template <typename Ftype, typename Btype>
void EmbedLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  CheckGpuIndexError();
  auto* error = static_cast<unsigned long long*>(index_error_.device_word());
  const float* idx = bottom[0]->gpu_data<float>();
  const Ftype* w = this->blobs_[0]->template gpu_data<Ftype>();
  const Ftype* b = bias_term_ ? this->blobs_[1]->template gpu_data<Ftype>() : nullptr;
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  gpu::embed_forward(top[0]->count(), num_output_, input_dim_, idx, w, b, y, error, this->context().stream());
}

template <typename Ftype, typename Btype>
void EmbedLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  // A bad index the forward recorded is reported before any gradient is
  // touched; one the host has not seen yet is skipped by the kernel.
  CheckGpuIndexError();
  const Btype* dy = top[0]->gpu_diff<Btype>();
  if (this->param_propagate_down(0)) {
    auto* error = static_cast<unsigned long long*>(index_error_.device_word());
    gpu::embed_backward_weight(m_, num_output_, input_dim_, bottom[0]->gpu_data<float>(), dy,
                               this->blobs_[0]->template mutable_gpu_diff<Btype>(), error,
                               this->context().stream());
  }
  if (bias_term_ && this->param_propagate_down(1)) {
    gpu::embed_backward_bias(m_, num_output_, dy, this->blobs_[1]->template mutable_gpu_diff<Btype>(),
                             this->context().stream());
  }
}
#endif

CORTADO_INSTANTIATE_LAYER(EmbedLayer);

}  // namespace cortado
