#include "cortado/layers/dropout_layer.hpp"

#include <algorithm>
#include <cstring>

#include "cortado/util/rng.hpp"
#include "cortado/util/gpu_math.hpp"

namespace cortado {

namespace {
// The host pass of either direction: out = in * scale where the mask keeps,
// 0 where it drops (in math_t<T>); out = in when not training (mask null).
template <typename T>
void apply_mask(const unsigned* mask, double scale, int64_t n, const T* in, T* out) {
  if (!mask) {
    if (out != in) std::copy(in, in + n, out);
    return;
  }
  using M = math_t<T>;
  const M s = static_cast<M>(scale);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(mask[i] ? static_cast<M>(in[i]) * s : M(0));
}
}  // namespace

template <typename Ftype, typename Btype>
void DropoutLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const float p = this->layer_param().dropout_param().dropout_ratio();
  if (!(p >= 0.f && p < 1.f)) this->field_error("dropout_param.dropout_ratio", "must be in [0, 1), got ", p);
  ratio_ = p;
  scale_ = 1.0 / (1.0 - ratio_);
  const int64_t seed = this->layer_param().dropout_param().random_seed();
  if (seed >= 0) rng_ = std::make_unique<std::mt19937>(static_cast<std::mt19937::result_type>(seed));
}

template <typename Ftype, typename Btype>
void DropoutLayer<Ftype, Btype>::DrawMask(int64_t n) {
  if (!rng_) {
    rng_bernoulli(n, 1.0 - ratio_, mask_.data());
    return;
  }
  std::bernoulli_distribution keep(1.0 - ratio_);
  for (int64_t i = 0; i < n; ++i) mask_[i] = keep(*rng_) ? 1u : 0u;
}

template <typename Ftype, typename Btype>
void DropoutLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  top[0]->ReshapeLike(*bottom[0]);
  mask_.resize(bottom[0]->count());
}

template <typename Ftype, typename Btype>
void DropoutLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  if (train()) DrawMask(n);
  apply_mask(train() ? mask_.data() : nullptr, scale_, n, x, y);
}

template <typename Ftype, typename Btype>
void DropoutLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                              const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const Btype* dy = top[0]->cpu_diff<Btype>();
  apply_mask(train() ? mask_.data() : nullptr, scale_, static_cast<int64_t>(top[0]->count()), dy, dx);
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void DropoutLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  if (!train()) {
    gpu_copy(n, x, y, this->context().stream());
    return;
  }
  DrawMask(n);
  const size_t bytes = mask_.size() * sizeof(unsigned);
  if (!mask_gpu_ || mask_gpu_->size() != bytes) mask_gpu_ = std::make_unique<SyncedMemory>(bytes, /*pinned_host=*/true);
  if (bytes > 0) std::memcpy(mask_gpu_->mutable_cpu_data(), mask_.data(), bytes);
  const unsigned* mask = static_cast<const unsigned*>(mask_gpu_->gpu_data());
  gpu::dropout_forward(n, x, mask, scale_, y, this->context().stream());
}

template <typename Ftype, typename Btype>
void DropoutLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                              const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const int64_t n = static_cast<int64_t>(top[0]->count());
  if (!train()) {
    gpu_copy(n, dy, dx, this->context().stream());
    return;
  }
  CORTADO_CHECK(mask_gpu_ != nullptr) << "Dropout backward before a TRAIN forward";
  const unsigned* mask = static_cast<const unsigned*>(mask_gpu_->gpu_data());
  gpu::dropout_backward(n, dy, mask, scale_, dx, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(DropoutLayer);

}  // namespace cortado
