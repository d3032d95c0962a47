#include "cortado/layers/reshape_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void ReshapeLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  if (top[0] == bottom[0]) this->field_error("top", "Reshape cannot be computed in place");
  const ReshapeParameter& p = this->layer_param().reshape_param();
  if (!p.has_shape()) this->field_error("reshape_param.shape", "is required");
  if (p.num_axes() < -1) this->field_error("reshape_param.num_axes", "must be -1 or more, got ", p.num_axes());
  copy_axes_.clear();
  inferred_axis_ = -1;
  for (int i = 0; i < p.shape().dim_size(); ++i) {
    const int64_t d = p.shape().dim(i);
    if (d == 0) {
      copy_axes_.push_back(i);
    } else if (d == -1) {
      if (inferred_axis_ >= 0) {
        this->field_error("reshape_param.shape", "has more than one -1 (dims ", inferred_axis_, " and ", i, ")");
      }
      inferred_axis_ = i;
    } else if (d < -1 || d > INT32_MAX) {
      this->field_error("reshape_param.shape", "dim ", i, " is ", d, "; expected -1, 0 or a positive size");
    }
  }
}

template <typename Ftype, typename Btype>
void ReshapeLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const ReshapeParameter& p = this->layer_param().reshape_param();
  const std::vector<int>& in = bottom[0]->shape();
  const int n = bottom[0]->num_axes();
  if (p.axis() < -(n + 1) || p.axis() > n) {
    this->field_error("reshape_param.axis", "must be in [", -(n + 1), ", ", n, "] for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", p.axis());
  }
  const int start = p.axis() >= 0 ? p.axis() : n + p.axis() + 1;
  const int end = p.num_axes() == -1 ? n : start + p.num_axes();
  if (end > n) {
    this->field_error("reshape_param.num_axes", "is ", p.num_axes(), " but only ", n - start,
                      " axes follow reshape_param.axis ", p.axis(), " in the bottom shape ", bottom[0]->shape_string());
  }
  std::vector<int> shape(in.begin(), in.begin() + start);
  for (int64_t d : p.shape().dim()) shape.push_back(static_cast<int>(d));
  shape.insert(shape.end(), in.begin() + end, in.end());
  for (int i : copy_axes_) {
    if (start + i >= n) {
      this->field_error("reshape_param.shape", "dim ", i, " is 0 (copy) but there is no bottom axis ", start + i,
                        " to copy in ", bottom[0]->shape_string());
    }
    shape[start + i] = in[start + i];
  }
  if (inferred_axis_ >= 0) {
    size_t explicit_count = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (static_cast<int>(i) != start + inferred_axis_) explicit_count *= static_cast<size_t>(shape[i]);
    }
    if (explicit_count == 0 || bottom[0]->count() % explicit_count != 0) {
      this->field_error("reshape_param.shape", "cannot infer dim ", inferred_axis_, ": the bottom count ",
                        bottom[0]->count(), " (shape ", bottom[0]->shape_string(), ") is not a multiple of ",
                        explicit_count);
    }
    shape[start + inferred_axis_] = static_cast<int>(bottom[0]->count() / explicit_count);
  }
  size_t count = 1;
  for (int d : shape) count *= static_cast<size_t>(d);
  if (count != bottom[0]->count()) {
    this->field_error("reshape_param.shape", "gives shape ", shape_string(shape), " (", count,
                      " values) but the bottom ", bottom[0]->shape_string(), " holds ", bottom[0]->count());
  }
  top[0]->Reshape(shape);
  top[0]->ShareData(*bottom[0]);
  top[0]->ShareDiff(*bottom[0]);
}

CORTADO_INSTANTIATE_LAYER(ReshapeLayer);

}  // namespace cortado
