#include "cortado/layers/swish_layer.hpp"

#include <cmath>

#include "cortado/util/cpu_parallel.hpp"

namespace cortado {

namespace {
/// Values per range of the CPU loops, as the elementwise family's.
constexpr int64_t kGrain = int64_t{1} << 16;
}  // namespace

template <typename Ftype, typename Btype>
void SwishLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const float beta = this->layer_param().swish_param().beta();
  if (!std::isfinite(beta)) this->field_error("swish_param.beta", "must be finite, got ", beta);
  beta_ = beta;
}

template <typename Ftype, typename Btype>
void SwishLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  top[0]->ReshapeLike(*bottom[0]);
  sigmoid_.ReshapeLike(*bottom[0]);
}

template <typename Ftype, typename Btype>
void SwishLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  Btype* s = sigmoid_.mutable_cpu_data<Btype>();
  const M beta = static_cast<M>(beta_);
  cpu_parallel_range(static_cast<int64_t>(bottom[0]->count()), kGrain, [x, y, s, beta](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const M v = static_cast<M>(x[i]);
      const M sv = M(1) / (M(1) + std::exp(-(beta * v)));  // exp overflows to Inf only to give s = 0
      s[i] = static_cast<Btype>(sv);
      y[i] = static_cast<Ftype>(v * sv);
    }
  });
}

template <typename Ftype, typename Btype>
void SwishLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using M = math_t<Btype>;
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const Btype* y = top[0]->cpu_data<Btype>();
  const Btype* s = sigmoid_.cpu_data<Btype>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const M beta = static_cast<M>(beta_);
  cpu_parallel_range(static_cast<int64_t>(top[0]->count()), kGrain, [dy, y, s, dx, beta](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const M by = beta * static_cast<M>(y[i]), sv = static_cast<M>(s[i]);
      dx[i] = static_cast<Btype>(static_cast<M>(dy[i]) * (by + sv * (M(1) - by)));
    }
  });
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void SwishLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  Btype* s = sigmoid_.mutable_gpu_data<Btype>();
  gpu::swish_forward(static_cast<int64_t>(bottom[0]->count()), x, y, s, beta_, this->context().stream());
}

template <typename Ftype, typename Btype>
void SwishLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const Btype* y = top[0]->gpu_data<Btype>();
  const Btype* s = sigmoid_.gpu_data<Btype>();
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  gpu::swish_backward(static_cast<int64_t>(top[0]->count()), dy, y, s, dx, beta_, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(SwishLayer);

}  // namespace cortado
