#include "cortado/layers/power_layer.hpp"

#include <cmath>

namespace cortado {

template <typename Ftype, typename Btype>
void PowerLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const PowerParameter& p = this->layer_param().power_param();
  if (!std::isfinite(p.power())) this->field_error("power_param.power", "must be finite, got ", p.power());
  if (!std::isfinite(p.scale())) this->field_error("power_param.scale", "must be finite, got ", p.scale());
  if (!std::isfinite(p.shift())) this->field_error("power_param.shift", "must be finite, got ", p.shift());
  power_ = p.power();
  scale_ = p.scale();
  shift_ = p.shift();
  // In place the backward would read y as x; it needs no x when power is 1
  // or power * scale is 0 (a scaling or a constant: those may run in place).
  if (top[0] == bottom[0] && power_ != 1 && power_ * scale_ != 0)
    this->field_error("top", "Power with power ", power_, " cannot run in place (its backward reads x); give the top "
                      "a name of its own");
}

template <typename Ftype, typename Btype>
void PowerLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const M power = static_cast<M>(power_), scale = static_cast<M>(scale_), shift = static_cast<M>(shift_);
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  // scale 0 gives the constant shift^power whatever x holds (Inf or NaN
  // included), as Caffe does.
  for (int64_t i = 0; i < n; ++i) {
    const M b = scale == M(0) ? shift : shift + scale * static_cast<M>(x[i]);
    y[i] = static_cast<Ftype>(power == M(1) ? b : std::pow(b, power));
  }
}

template <typename Ftype, typename Btype>
void PowerLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using M = math_t<Btype>;
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const Btype* x = bottom[0]->cpu_data<Btype>();
  const M power = static_cast<M>(power_), scale = static_cast<M>(scale_), shift = static_cast<M>(shift_);
  const M diff_scale = power * scale;
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  for (int64_t i = 0; i < n; ++i) {
    const M g = static_cast<M>(dy[i]);
    M d;
    if (diff_scale == M(0)) {
      d = M(0);
    } else if (power == M(1)) {
      d = diff_scale * g;
    } else {
      const M b = shift + scale * static_cast<M>(x[i]);
      d = diff_scale * (power == M(2) ? b : std::pow(b, power - M(1))) * g;
    }
    dx[i] = static_cast<Btype>(d);
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void PowerLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  gpu::power_forward(static_cast<int64_t>(bottom[0]->count()), x, y, power_, scale_, shift_,
                     this->context().stream());
}

template <typename Ftype, typename Btype>
void PowerLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const Btype* x = bottom[0]->gpu_data<Btype>();
  gpu::power_backward(static_cast<int64_t>(bottom[0]->count()), dy, x, dx, power_, scale_, shift_,
                      this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(PowerLayer);

}  // namespace cortado
