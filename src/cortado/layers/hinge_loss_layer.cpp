#include "cortado/layers/hinge_loss_layer.hpp"

#include <algorithm>
#include <cstdint>

namespace cortado {

template <typename Ftype, typename Btype>
void HingeLossLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  LossLayer<Ftype, Btype>::LayerSetUp(bottom, top);
  const auto norm = this->layer_param().hinge_loss_param().norm();
  if (norm != HingeLossParameter::L1 && norm != HingeLossParameter::L2) {
    this->field_error("hinge_loss_param.norm", "must be L1 or L2, got ", static_cast<int>(norm));
  }
  l2_ = norm == HingeLossParameter::L2;
}

template <typename Ftype, typename Btype>
void HingeLossLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  this->ReshapeSamples(bottom, top, &num_, &dim_);
  margin_.resize(bottom[0]->count());
}

template <typename Ftype, typename Btype>
void HingeLossLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const float* label = bottom[1]->cpu_data<float>();
  M loss = 0;
  for (int n = 0; n < num_; ++n) {
    const int l = this->Label(label[n], n);
    for (int d = 0; d < dim_; ++d) {
      const int64_t k = static_cast<int64_t>(n) * dim_ + d;
      const M s = d == l ? M(1) : M(-1);
      const M m = std::max(M(0), M(1) - s * static_cast<M>(x[k]));
      margin_[k] = m;
      loss += l2_ ? m * m : m;
    }
  }
  top[0]->mutable_cpu_data<float>()[0] = static_cast<float>(loss / static_cast<M>(std::max(1, num_)));
}

template <typename Ftype, typename Btype>
void HingeLossLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                const BlobVec& bottom) {
  this->NoGradientTo(propagate_down, 1, "label");
  if (!propagate_down[0]) return;
  using MB = math_t<Btype>;
  const MB scale = static_cast<MB>(this->LossWeight(top) / std::max(1, num_));
  const float* label = bottom[1]->cpu_data<float>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  for (int n = 0; n < num_; ++n) {
    const int l = this->Label(label[n], n);
    for (int d = 0; d < dim_; ++d) {
      const int64_t k = static_cast<int64_t>(n) * dim_ + d;
      const MB m = static_cast<MB>(margin_[k]);
      const MB g = l2_ ? MB(2) * m : (m > MB(0) ? MB(1) : MB(0));
      dx[k] = static_cast<Btype>((d == l ? -scale : scale) * g);
    }
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void HingeLossLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  this->CheckGpuLabelError();
  const int64_t count = static_cast<int64_t>(num_) * dim_;
  gpu::hinge_loss_forward(num_, dim_, bottom[0]->gpu_data<Ftype>(), bottom[1]->gpu_data<float>(), l2_,
                          this->Sized(&margin_gpu_, count)->template mutable_gpu_data<M>(),
                          this->loss_partials(count), top[0]->mutable_gpu_data<float>(), this->gpu_label_error(),
                          this->context().stream());
}

template <typename Ftype, typename Btype>
void HingeLossLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                const BlobVec& bottom) {
  this->NoGradientTo(propagate_down, 1, "label");
  this->CheckGpuLabelError();
  if (!propagate_down[0]) return;
  CORTADO_CHECK_EQ(margin_gpu_.count(), bottom[0]->count()) << "HingeLoss backward before a GPU forward";
  gpu::hinge_loss_backward(num_, dim_, margin_gpu_.gpu_data<M>(), bottom[1]->gpu_data<float>(), l2_,
                           top[0]->gpu_diff<double>(), bottom[0]->mutable_gpu_diff<Btype>(),
                           this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(HingeLossLayer);

}  // namespace cortado
