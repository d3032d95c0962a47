#include "cortado/layers/clip_layer.hpp"

#include <algorithm>
#include <cmath>

namespace cortado {

template <typename Ftype, typename Btype>
void ClipLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ClipParameter& p = this->layer_param().clip_param();
  if (!p.has_min()) this->field_error("clip_param.min", "is required");
  if (!p.has_max()) this->field_error("clip_param.max", "is required");
  if (!std::isfinite(p.min())) this->field_error("clip_param.min", "must be finite, got ", p.min());
  if (!std::isfinite(p.max())) this->field_error("clip_param.max", "must be finite, got ", p.max());
  if (p.min() > p.max())
    this->field_error("clip_param.max", "= ", p.max(), " is below clip_param.min = ", p.min());
  min_ = p.min();
  max_ = p.max();
  auto as_clipped = [](double bound) {
    const Ftype y = static_cast<Ftype>(static_cast<math_t<Ftype>>(bound));
    return static_cast<double>(static_cast<math_t<Btype>>(static_cast<Btype>(static_cast<math_t<Ftype>>(y))));
  };
  bwd_lo_ = as_clipped(min_);
  bwd_hi_ = as_clipped(max_);
}

template <typename Ftype, typename Btype>
void ClipLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const M lo = static_cast<M>(min_), hi = static_cast<M>(max_);
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<Ftype>(std::min(std::max(static_cast<M>(x[i]), lo), hi));
}

template <typename Ftype, typename Btype>
void ClipLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using M = math_t<Btype>;
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const Btype* y = top[0]->cpu_data<Btype>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const M lo = static_cast<M>(bwd_lo_), hi = static_cast<M>(bwd_hi_);
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  for (int64_t i = 0; i < n; ++i) {
    const M v = static_cast<M>(y[i]);
    dx[i] = lo < v && v < hi ? dy[i] : Btype(0.f);
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void ClipLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  gpu::clip_forward(static_cast<int64_t>(bottom[0]->count()), x, y, min_, max_, this->context().stream());
}

template <typename Ftype, typename Btype>
void ClipLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const Btype* y = top[0]->gpu_data<Btype>();
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  gpu::clip_backward(static_cast<int64_t>(bottom[0]->count()), dy, y, dx, bwd_lo_, bwd_hi_,
                     this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(ClipLayer);

}  // namespace cortado
