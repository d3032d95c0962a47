#include "cortado/layers/reduction_layer.hpp"

#include <cmath>
#include <vector>

namespace cortado {

template <typename Ftype, typename Btype>
void ReductionLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ReductionParameter& p = this->layer_param().reduction_param();
  const int n = bottom[0]->num_axes();
  if (n == 0 ? p.axis() != 0 : (p.axis() < -n || p.axis() >= n)) {
    this->field_error("reduction_param.axis", "must be in [", -n, ", ", n, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", p.axis());
  }
  axis_ = n == 0 ? 0 : bottom[0]->CanonicalAxisIndex(p.axis());
  op_ = static_cast<int>(p.operation());
}

template <typename Ftype, typename Btype>
void ReductionLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0] == top[0]) this->field_error("top", "Reduction cannot be computed in place");
  const std::vector<int>& s = bottom[0]->shape();
  top[0]->Reshape(std::vector<int>(s.begin(), s.begin() + axis_));
  num_ = static_cast<int64_t>(bottom[0]->count(0, axis_));
  dim_ = static_cast<int64_t>(bottom[0]->count(axis_));
  coeff_ = this->layer_param().reduction_param().coeff();
  if (op_ == ReductionParameter::MEAN && dim_ > 0) coeff_ /= static_cast<double>(dim_);
}

template <typename Ftype, typename Btype>
void ReductionLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  for (int64_t n = 0; n < num_; ++n) {
    M sum = 0;
    for (int64_t d = 0; d < dim_; ++d) {
      const M v = static_cast<M>(x[n * dim_ + d]);
      sum += op_ == ReductionParameter::ASUM ? std::fabs(v) : op_ == ReductionParameter::SUMSQ ? v * v : v;
    }
    y[n] = static_cast<Ftype>(static_cast<M>(coeff_) * sum);
  }
}

template <typename Ftype, typename Btype>
void ReductionLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using M = math_t<Btype>;
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const Btype* x = bottom[0]->cpu_data<Btype>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  for (int64_t n = 0; n < num_; ++n) {
    const M g = static_cast<M>(coeff_) * static_cast<M>(dy[n]);
    for (int64_t d = 0; d < dim_; ++d) {
      const int64_t k = n * dim_ + d;
      const M v = static_cast<M>(x[k]);
      M r = g;
      if (op_ == ReductionParameter::ASUM) r = v > M(0) ? g : v < M(0) ? -g : M(0);
      if (op_ == ReductionParameter::SUMSQ) r = M(2) * v * g;
      dx[k] = static_cast<Btype>(r);
    }
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void ReductionLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const int op = op_ == ReductionParameter::MEAN ? ReductionParameter::SUM : op_;
  gpu::reduction_forward(num_, dim_, op, coeff_, x, y, this->context().stream());
}

template <typename Ftype, typename Btype>
void ReductionLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const Btype* x = bottom[0]->gpu_data<Btype>();
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  const int op = op_ == ReductionParameter::MEAN ? ReductionParameter::SUM : op_;
  gpu::reduction_backward(num_, dim_, op, coeff_, x, dy, dx, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(ReductionLayer);

}  // namespace cortado
