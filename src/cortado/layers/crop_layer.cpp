#include "cortado/layers/crop_layer.hpp"

#include <algorithm>
#include <vector>

#include "cortado/util/gpu_math.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void CropLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const CropParameter& p = this->layer_param().crop_param();
  const int n = bottom[0]->num_axes();
  if (bottom[1]->num_axes() != n) {
    this->field_error("bottom[1]", "has ", bottom[1]->num_axes(), " axes, bottom[0] has ", n);
  }
#ifdef CORTADO_USE_CUDA
  if (this->on_gpu() && n > gpu::kCropMaxAxes)
    this->field_error("bottom[0]", "has ", n, " axes; Crop on a GPU takes at most ", gpu::kCropMaxAxes,
                      " (the CPU has no limit)");
#endif
  if (p.axis() < -n || p.axis() >= n) {
    this->field_error("crop_param.axis", "must be in [", -n, ", ", n, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", p.axis());
  }
  axis_ = bottom[0]->CanonicalAxisIndex(p.axis());
  const int cropped = n - axis_;
  if (p.offset_size() > 1 && p.offset_size() != cropped) {
    this->field_error("crop_param.offset", "needs 0, 1 or ", cropped, " values (one per cropped axis), got ",
                      p.offset_size());
  }
  offsets_.assign(n, 0);
  for (int a = axis_; a < n; ++a) {
    if (p.offset_size() == 1) offsets_[a] = static_cast<int>(p.offset(0));
    if (p.offset_size() > 1) offsets_[a] = static_cast<int>(p.offset(a - axis_));
  }
}

template <typename Ftype, typename Btype>
void CropLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const int n = bottom[0]->num_axes();
  if (bottom[1]->num_axes() != n) {
    this->field_error("bottom[1]", "has ", bottom[1]->num_axes(), " axes, bottom[0] has ", n);
  }
  std::vector<int> shape = bottom[0]->shape();
  for (int a = axis_; a < n; ++a) {
    if (static_cast<int64_t>(offsets_[a]) + bottom[1]->shape(a) > bottom[0]->shape(a)) {
      this->field_error("crop_param.offset", "offset ", offsets_[a], " plus bottom[1]'s dimension ",
                        bottom[1]->shape(a), " exceeds bottom[0]'s dimension ", bottom[0]->shape(a), " on axis ", a);
    }
    shape[a] = bottom[1]->shape(a);
  }
  for (Blob* b : bottom) {
    if (b == top[0]) this->field_error("top", "Crop cannot be computed in place");
  }
  top[0]->Reshape(shape);
  top_shape_.assign(shape.begin(), shape.end());
  bottom_strides_.assign(n, 1);
  for (int a = n - 2; a >= 0; --a) bottom_strides_[a] = bottom_strides_[a + 1] * bottom[0]->shape(a + 1);
}

template <typename Ftype, typename Btype>
int64_t CropLayer<Ftype, Btype>::BottomIndex(int64_t t) const {
  int64_t index = 0;
  for (int a = static_cast<int>(top_shape_.size()) - 1; a >= 0; --a) {
    index += (t % top_shape_[a] + offsets_[a]) * bottom_strides_[a];
    t /= top_shape_[a];
  }
  return index;
}

template <typename Ftype, typename Btype>
void CropLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const int64_t count = top[0]->count();
  for (int64_t t = 0; t < count; ++t) y[t] = x[BottomIndex(t)];
}

template <typename Ftype, typename Btype>
void CropLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Btype* dy = top[0]->cpu_diff<Btype>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  std::fill(dx, dx + bottom[0]->count(), Btype(0));
  const int64_t count = top[0]->count();
  for (int64_t t = 0; t < count; ++t) dx[BottomIndex(t)] = dy[t];
}

#ifdef CORTADO_USE_CUDA
namespace {
gpu::CropGeometry MakeGeometry(const std::vector<int64_t>& shape, const std::vector<int>& offsets,
                               const std::vector<int64_t>& strides) {
  CORTADO_CHECK(shape.size() <= static_cast<size_t>(gpu::kCropMaxAxes)) << "Reshape checks the axes";
  gpu::CropGeometry g{};
  g.num_axes = static_cast<int>(shape.size());
  for (size_t a = 0; a < shape.size(); ++a) {
    g.top_shape[a] = shape[a];
    g.offset[a] = offsets[a];
    g.bottom_stride[a] = strides[a];
  }
  return g;
}
}  // namespace

template <typename Ftype, typename Btype>
void CropLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  gpu::crop_forward(top[0]->count(), MakeGeometry(top_shape_, offsets_, bottom_strides_), x, y,
                    this->context().stream());
}

template <typename Ftype, typename Btype>
void CropLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Btype* dy = top[0]->gpu_diff<Btype>();
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  gpu_set<Btype>(bottom[0]->count(), 0.f, dx, this->context().stream());
  gpu::crop_backward(top[0]->count(), MakeGeometry(top_shape_, offsets_, bottom_strides_), dy, dx,
                     this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(CropLayer);

}  // namespace cortado
