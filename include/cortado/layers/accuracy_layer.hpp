#pragma once
// Accuracy: the fraction of predictions whose true class is among the top_k
// scores.
//
// A prediction counts as correct when fewer than top_k classes score at
// least as high as the true class, not counting the true class itself (a
// tie with the true class counts against it, as in BVLC Caffe).
//
// Bottoms: 2. bottom[0] scores: (outer, C, inner) around axis, read as Ftype
// and compared in math_t; bottom[1] labels: outer * inner values, read as
// float, each an integer in [0, C) or ignore_label.
// Tops: 1 or 2, written as float. top[0] the accuracy over non-ignored
// labels, a scalar (shape ()); 0 when every label is ignored. Optional top[1]
// (C): the accuracy per true class (0 for a class that never occurs).
// Fields:
//   accuracy_param.top_k (default 1), 1 <= top_k <= C
//   accuracy_param.axis (default 1)
//   accuracy_param.ignore_label (unset: no label is ignored)
// No backward: Backward does nothing and force_backward does not apply.
// In place: no.
// GPU (accuracy_layer.cu): one thread per position ranks the true class
// (comparisons in math_t, as on the CPU) and adds to integer counters with
// atomics; a second kernel writes the float tops. Integer counts make the
// result exact and identical to the CPU's. A label that is not a class index
// cannot throw inside a kernel: the first one is recorded in pinned host
// memory, skipped, and reported as the CPU's FieldError by the layer's next
// Forward (after the Net has synchronized).

#include <memory>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"
#include "cortado/layers/gpu_label_error.hpp"
#include "cortado/synced_memory.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class AccuracyLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Accuracy", BlobRules().Bottoms(2).Tops(1, 2).NoForcedBackward())
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_FORWARD_PASSES
#ifdef CORTADO_USE_CUDA
  /// Throws the FieldError of a bad label a GPU forward recorded, if any.
  void CheckGpuLabelError();
#endif

 private:
  int top_k_ = 1;
  int axis_ = 1;
  int outer_ = 0, channels_ = 0, inner_ = 0;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  // GPU path.
  std::unique_ptr<SyncedMemory> counts_gpu_;   // (2 + 2 * C) unsigned
  GpuLabelError label_error_;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// Counts over the outer * inner positions (labels as float) into counts (device, 2 + 2 * channels
/// unsigned, zeroed by the caller): [0] labelled, [1] correct, [2 + c] labelled as c, [2 + C + c]
/// correct among those. The first bad label is recorded in *error (pinned, device-mapped) as
/// (position << 32) | float bits, by atomicMin.
template <typename T>
void accuracy_count(int outer, int channels, int inner, int top_k, const T* x, const float* label,
                    bool has_ignore_label, int ignore_label, unsigned* counts, unsigned long long* error,
                    CUstream_st* stream);
/// top[0] = correct / labelled (0 if none); per_class (may be null, channels values) likewise per class.
void accuracy_finish(int channels, const unsigned* counts, float* top, float* per_class, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
