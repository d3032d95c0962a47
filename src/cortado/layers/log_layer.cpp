#include "cortado/layers/log_layer.hpp"

#include <cmath>

namespace cortado {

template <typename Ftype, typename Btype>
void LogLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const LogParameter& p = this->layer_param().log_param();
  const double base = p.base();
  if (!(base == -1.0 || (base > 0 && base != 1 && std::isfinite(base)))) {
    this->field_error("log_param.base", "must be -1 (for e) or a finite positive number other than 1, got ", base);
  }
  if (!std::isfinite(p.scale())) this->field_error("log_param.scale", "must be finite, got ", p.scale());
  if (!std::isfinite(p.shift())) this->field_error("log_param.shift", "must be finite, got ", p.shift());
  if (top[0] == bottom[0]) this->field_error("top", "Log cannot run in place (its backward reads x)");
  base_scale_ = base == -1.0 ? 1.0 : 1.0 / std::log(base);
  scale_ = p.scale();
  shift_ = p.shift();
}

template <typename Ftype, typename Btype>
void LogLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const M bs = static_cast<M>(base_scale_), scale = static_cast<M>(scale_), shift = static_cast<M>(shift_);
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<Ftype>(std::log(shift + scale * static_cast<M>(x[i])) * bs);
}

template <typename Ftype, typename Btype>
void LogLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using M = math_t<Btype>;
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const Btype* x = bottom[0]->cpu_data<Btype>();
  const M bs = static_cast<M>(base_scale_), scale = static_cast<M>(scale_), shift = static_cast<M>(shift_);
  const M c = scale * bs;
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  for (int64_t i = 0; i < n; ++i) {
    dx[i] = static_cast<Btype>(static_cast<M>(dy[i]) * c / (shift + scale * static_cast<M>(x[i])));
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void LogLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  gpu::log_forward(static_cast<int64_t>(bottom[0]->count()), x, y, base_scale_, scale_, shift_,
                   this->context().stream());
}

template <typename Ftype, typename Btype>
void LogLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const Btype* x = bottom[0]->gpu_data<Btype>();
  gpu::log_backward(static_cast<int64_t>(bottom[0]->count()), dy, x, dx, base_scale_, scale_, shift_,
                    this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(LogLayer);

}  // namespace cortado
