#include "cortado/layers/slice_layer.hpp"

#include <vector>

#include "row_copy.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void SliceLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const SliceParameter& p = this->layer_param().slice_param();
  if (p.has_axis() && p.has_slice_dim()) {
    this->field_error("slice_param.slice_dim", "set together with slice_param.axis; use axis only");
  }
  const int n = bottom[0]->num_axes();
  const int axis = p.has_slice_dim() ? static_cast<int>(p.slice_dim()) : p.axis();
  const char* field = p.has_slice_dim() ? "slice_param.slice_dim" : "slice_param.axis";
  if (axis < -n || axis >= n) {
    this->field_error(field, "must be in [", -n, ", ", n, ") for a bottom of shape ", bottom[0]->shape_string(),
                      ", got ", axis);
  }
  axis_ = bottom[0]->CanonicalAxisIndex(axis);
  points_.assign(p.slice_point().begin(), p.slice_point().end());
  if (!points_.empty() && points_.size() + 1 != top.size()) {
    this->field_error("slice_param.slice_point", "needs one point fewer than the ", top.size(), " tops, got ",
                      points_.size());
  }
}

template <typename Ftype, typename Btype>
void SliceLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const int dim = bottom[0]->shape(axis_);
  const int k = static_cast<int>(top.size());
  sizes_.clear();
  if (!points_.empty()) {
    int prev = 0;
    for (int pt : points_) {
      if (pt <= prev || pt >= dim) {
        this->field_error("slice_param.slice_point", "must be strictly increasing inside (0, ", dim,
                          ") for axis ", axis_, " of ", bottom[0]->shape_string(), ", got ", pt);
      }
      sizes_.push_back(pt - prev);
      prev = pt;
    }
    sizes_.push_back(dim - prev);
  } else {
    if (dim % k != 0) {
      this->field_error("slice_param.slice_point", "absent, and the ", k, " tops do not divide dimension ", dim,
                        " of axis ", axis_, " equally");
    }
    sizes_.assign(k, dim / k);
  }
  for (Blob* t : top) {
    if (t == bottom[0]) this->field_error("top", "Slice cannot be computed in place");
  }
  std::vector<int> shape = bottom[0]->shape();
  for (int i = 0; i < k; ++i) {
    shape[axis_] = sizes_[i];
    top[i]->Reshape(shape);
  }
  outer_ = static_cast<int64_t>(bottom[0]->count(0, axis_));
  inner_ = static_cast<int64_t>(bottom[0]->count(axis_ + 1));
  if (bottom[0]->layout() == Layout::NHWC && bottom[0]->num_axes() > 2) {
    // Channels last (net_layout.hpp): each (n, spatial) is a row of channels,
    // so the rows to copy are N * S long runs of each blob's channels (the
    // same copies, exact, on the CPU and the GPU).
    if (axis_ != 1) this->field_error("slice_param.axis", "a channels-last blob slices along axis 1 only");
    outer_ *= inner_;
    inner_ = 1;
  }
}

template <typename Ftype, typename Btype>
void SliceLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const int64_t row = bottom[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (size_t i = 0; i < top.size(); ++i) {
    const int64_t slice = sizes_[i] * inner_;
    copy_rows_cpu(outer_, slice, x + offset, row, top[i]->mutable_cpu_data<Ftype>(), slice);
    offset += slice;
  }
}

template <typename Ftype, typename Btype>
void SliceLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const int64_t row = bottom[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (size_t i = 0; i < top.size(); ++i) {
    const int64_t slice = sizes_[i] * inner_;
    copy_rows_cpu(outer_, slice, top[i]->cpu_diff<Btype>(), slice, dx + offset, row);
    offset += slice;
  }
}

#ifdef CORTADO_USE_CUDA
// The bottom is outer_ rows of `row` values; top i is the columns
// [offset, offset + slice) of every row (row_copy.hpp).
template <typename Ftype, typename Btype>
void SliceLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  const int64_t row = bottom[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (size_t i = 0; i < top.size(); ++i) {
    const int64_t slice = sizes_[i] * inner_;
    copy_rows_gpu(outer_, slice, x + offset, row, top[i]->mutable_gpu_data<Ftype>(), slice, this->context().stream());
    offset += slice;
  }
}

template <typename Ftype, typename Btype>
void SliceLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  const int64_t row = bottom[0]->shape(axis_) * inner_;
  int64_t offset = 0;
  for (size_t i = 0; i < top.size(); ++i) {
    const int64_t slice = sizes_[i] * inner_;
    copy_rows_gpu(outer_, slice, top[i]->gpu_diff<Btype>(), slice, dx + offset, row, this->context().stream());
    offset += slice;
  }
}
#endif

CORTADO_INSTANTIATE_LAYER(SliceLayer);

}  // namespace cortado
