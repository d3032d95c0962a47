#include "cortado/layers/prelu_layer.hpp"

#include <cmath>

#include "cortado/layers/filler.hpp"
#include "cortado/util/gpu_math.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void PReLULayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const PReLUParameter& p = this->layer_param().prelu_param();
  if (bottom[0]->num_axes() < 2) {
    this->field_error("bottom", "PReLU needs a bottom with at least 2 axes, got ", bottom[0]->num_axes());
  }
  FillerParameter filler;
  if (p.has_filler()) {
    filler = p.filler();
  } else {
    filler.set_type("constant");
    filler.set_value(0.25f);
  }
  ValidateFiller(filler, "prelu_param.filler");
  channel_shared_ = p.channel_shared();
  channels_ = bottom[0]->shape(1);
  const size_t want = channel_shared_ ? 1 : static_cast<size_t>(channels_);
  if (!this->blobs_.empty()) {
    if (this->blobs_.size() != 1 || this->blobs_[0]->count() != want) {
      this->field_error("prelu_param.channel_shared", "the given slopes hold ",
                        this->blobs_.empty() ? 0 : this->blobs_[0]->count(), " values, expected ", want);
    }
  } else {
    this->blobs_.push_back(this->make_param(channel_shared_ ? std::vector<int>{} : std::vector<int>{channels_}));
    Fill(filler, this->blobs_[0].get(), "prelu_param.filler");
  }
  this->param_propagate_down_.assign(1, true);
}

template <typename Ftype, typename Btype>
void PReLULayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->num_axes() < 2 || bottom[0]->shape(1) != channels_) {
    this->field_error("bottom", "PReLU bottom must keep ", channels_, " channels on axis 1");
  }
  if (bottom[0] != top[0]) {
    top[0]->ReshapeLike(*bottom[0]);
  } else {
    if (!bottom_memory_) bottom_memory_ = std::make_unique<Blob>(type_of<Ftype>());
    bottom_memory_->ReshapeLike(*bottom[0]);
  }
}

template <typename Ftype, typename Btype>
void PReLULayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  const int64_t dim = static_cast<int64_t>(bottom[0]->count(2));
  const int div = channel_shared_ ? channels_ : 1;
  if (bottom[0] == top[0]) {
    const Ftype* src = bottom[0]->cpu_data<Ftype>();
    Ftype* keep = bottom_memory_->mutable_cpu_data<Ftype>();
    for (int64_t i = 0; i < n; ++i) keep[i] = src[i];
  }
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const Ftype* a = this->blobs_[0]->template cpu_data<Ftype>();
  for (int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>((i / dim) % channels_) / div;
    const M v = static_cast<M>(x[i]);
    y[i] = static_cast<Ftype>(v > M(0) ? v : static_cast<M>(a[c]) * v);
  }
}

template <typename Ftype, typename Btype>
void PReLULayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  using M = math_t<Btype>;
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  const int64_t dim = static_cast<int64_t>(bottom[0]->count(2));
  const int div = channel_shared_ ? channels_ : 1;
  const bool in_place = bottom[0] == top[0];
  // x: the saved copy when in place (the top has overwritten it).
  const Btype* x = in_place ? bottom_memory_->cpu_data<Btype>() : bottom[0]->cpu_data<Btype>();
  if (this->param_propagate_down(0)) {
    const Btype* dy = top[0]->cpu_diff<Btype>();
    const int num_slopes = channel_shared_ ? 1 : channels_;
    std::vector<M> sums(num_slopes, M(0));
    for (int64_t i = 0; i < n; ++i) {
      const M v = static_cast<M>(x[i]);
      if (v <= M(0)) sums[static_cast<int>((i / dim) % channels_) / div] += static_cast<M>(dy[i]) * v;
    }
    Btype* da = this->blobs_[0]->template mutable_cpu_diff<Btype>();
    for (int c = 0; c < num_slopes; ++c) da[c] = static_cast<Btype>(static_cast<M>(da[c]) + sums[c]);
  }
  if (propagate_down[0]) {
    Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
    const Btype* dy = top[0]->cpu_diff<Btype>();
    const Btype* a = this->blobs_[0]->template cpu_data<Btype>();
    for (int64_t i = 0; i < n; ++i) {
      const int c = static_cast<int>((i / dim) % channels_) / div;
      const M g = static_cast<M>(dy[i]);
      dx[i] = static_cast<Btype>(static_cast<M>(x[i]) > M(0) ? g : static_cast<M>(a[c]) * g);
    }
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void PReLULayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  const int64_t dim = static_cast<int64_t>(bottom[0]->count(2));
  const int div = channel_shared_ ? channels_ : 1;
  if (bottom[0] == top[0] && n > 0) {
    const Ftype* src = bottom[0]->gpu_data<Ftype>();
    Ftype* keep = bottom_memory_->mutable_gpu_data<Ftype>();
    gpu_copy(n, src, keep, this->context().stream());
  }
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  const Ftype* a = this->blobs_[0]->template gpu_data<Ftype>();
  gpu::prelu_forward(n, channels_, dim, div, x, a, y, this->context().stream());
}

template <typename Ftype, typename Btype>
void PReLULayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  const int64_t dim = static_cast<int64_t>(bottom[0]->count(2));
  const int div = channel_shared_ ? channels_ : 1;
  const bool in_place = bottom[0] == top[0];
  const Btype* x = in_place ? bottom_memory_->gpu_data<Btype>() : bottom[0]->gpu_data<Btype>();
  if (this->param_propagate_down(0)) {
    const Btype* dy = top[0]->gpu_diff<Btype>();
    Btype* da = this->blobs_[0]->template mutable_gpu_diff<Btype>();
    gpu::prelu_param_backward(n, channels_, dim, channel_shared_ ? 1 : channels_, dy, x, da,
                              this->context().stream());
  }
  if (propagate_down[0]) {
    Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
    const Btype* dy = top[0]->gpu_diff<Btype>();
    const Btype* a = this->blobs_[0]->template gpu_data<Btype>();
    gpu::prelu_backward(n, channels_, dim, div, dy, x, a, dx, this->context().stream());
  }
}
#endif

CORTADO_INSTANTIATE_LAYER(PReLULayer);

}  // namespace cortado
