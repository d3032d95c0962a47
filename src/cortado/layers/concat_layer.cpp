#include "cortado/layers/concat_layer.hpp"

#include <vector>

#include "row_copy.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void ConcatLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ConcatParameter& p = this->layer_param().concat_param();
  if (p.has_axis() && p.has_concat_dim()) {
    this->field_error("concat_param.concat_dim", "set together with concat_param.axis; use axis only");
  }
  const int n = bottom[0]->num_axes();
  const int axis = p.has_concat_dim() ? static_cast<int>(p.concat_dim()) : p.axis();
  const char* field = p.has_concat_dim() ? "concat_param.concat_dim" : "concat_param.axis";
  if (axis < -n || axis >= n) {
    this->field_error(field, "must be in [", -n, ", ", n, ") for a bottom of shape ", bottom[0]->shape_string(),
                      ", got ", axis);
  }
  axis_ = bottom[0]->CanonicalAxisIndex(axis);
}

template <typename Ftype, typename Btype>
void ConcatLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  std::vector<int> shape = bottom[0]->shape();
  for (size_t i = 1; i < bottom.size(); ++i) {
    const std::vector<int>& s = bottom[i]->shape();
    bool ok = s.size() == shape.size();
    for (size_t a = 0; ok && a < s.size(); ++a) ok = static_cast<int>(a) == axis_ || s[a] == shape[a];
    if (!ok) {
      this->field_error(str_cat("bottom[", i, "]"), "shape ", bottom[i]->shape_string(), " does not match bottom[0]'s ",
                        bottom[0]->shape_string(), ": all dimensions but axis ", axis_, " must be equal");
    }
    shape[axis_] += s[axis_];
  }
  for (Blob* b : bottom) {
    if (b == top[0]) this->field_error("top", "Concat cannot be computed in place");
  }
  top[0]->Reshape(shape);
  outer_ = static_cast<int64_t>(bottom[0]->count(0, axis_));
  inner_ = static_cast<int64_t>(bottom[0]->count(axis_ + 1));
  if (top[0]->layout() == Layout::NHWC && top[0]->num_axes() > 2) {
    // Channels last (net_layout.hpp): each (n, spatial) is a row of channels,
    // so the rows to copy are N * S long runs of each blob's channels (the
    // same copies, exact, on the CPU and the GPU).
    if (axis_ != 1) this->field_error("concat_param.axis", "a channels-last blob concats along axis 1 only");
    outer_ *= inner_;
    inner_ = 1;
  }
}

template <typename Ftype, typename Btype>
void ConcatLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const int64_t top_slice = top[0]->shape(axis_) * inner_;
  int64_t offset = 0;  // along axis, in units of inner_
  for (Blob* b : bottom) {
    const int64_t slice = b->shape(axis_) * inner_;
    copy_rows_cpu(outer_, slice, b->cpu_data<Ftype>(), slice, y + offset, top_slice);
    offset += slice;
  }
}

template <typename Ftype, typename Btype>
void ConcatLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const int64_t top_slice = top[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (size_t i = 0; i < bottom.size(); ++i) {
    const int64_t slice = bottom[i]->shape(axis_) * inner_;
    if (propagate_down[i]) {
      copy_rows_cpu(outer_, slice, dy + offset, top_slice, bottom[i]->mutable_cpu_diff<Btype>(), slice);
    }
    offset += slice;
  }
}

#ifdef CORTADO_USE_CUDA
// The top is outer_ rows of top_slice values; bottom b fills the columns
// [offset, offset + slice) of every row (row_copy.hpp).
template <typename Ftype, typename Btype>
void ConcatLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const int64_t top_slice = top[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (Blob* b : bottom) {
    const int64_t slice = b->shape(axis_) * inner_;
    copy_rows_gpu(outer_, slice, b->gpu_data<Ftype>(), slice, y + offset, top_slice, this->context().stream());
    offset += slice;
  }
}

template <typename Ftype, typename Btype>
void ConcatLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const int64_t top_slice = top[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (size_t i = 0; i < bottom.size(); ++i) {
    const int64_t slice = bottom[i]->shape(axis_) * inner_;
    if (propagate_down[i] && slice > 0 && outer_ > 0) {
      copy_rows_gpu(outer_, slice, dy + offset, top_slice, bottom[i]->mutable_gpu_diff<Btype>(), slice,
                    this->context().stream());
    }
    offset += slice;
  }
}
#endif

CORTADO_INSTANTIATE_LAYER(ConcatLayer);

}  // namespace cortado
