#pragma once
// Crop: cuts bottom[0] down to the shape of bottom[1] on the axes from `axis`
// on, starting at the given offsets.
//
//   top[i_0..i_{n-1}] = bottom0[i_0, .., i_{axis-1}, i_axis + off_axis, ..]
//   backward: dbottom0 is zero outside the cropped window and dtop inside it.
//   bottom[1] only gives the shape: it receives no gradient.
//
// Bottoms: 2 with the same number of axes. Tops: 1, shape = bottom0's
// dimensions before `axis`, bottom1's from `axis` on.
// Fields: crop_param.axis (default 2; negative counts from the end);
// crop_param.offset (repeated; none = all 0, one = the same for every cropped
// axis, else one per cropped axis). Each offset + bottom1's dimension must fit
// in bottom0's dimension. In place: no.
// Types: pure copies in Ftype (forward) and Btype (backward).
// GPU: one thread per top element maps its index to bottom0's (crop_layer.cu),
// at most kCropMaxAxes (32) axes.

#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class CropLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Crop", BlobRules().Bottoms(2).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  /// Index into bottom0 of top element t.
  int64_t BottomIndex(int64_t t) const;

  int axis_ = 2;
  std::vector<int> offsets_;        // per axis of bottom0 (0 before axis_)
  std::vector<int64_t> top_shape_;  // per axis
  std::vector<int64_t> bottom_strides_;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
constexpr int kCropMaxAxes = 32;  // 3 x 32 int64 in the kernel arguments: 772 bytes
/// Shapes and strides of a crop: top element t, written in the top's shape,
/// lands at sum_a (idx_a + offset_a) * bottom_stride_a of bottom0.
struct CropGeometry {
  int num_axes;
  int64_t top_shape[kCropMaxAxes];
  int64_t offset[kCropMaxAxes];
  int64_t bottom_stride[kCropMaxAxes];
};
/// y[t] = x[map(t)] for the n top elements (device pointers).
template <typename T>
void crop_forward(int64_t n, const CropGeometry& g, const T* x, T* y, CUstream_st* stream);
/// dx[map(t)] = dy[t]; the rest of dx is left untouched (zero it first).
template <typename T>
void crop_backward(int64_t n, const CropGeometry& g, const T* dy, T* dx, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
