#include "cortado/layers/relu_layer.hpp"

#include <cmath>

#include "cortado/util/cpu_parallel.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void ReLULayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const float slope = this->layer_param().relu_param().negative_slope();
  if (!std::isfinite(slope)) this->field_error("relu_param.negative_slope", "must be finite, got ", slope);
  negative_slope_ = slope;
}

template <typename Ftype, typename Btype>
void ReLULayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  top[0]->ReshapeLike(*bottom[0]);
}

// The top pointer is taken first: in place, mutable_cpu_data makes Ftype the
// current type and cpu_data then returns that same buffer.
template <typename Ftype, typename Btype>
void ReLULayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const M slope = static_cast<M>(negative_slope_);
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  cpu_parallel_range(n, int64_t{1} << 16, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const M v = static_cast<M>(x[i]);
      y[i] = static_cast<Ftype>(v > M(0) ? v : slope * v);
    }
  });
}

template <typename Ftype, typename Btype>
void ReLULayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using M = math_t<Btype>;
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const Btype* x = bottom[0]->cpu_data<Btype>();
  const M slope = static_cast<M>(negative_slope_);
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  cpu_parallel_range(n, int64_t{1} << 16, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const M g = static_cast<M>(dy[i]);
      dx[i] = static_cast<Btype>(static_cast<M>(x[i]) > M(0) ? g : slope * g);
    }
  });
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void ReLULayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  gpu::relu_forward(static_cast<int64_t>(bottom[0]->count()), x, y, negative_slope_, this->context().stream());
}

template <typename Ftype, typename Btype>
void ReLULayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const Btype* x = bottom[0]->gpu_data<Btype>();
  gpu::relu_backward(static_cast<int64_t>(bottom[0]->count()), dy, x, dx, negative_slope_, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(ReLULayer);

}  // namespace cortado
