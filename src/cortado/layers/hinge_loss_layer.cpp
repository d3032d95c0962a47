#include "cortado/layers/hinge_loss_layer.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#ifdef CORTADO_USE_CUDA
#include "cortado/util/cuda.hpp"
#endif

namespace cortado {

template <typename Ftype, typename Btype>
void HingeLossLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const LayerParameter& p = this->layer_param();
  const auto norm = p.hinge_loss_param().norm();
  if (norm != HingeLossParameter::L1 && norm != HingeLossParameter::L2) {
    this->field_error("hinge_loss_param.norm", "must be L1 or L2, got ", static_cast<int>(norm));
  }
  l2_ = norm == HingeLossParameter::L2;
  if (p.loss_weight_size() == 0) this->param_.add_loss_weight(1.f);
}

template <typename Ftype, typename Btype>
void HingeLossLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->num_axes() < 1) this->field_error("bottom[0]", "needs at least one axis (N, ...)");
  num_ = bottom[0]->shape(0);
  dim_ = num_ > 0 ? static_cast<int>(bottom[0]->count() / num_) : 0;
  if (bottom[1]->count() != static_cast<size_t>(num_)) {
    this->field_error("bottom[1]", "the label bottom holds ", bottom[1]->count(), " values (shape ",
                      bottom[1]->shape_string(), ") but the prediction ", bottom[0]->shape_string(), " needs ", num_);
  }
  top[0]->Reshape(std::vector<int>{});
  margin_.resize(bottom[0]->count());
}

template <typename Ftype, typename Btype>
int HingeLossLayer<Ftype, Btype>::Label(float v, int n) const {
  return this->ClassLabel(v, n, dim_);
}

template <typename Ftype, typename Btype>
void HingeLossLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const float* label = bottom[1]->cpu_data<float>();
  M loss = 0;
  for (int n = 0; n < num_; ++n) {
    const int l = Label(label[n], n);
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
  if (propagate_down.size() > 1 && propagate_down[1]) {
    this->field_error("propagate_down", "cannot back-propagate to the label bottom");
  }
  if (!propagate_down[0]) return;
  using MB = math_t<Btype>;
  const MB scale = static_cast<MB>(top[0]->cpu_diff<double>()[0] / std::max(1, num_));
  const float* label = bottom[1]->cpu_data<float>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  for (int n = 0; n < num_; ++n) {
    const int l = Label(label[n], n);
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
void HingeLossLayer<Ftype, Btype>::CheckGpuLabelError() {
  label_error_.Rethrow([this](float v, int64_t p) { Label(v, static_cast<int>(p)); });
}

template <typename Ftype, typename Btype>
void HingeLossLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  CheckGpuLabelError();
  void* error = label_error_.device_word();
  const int64_t count = static_cast<int64_t>(num_) * dim_;
  const size_t blocks = static_cast<size_t>(cuda::blocks_for(count));
  if (margin_gpu_.count() != static_cast<size_t>(count)) margin_gpu_.resize(count);
  if (partial_gpu_.count() != blocks) partial_gpu_.resize(blocks);
  gpu::hinge_loss_forward(num_, dim_, bottom[0]->gpu_data<Ftype>(), bottom[1]->gpu_data<float>(), l2_,
                          margin_gpu_.mutable_gpu_data<M>(), partial_gpu_.mutable_gpu_data<M>(),
                          top[0]->mutable_gpu_data<float>(), static_cast<unsigned long long*>(error),
                          this->context().stream());
}

template <typename Ftype, typename Btype>
void HingeLossLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                const BlobVec& bottom) {
  if (propagate_down.size() > 1 && propagate_down[1]) {
    this->field_error("propagate_down", "cannot back-propagate to the label bottom");
  }
  CheckGpuLabelError();
  if (!propagate_down[0]) return;
  CORTADO_CHECK_EQ(margin_gpu_.count(), bottom[0]->count()) << "HingeLoss backward before a GPU forward";
  gpu::hinge_loss_backward(num_, dim_, margin_gpu_.gpu_data<M>(), bottom[1]->gpu_data<float>(), l2_,
                           top[0]->gpu_diff<double>(), bottom[0]->mutable_gpu_diff<Btype>(),
                           this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(HingeLossLayer);

}  // namespace cortado
