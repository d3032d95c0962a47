#include "cortado/layers/softmax_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void SoftmaxLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const int axis = this->layer_param().softmax_param().axis();
  const int n = bottom[0]->num_axes();
  if (axis < -n || axis >= n) {
    this->field_error("softmax_param.axis", "must be in [", -n, ", ", n, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", axis);
  }
  axis_ = bottom[0]->CanonicalAxisIndex(axis);
}

template <typename Ftype, typename Btype>
void SoftmaxLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  top[0]->ReshapeLike(*bottom[0]);
  outer_ = static_cast<int>(bottom[0]->count(0, axis_));
  channels_ = bottom[0]->shape(axis_);
  inner_ = static_cast<int>(bottom[0]->count(axis_ + 1));
  scratch_.resize(channels_);
}

template <typename Ftype, typename Btype>
void SoftmaxLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if (channels_ == 0) return;
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const int64_t dim = static_cast<int64_t>(channels_) * inner_;
  for (int o = 0; o < outer_; ++o) {
    for (int i = 0; i < inner_; ++i) {
      softmax_column(x + o * dim + i, channels_, inner_, scratch_.data(), y + o * dim + i);
    }
  }
}

template <typename Ftype, typename Btype>
void SoftmaxLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                              const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using M = math_t<Btype>;
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const Btype* y = top[0]->cpu_data<Btype>();
  const int64_t dim = static_cast<int64_t>(channels_) * inner_;
  for (int o = 0; o < outer_; ++o) {
    for (int i = 0; i < inner_; ++i) {
      const int64_t base = o * dim + i;
      M dot = 0;
      for (int c = 0; c < channels_; ++c) {
        dot += static_cast<M>(dy[base + c * inner_]) * static_cast<M>(y[base + c * inner_]);
      }
      for (int c = 0; c < channels_; ++c) {
        const int64_t k = base + c * inner_;
        dx[k] = static_cast<Btype>(static_cast<M>(y[k]) * (static_cast<M>(dy[k]) - dot));
      }
    }
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void SoftmaxLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (channels_ == 0) return;
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  gpu::softmax_forward(outer_, channels_, inner_, x, y, this->context().stream());
}

template <typename Ftype, typename Btype>
void SoftmaxLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                              const BlobVec& bottom) {
  if (!propagate_down[0] || channels_ == 0) return;
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const Btype* y = top[0]->gpu_data<Btype>();
  gpu::softmax_backward(outer_, channels_, inner_, y, dy, dx, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(SoftmaxLayer);

}  // namespace cortado
