#include "cortado/layers/absval_layer.hpp"

#include <cmath>

namespace cortado {

template <typename Ftype, typename Btype>
void AbsValLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<Ftype>(std::fabs(static_cast<M>(x[i])));
}

template <typename Ftype, typename Btype>
void AbsValLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using M = math_t<Btype>;
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const Btype* x = bottom[0]->cpu_data<Btype>();
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  for (int64_t i = 0; i < n; ++i) {
    const M v = static_cast<M>(x[i]);
    const M s = v > M(0) ? M(1) : (v < M(0) ? M(-1) : M(0));
    dx[i] = static_cast<Btype>(s * static_cast<M>(dy[i]));
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void AbsValLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  gpu::absval_forward(static_cast<int64_t>(bottom[0]->count()), x, y, this->context().stream());
}

template <typename Ftype, typename Btype>
void AbsValLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const Btype* x = bottom[0]->gpu_data<Btype>();
  gpu::absval_backward(static_cast<int64_t>(bottom[0]->count()), dy, x, dx, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(AbsValLayer);

}  // namespace cortado
