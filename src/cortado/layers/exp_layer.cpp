#include "cortado/layers/exp_layer.hpp"

#include <cmath>

namespace cortado {

template <typename Ftype, typename Btype>
void ExpLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ExpParameter& p = this->layer_param().exp_param();
  const double base = p.base();
  if (!(base == -1.0 || (base > 0 && std::isfinite(base)))) {
    this->field_error("exp_param.base", "must be -1 (for e) or a finite positive number, got ", base);
  }
  if (!std::isfinite(p.scale())) this->field_error("exp_param.scale", "must be finite, got ", p.scale());
  if (!std::isfinite(p.shift())) this->field_error("exp_param.shift", "must be finite, got ", p.shift());
  const double log_base = base == -1.0 ? 1.0 : std::log(base);
  inner_scale_ = log_base * p.scale();
  outer_scale_ = p.shift() == 0 ? 1.0 : (base == -1.0 ? std::exp(double(p.shift())) : std::pow(base, double(p.shift())));
}

template <typename Ftype, typename Btype>
void ExpLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const M inner = static_cast<M>(inner_scale_), outer = static_cast<M>(outer_scale_);
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<Ftype>(outer * std::exp(inner * static_cast<M>(x[i])));
}

template <typename Ftype, typename Btype>
void ExpLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using M = math_t<Btype>;
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const Btype* y = top[0]->cpu_data<Btype>();
  const M inner = static_cast<M>(inner_scale_);
  const int64_t n = static_cast<int64_t>(top[0]->count());
  for (int64_t i = 0; i < n; ++i) dx[i] = static_cast<Btype>(static_cast<M>(dy[i]) * inner * static_cast<M>(y[i]));
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void ExpLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  gpu::exp_forward(static_cast<int64_t>(bottom[0]->count()), x, y, inner_scale_, outer_scale_,
                   this->context().stream());
}

template <typename Ftype, typename Btype>
void ExpLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const Btype* y = top[0]->gpu_data<Btype>();
  gpu::exp_backward(static_cast<int64_t>(top[0]->count()), dy, y, dx, inner_scale_, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(ExpLayer);

}  // namespace cortado
