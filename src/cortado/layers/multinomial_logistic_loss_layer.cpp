#include "cortado/layers/multinomial_logistic_loss_layer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef CORTADO_USE_CUDA
#include "cortado/util/cuda.hpp"
#endif

namespace cortado {

namespace {
constexpr double kLogThreshold = 1e-20;  // the GPU kernels use the same clamp
}

template <typename Ftype, typename Btype>
void MultinomialLogisticLossLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  if (this->layer_param().loss_weight_size() == 0) this->param_.add_loss_weight(1.f);
}

template <typename Ftype, typename Btype>
void MultinomialLogisticLossLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->num_axes() < 1) this->field_error("bottom[0]", "needs at least one axis (N, ...)");
  num_ = bottom[0]->shape(0);
  dim_ = num_ > 0 ? static_cast<int>(bottom[0]->count() / num_) : 0;
  if (bottom[1]->count() != static_cast<size_t>(num_)) {
    this->field_error("bottom[1]", "the label bottom holds ", bottom[1]->count(), " values (shape ",
                      bottom[1]->shape_string(), ") but the prediction ", bottom[0]->shape_string(), " needs ", num_);
  }
  top[0]->Reshape(std::vector<int>{});
}

template <typename Ftype, typename Btype>
int MultinomialLogisticLossLayer<Ftype, Btype>::Label(float v, int n) const {
  return this->ClassLabel(v, n, dim_);
}

template <typename Ftype, typename Btype>
void MultinomialLogisticLossLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* p = bottom[0]->cpu_data<Ftype>();
  const float* label = bottom[1]->cpu_data<float>();
  M loss = 0;
  for (int n = 0; n < num_; ++n) {
    const int l = Label(label[n], n);
    const M v = static_cast<M>(p[static_cast<int64_t>(n) * dim_ + l]);
    loss -= std::log(std::max(v, static_cast<M>(kLogThreshold)));
  }
  top[0]->mutable_cpu_data<float>()[0] = static_cast<float>(loss / static_cast<M>(std::max(1, num_)));
}

template <typename Ftype, typename Btype>
void MultinomialLogisticLossLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top,
                                                              const std::vector<bool>& propagate_down,
                                                              const BlobVec& bottom) {
  if (propagate_down.size() > 1 && propagate_down[1]) {
    this->field_error("propagate_down", "cannot back-propagate to the label bottom");
  }
  if (!propagate_down[0]) return;
  using MB = math_t<Btype>;
  const MB scale = static_cast<MB>(top[0]->cpu_diff<double>()[0] / std::max(1, num_));
  const Ftype* p = bottom[0]->cpu_data<Ftype>();
  const float* label = bottom[1]->cpu_data<float>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  std::fill(dx, dx + bottom[0]->count(), static_cast<Btype>(0.f));
  for (int n = 0; n < num_; ++n) {
    const int l = Label(label[n], n);
    const int64_t k = static_cast<int64_t>(n) * dim_ + l;
    const MB v = static_cast<MB>(static_cast<M>(p[k]));
    dx[k] = static_cast<Btype>(-scale / std::max(v, static_cast<MB>(kLogThreshold)));
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void MultinomialLogisticLossLayer<Ftype, Btype>::CheckGpuLabelError() {
  label_error_.Rethrow([this](float v, int64_t p) { Label(v, static_cast<int>(p)); });
}

template <typename Ftype, typename Btype>
void MultinomialLogisticLossLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  CheckGpuLabelError();
  void* error = label_error_.device_word();
  const size_t blocks = static_cast<size_t>(cuda::blocks_for(num_));
  if (partial_gpu_.count() != blocks) partial_gpu_.resize(blocks);
  gpu::multinomial_logistic_loss_forward(num_, dim_, bottom[0]->gpu_data<Ftype>(), bottom[1]->gpu_data<float>(),
                                         partial_gpu_.mutable_gpu_data<M>(), top[0]->mutable_gpu_data<float>(),
                                         static_cast<unsigned long long*>(error), this->context().stream());
}

template <typename Ftype, typename Btype>
void MultinomialLogisticLossLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top,
                                                              const std::vector<bool>& propagate_down,
                                                              const BlobVec& bottom) {
  if (propagate_down.size() > 1 && propagate_down[1]) {
    this->field_error("propagate_down", "cannot back-propagate to the label bottom");
  }
  CheckGpuLabelError();
  if (!propagate_down[0]) return;
  gpu::multinomial_logistic_loss_backward(num_, dim_, bottom[0]->gpu_data<Ftype>(), bottom[1]->gpu_data<float>(),
                                          top[0]->gpu_diff<double>(), bottom[0]->mutable_gpu_diff<Btype>(),
                                          this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(MultinomialLogisticLossLayer);

}  // namespace cortado
