#pragma once
// Silence: consumes blobs that nothing else uses, so that the Net does not
// report them as outputs.
//
//   forward:  nothing
//   backward: dx = 0 for every bottom that asks for a gradient
//
// Bottoms: 1 or more, any shapes. Tops: none. Fields: none.
// GPU: the backward zeroes the diffs on the device (gpu_set); no kernel of
// its own.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class SilenceLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Silence", BlobRules().MinBottoms(1).Tops(0))
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override {}
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef CORTADO_USE_CUDA
  bool HasGpuPath_impl() const override { return true; }
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override {}
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif
};

}  // namespace cortado
