#pragma once
// SPP: spatial pyramid pooling (He et al.), as Caffe's SPPLayer.
//
// Level l in [0, pyramid_height) pools each (H, W) plane into B x B bins,
// B = 2^l, with Caffe's geometry: kernel KH = ceil(H / B), pad
// PH = (KH*B - H + 1) / 2, stride KH (likewise W), and Pooling's semantics
// (MAX, or AVE with Caffe's padding-inclusive divisor; see pooling_layer.hpp).
// Each level's (N, C, B, B) output is flattened per image and the levels are
// concatenated in order:
//   top[n, off_l + (c*B + i)*B + j] = pool_l(bottom)[n, c, i, j],
//   off_l = C * sum_{m < l} 4^m.
// Backward: each level's pooling backward of its slice of the top diff; the
// bottom diff is their sum over the levels.
//
// Bottoms: 1, (N, C, H, W), H and W >= 1. Tops: 1, (N, C * sum_l 4^l); with
// pyramid_height 1 (global pooling) (N, C, 1, 1), as Caffe gives it.
// spp_param fields:
//   pyramid_height (required, in [1, 31])
//   pool (default MAX): MAX or AVE. STOCHASTIC is an error: the levels are
//     padded and Pooling's STOCHASTIC takes no padding (Caffe's stochastic
//     pooling ignores the pad and so pools other windows than the levels'
//     bins).
//   engine: accepted and ignored.
// Every level needs pad < kernel (Pooling's rule, which Caffe's SPP also
// hits): a plane too small for 2^(pyramid_height-1) bins per side is an error
// on spp_param.pyramid_height. In place: no.
//
// Types: the levels are PoolingLayer<Ftype, Btype> instances (forward in
// math_t<Ftype> stored in Ftype; each level's backward stored in Btype); the
// flatten/concat copies are exact. The level gradients are summed, level by
// level in order, in math_t<Btype> and the sum is rounded once into the
// Btype bottom diff.
// GPU: Pooling's kernels per level; the concat and its backward slices are
// strided device copies (cudaMemcpy2DAsync); spp_layer.cu sums the level
// gradients elementwise in the CPU's order. The level layers are rebuilt
// when H or W changes.

#include <memory>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"
#include "cortado/layers/pooling_layer.hpp"

struct CUstream_st;

namespace cortado {

template <typename Ftype, typename Btype>
class SPPLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "SPP", BlobRules().Bottoms(1).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  struct Level {
    std::unique_ptr<PoolingLayer<Ftype, Btype>> pool;
    std::unique_ptr<Blob> out;  // (N, C, B, B); unused with pyramid_height 1 (top[0] is the output)
    int64_t size = 0;           // C * B * B: values per image
    int64_t offset = 0;         // where the level starts in a top row
  };
  /// Validates the geometry of every level for an (H, W) plane and makes
  /// the level layers (set up on bottom and their outputs).
  void BuildLevels(const BlobVec& bottom, const BlobVec& top);
  /// Runs level l's pooling forward (into its output) on this layer's context.
  void ForwardLevel(Level& level, const BlobVec& bottom, const BlobVec& top);
  /// The start of both backward passes: false when there is nothing left to
  /// do (no gradient wanted, or one level, whose pooling layer wrote it).
  bool BackwardPyramid(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);

  int pyramid_height_ = 1;
  PoolingParameter::PoolMethod pool_ = PoolingParameter::MAX;
  int height_ = -1, width_ = -1;  // the plane the levels were built for
  int64_t row_ = 0;                // values per image in the top
  std::vector<Level> levels_;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// acc[i] = (first ? 0 : acc[i]) + g[i], in math_t<T> (device pointers).
template <typename T>
void spp_accumulate(int64_t n, const T* g, math_t<T>* acc, bool first, CUstream_st* stream);
/// dx[i] = T(acc[i] + dx[i]): adds the last level and rounds once.
template <typename T>
void spp_finish(int64_t n, const math_t<T>* acc, T* dx, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
