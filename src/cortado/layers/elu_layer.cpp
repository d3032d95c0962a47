#include "cortado/layers/elu_layer.hpp"

#include <cmath>

namespace cortado {

template <typename Ftype, typename Btype>
void ELULayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const float alpha = this->layer_param().elu_param().alpha();
  if (!std::isfinite(alpha)) this->field_error("elu_param.alpha", "must be finite, got ", alpha);
  alpha_ = alpha;
  const float lambda = this->layer_param().elu_param().lambda();
  if (!(std::isfinite(lambda) && lambda > 0.f))
    this->field_error("elu_param.lambda", "must be positive and finite, got ", lambda);
  lambda_ = lambda;
}

template <typename Ftype, typename Btype>
void ELULayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const M alpha = static_cast<M>(alpha_), lambda = static_cast<M>(lambda_);
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  for (int64_t i = 0; i < n; ++i) {
    const M v = static_cast<M>(x[i]);
    y[i] = static_cast<Ftype>(lambda * (v > M(0) ? v : alpha * std::expm1(v)));
  }
}

template <typename Ftype, typename Btype>
void ELULayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using M = math_t<Btype>;
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const Btype* x = bottom[0]->cpu_data<Btype>();
  const Btype* y = top[0]->cpu_data<Btype>();
  const M lambda = static_cast<M>(lambda_), lambda_alpha = static_cast<M>(lambda_ * alpha_);
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  for (int64_t i = 0; i < n; ++i) {
    const M g = static_cast<M>(dy[i]);
    dx[i] = static_cast<Btype>(static_cast<M>(x[i]) > M(0) ? g * lambda : g * (static_cast<M>(y[i]) + lambda_alpha));
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void ELULayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  gpu::elu_forward(static_cast<int64_t>(bottom[0]->count()), x, y, alpha_, lambda_, this->context().stream());
}

template <typename Ftype, typename Btype>
void ELULayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const Btype* x = bottom[0]->gpu_data<Btype>();
  const Btype* y = top[0]->gpu_data<Btype>();
  gpu::elu_backward(static_cast<int64_t>(bottom[0]->count()), dy, x, y, dx, alpha_, lambda_,
                    this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(ELULayer);

}  // namespace cortado
