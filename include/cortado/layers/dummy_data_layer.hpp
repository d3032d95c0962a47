#pragma once
// Produces tops filled by fillers, as Caffe's DummyDataLayer: data for tests
// and benchmarks without a database.
//
// dummy_data_param fields:
//   shape (repeated BlobShape): one shape for every top, or one per top; or the
//     legacy num/channels/height/width (repeated uint32): each has one value for
//     every top or one per top, and all four must be given. shape and the legacy
//     fields together are an error; dimensions must be >= 0.
//   data_filler (repeated FillerParameter): none (every top constant 0), one
//     for every top, or one per top.
//   redraw (bool, default true; Cortado's): random tops drawn at every forward,
//     or, false, once at setup.
// Tops: any number >= 1, shapes as given, written in the top's data type by
// Fill (filler.hpp), which draws from the process RNG. Tops with a "constant"
// filler are filled once at setup; the others are refilled at every Forward,
// unless redraw is false (Cortado's field: drawn once at setup; `trainer
// time` sets it).
// Backward: none (no bottoms). Not in place.
// GPU: the tops are filled on the host exactly as on the CPU (Fill draws
// from the process RNG, so a GPU net sees the same values as a CPU net) and
// move to the device when the first consumer reads them: an asynchronous
// copy from pinned memory, and none at all for constant tops after the
// first forward. HasGpuPath is true because this is the intended GPU
// behaviour, not a fallback worth a warning; a device-side RNG would break
// the CPU/GPU equality for little gain in a layer meant for tests and
// benchmarks.

#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class DummyDataLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "DummyData", BlobRules().Bottoms(0).MinTops(1).NoForcedBackward())
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  /// Shapes are fixed at setup; nothing to do.
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}

 protected:
  CORTADO_LAYER_HOST_PASSES

 private:
  std::vector<std::vector<int>> ReadShapes(int num_top) const;

  // Fills top (of index i); a random top stored channels last is drawn in
  // NCHW order into nchw_ and moved, the values of the NCHW net.
  void Draw(size_t i, Blob* top, const char* where);

  std::vector<FillerParameter> fillers_;  // one per top
  std::vector<bool> refill_;              // one per top
  Blob nchw_{type_of<Ftype>()};
};

}  // namespace cortado
