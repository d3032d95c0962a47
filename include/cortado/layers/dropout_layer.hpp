#pragma once
// Dropout: zeroes each element with probability p during training and scales
// the survivors so that the expected output equals the input.
//
//   TRAIN: m_i ~ Bernoulli(1 - p) from the process RNG (rng_bernoulli),
//          y = x * m / (1 - p);  backward dx = dy * m / (1 - p)
//   TEST:  y = x;                backward dx = dy
//
// The phase is layer_param().phase() (the Net sets it; default TRAIN).
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Fields: dropout_param.dropout_ratio p (default 0.5), 0 <= p < 1;
//   dropout_param.random_seed (default -1; NVCaffe's): >= 0 gives the layer
//   a generator of its own (std::mt19937 seeded with it) for its masks, so
//   they repeat run after run whatever else draws numbers; -1 draws from
//   the process RNG. The own generator's state is not in snapshots (as in
//   NVCaffe): a resumed run restarts its sequence. Every rank of a
//   data-parallel run draws the same masks from the same seed.
//   dropout_param.engine: accepted (noted in the log; one implementation).
// In place: yes (the mask is kept by the layer).
// Types: forward in Ftype, backward in Btype; the scale is applied in math_t.
// GPU: the mask is drawn on the host with the same RNG calls as the CPU
// path (so GPU and CPU give identical results for one seed), copied into
// pinned host memory and from there to the device asynchronously on the
// context's stream; one thread per element applies it (dropout_layer.cu).

#include <memory>
#include <random>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"
#include "cortado/synced_memory.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class DropoutLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Dropout", BlobRules().Bottoms(1).Tops(1))
  CORTADO_LAYER_SETUP

  /// The mask of the last TRAIN forward (1 = kept), one per element.
  const std::vector<unsigned>& mask() const { return mask_; }

 protected:
  CORTADO_LAYER_PASSES

 private:
  bool train() const { return this->layer_param().phase() == TRAIN; }
  /// Draws the TRAIN mask of n elements into mask_ (from rng_ when set).
  void DrawMask(int64_t n);

  std::unique_ptr<std::mt19937> rng_;  // dropout_param.random_seed >= 0
  double ratio_ = 0.5;
  double scale_ = 2;
  std::vector<unsigned> mask_;
  // GPU path: the mask in pinned host memory and on the device. Rewritten on
  // the host by the next TRAIN forward, after the Net has synchronized the
  // stream that copied the previous one.
  std::unique_ptr<SyncedMemory> mask_gpu_;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[i] = mask[i] ? x[i] * scale : 0 (scale applied in math_t); x and y may alias.
template <typename T>
void dropout_forward(int64_t n, const T* x, const unsigned* mask, double scale, T* y, CUstream_st* stream);
/// dx[i] = mask[i] ? dy[i] * scale : 0; dx and dy may alias.
template <typename T>
void dropout_backward(int64_t n, const T* dy, const unsigned* mask, double scale, T* dx, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
