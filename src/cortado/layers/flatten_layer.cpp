#include "cortado/layers/flatten_layer.hpp"

#include <vector>

namespace cortado {

// Validation lives in Reshape because it depends on the bottom's rank, which
// may change from one forward to the next.
template <typename Ftype, typename Btype>
void FlattenLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (top[0] == bottom[0]) this->field_error("top", "Flatten cannot be computed in place");
  const FlattenParameter& p = this->layer_param().flatten_param();
  const int n = bottom[0]->num_axes();
  if (p.axis() < -n || p.axis() >= n) {
    this->field_error("flatten_param.axis", "must be in [", -n, ", ", n, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", p.axis());
  }
  if (p.end_axis() < -n || p.end_axis() >= n) {
    this->field_error("flatten_param.end_axis", "must be in [", -n, ", ", n, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", p.end_axis());
  }
  const int start = bottom[0]->CanonicalAxisIndex(p.axis());
  const int end = bottom[0]->CanonicalAxisIndex(p.end_axis());
  if (end < start) {
    this->field_error("flatten_param.end_axis", "(axis ", end, ") comes before flatten_param.axis (axis ", start,
                      ") for a bottom of shape ", bottom[0]->shape_string());
  }
  std::vector<int> shape(bottom[0]->shape().begin(), bottom[0]->shape().begin() + start);
  shape.push_back(static_cast<int>(bottom[0]->count(start, end + 1)));
  shape.insert(shape.end(), bottom[0]->shape().begin() + end + 1, bottom[0]->shape().end());
  top[0]->Reshape(shape);
  top[0]->ShareData(*bottom[0]);
  top[0]->ShareDiff(*bottom[0]);
}

CORTADO_INSTANTIATE_LAYER(FlattenLayer);

}  // namespace cortado
