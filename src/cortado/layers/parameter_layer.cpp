#include "cortado/layers/parameter_layer.hpp"

#include <climits>

#include "cortado/util/math.hpp"
#include "cortado/util/gpu_math.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void ParameterLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ParameterParameter& p = this->layer_param().parameter_param();
  if (!p.has_shape()) this->field_error("parameter_param.shape", "is required (the learnable blob's shape)");
  std::vector<int> shape;
  for (int64_t d : p.shape().dim()) {
    if (d < 0 || d > INT_MAX) {
      this->field_error("parameter_param.shape", "dimension ", d, " is out of range [0, ", INT_MAX, "]");
    }
    shape.push_back(static_cast<int>(d));
  }
  auto& blobs = this->blobs_;
  if (!blobs.empty()) {
    if (blobs.size() != 1 || blobs[0]->shape() != shape) {
      this->field_error("blobs", "expected one parameter blob of shape ", shape_string(shape), ", got ",
                        blobs.size(), " blob(s)", blobs.size() == 1 ? " of shape " + blobs[0]->shape_string() : "");
    }
  } else {
    blobs.push_back(this->make_param(shape));  // zero, as in Caffe
  }
  this->param_propagate_down_.assign(1, true);
}

template <typename Ftype, typename Btype>
void ParameterLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  top[0]->ReshapeLike(*this->blobs_[0]);
}

template <typename Ftype, typename Btype>
void ParameterLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Blob& w = *this->blobs_[0];
  cpu_copy<Ftype>(static_cast<int64_t>(w.count()), w.cpu_data<Ftype>(), top[0]->mutable_cpu_data<Ftype>());
}

template <typename Ftype, typename Btype>
void ParameterLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                const BlobVec& bottom) {
  if (!this->param_propagate_down(0)) return;
  Blob& w = *this->blobs_[0];
  cpu_axpy<Btype>(static_cast<int64_t>(w.count()), math_t<Btype>(1), top[0]->cpu_diff<Btype>(),
                  w.mutable_cpu_diff<Btype>());
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void ParameterLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Blob& w = *this->blobs_[0];
  gpu_copy<Ftype>(static_cast<int64_t>(w.count()), w.gpu_data<Ftype>(), top[0]->mutable_gpu_data<Ftype>(),
                  this->context().stream());
}

template <typename Ftype, typename Btype>
void ParameterLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                const BlobVec& bottom) {
  if (!this->param_propagate_down(0)) return;
  Blob& w = *this->blobs_[0];
  gpu_axpy<Btype>(static_cast<int64_t>(w.count()), 1.f, top[0]->gpu_diff<Btype>(), w.mutable_gpu_diff<Btype>(),
                  this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(ParameterLayer);

}  // namespace cortado
