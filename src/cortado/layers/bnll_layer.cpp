#include "cortado/layers/bnll_layer.hpp"

#include <algorithm>
#include <cmath>

namespace cortado {

namespace {
constexpr double kBnllThreshold = 50;
}

template <typename Ftype, typename Btype>
void BNLLLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  for (int64_t i = 0; i < n; ++i) {
    const M v = static_cast<M>(x[i]);
    y[i] = static_cast<Ftype>(v > M(0) ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)));
  }
}

template <typename Ftype, typename Btype>
void BNLLLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using M = math_t<Btype>;
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const Btype* x = bottom[0]->cpu_data<Btype>();
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  for (int64_t i = 0; i < n; ++i) {
    const M e = std::exp(std::min(static_cast<M>(x[i]), static_cast<M>(kBnllThreshold)));
    dx[i] = static_cast<Btype>(static_cast<M>(dy[i]) * e / (e + M(1)));
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void BNLLLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  gpu::bnll_forward(static_cast<int64_t>(bottom[0]->count()), x, y, this->context().stream());
}

template <typename Ftype, typename Btype>
void BNLLLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const Btype* x = bottom[0]->gpu_data<Btype>();
  gpu::bnll_backward(static_cast<int64_t>(bottom[0]->count()), dy, x, dx, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(BNLLLayer);

}  // namespace cortado
