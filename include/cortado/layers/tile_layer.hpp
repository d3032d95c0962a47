#pragma once
// Tile: repeats the bottom `tiles` times along one axis.
//
//   With outer = count(0, axis) and inner = count(axis):
//   top[o, t, i] = bottom[o, i] for t in [0, tiles);
//   dbottom[o, i] = sum_t dtop[o, t, i].
//
// Bottoms: 1. Tops: 1, the bottom's shape with shape[axis] *= tiles.
// Fields: tile_param.axis (default 1; negative counts from the end);
// tile_param.tiles (required, positive). In place: no.
// Types: forward copies Ftype; backward sums the tiles in math_t<Btype>
// (float for float16) and stores once.
// GPU (tile_layer.cu): forward one thread per top element; backward one thread
// per bottom element summing its `tiles` values in the same order as the CPU.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class TileLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Tile", BlobRules().Bottoms(1).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  int axis_ = 1;
  int tiles_ = 1;
  int64_t outer_ = 0, inner_ = 0;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[o, t, i] = x[o, i]; n = outer * tiles * inner top elements.
template <typename T>
void tile_forward(int64_t n, int64_t tiles, int64_t inner, const T* x, T* y, CUstream_st* stream);
/// dx[o, i] = sum_t dy[o, t, i]; n = outer * inner bottom elements.
template <typename T>
void tile_backward(int64_t n, int64_t tiles, int64_t inner, const T* dy, T* dx, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
