#include "cortado/layers/argmax_layer.hpp"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

namespace cortado {

template <typename Ftype, typename Btype>
void ArgMaxLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ArgMaxParameter& p = this->layer_param().argmax_param();
  const int n = bottom[0]->num_axes();
  out_max_val_ = p.out_max_val();
  has_axis_ = p.has_axis();
  if (has_axis_ && (p.axis() < -n || p.axis() >= n)) {
    this->field_error("argmax_param.axis", "must be in [", -n, ", ", n, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", p.axis());
  }
  if (!has_axis_ && n < 1) this->field_error("bottom[0]", "needs at least one axis, got a scalar");
  axis_ = has_axis_ ? bottom[0]->CanonicalAxisIndex(p.axis()) : 0;
  const int64_t dim = has_axis_ ? bottom[0]->shape(axis_) : static_cast<int64_t>(bottom[0]->count(1));
  if (p.top_k() < 1 || static_cast<int64_t>(p.top_k()) > dim) {
    this->field_error("argmax_param.top_k", "must be in [1, ", dim, "] (the searched dimension), got ", p.top_k());
  }
  top_k_ = static_cast<int>(p.top_k());
}

template <typename Ftype, typename Btype>
void ArgMaxLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0] == top[0]) this->field_error("top", "ArgMax cannot be computed in place");
  std::vector<int> shape;
  if (has_axis_) {
    shape = bottom[0]->shape();
    shape[axis_] = top_k_;
    dim_ = bottom[0]->shape(axis_);
    stride_ = static_cast<int64_t>(bottom[0]->count(axis_ + 1));
  } else {
    shape.assign(std::max(3, bottom[0]->num_axes()), 1);
    shape[0] = bottom[0]->shape(0);
    shape[2] = top_k_;
    if (out_max_val_) shape[1] = 2;
    dim_ = static_cast<int64_t>(bottom[0]->count(1));
    stride_ = 1;
  }
  if (top_k_ > dim_) {
    this->field_error("argmax_param.top_k", "must be in [1, ", dim_, "] (the searched dimension), got ", top_k_);
  }
  num_ = dim_ > 0 ? static_cast<int64_t>(bottom[0]->count()) / dim_ : 0;
  top[0]->Reshape(shape);
}

template <typename Ftype, typename Btype>
void ArgMaxLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  float* y = top[0]->mutable_cpu_data<float>();
  std::vector<std::pair<M, int64_t>> row(dim_);
  for (int64_t r = 0; r < num_; ++r) {
    const int64_t base = r / stride_ * dim_ * stride_ + r % stride_;
    for (int64_t j = 0; j < dim_; ++j) row[j] = {static_cast<M>(x[base + j * stride_]), j};
    std::partial_sort(row.begin(), row.begin() + top_k_, row.end(), std::greater<std::pair<M, int64_t>>());
    for (int k = 0; k < top_k_; ++k) {
      const float index = static_cast<float>(row[k].second), value = static_cast<float>(row[k].first);
      if (has_axis_) {
        y[(r / stride_ * top_k_ + k) * stride_ + r % stride_] = out_max_val_ ? value : index;
      } else {
        y[(out_max_val_ ? 2 : 1) * r * top_k_ + k] = index;
        if (out_max_val_) y[2 * r * top_k_ + top_k_ + k] = value;
      }
    }
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void ArgMaxLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  float* y = top[0]->mutable_gpu_data<float>();
  const int mode = has_axis_ ? (out_max_val_ ? 1 : 0) : (out_max_val_ ? 2 : 0);
  gpu::argmax_forward(num_, dim_, stride_, top_k_, mode, x, y, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(ArgMaxLayer);

}  // namespace cortado
