#pragma once
// Embed: a lookup table. Each bottom value is an index into the rows of W.
//
//   top[m, :] = W[idx_m, :] (+ b)       for m in [0, M), M = bottom count
//   dW[r, :] += sum_{m : idx_m = r} dtop[m, :];  db += sum_m dtop[m, :]
//   The bottom (indexes) gets no gradient.
//
// Bottoms: 1, any shape, values integers in [0, input_dim) read as float.
// Tops: 1, the bottom's shape with num_output appended.
// Params: W (input_dim, num_output); b (num_output) when bias_term.
// Fields: embed_param.num_output (required, > 0); embed_param.input_dim
// (required, > 0); embed_param.bias_term (default true);
// embed_param.weight_filler, embed_param.bias_filler. In place: no.
// Types: forward adds in math_t<Ftype>; backward sums each row's (and the
// bias's) gradient contributions in math_t<Btype> in ascending m and adds the
// sum once to the stored diff (in Btype).
// GPU (embed_layer.cu): forward one thread per top element; weight backward
// one thread per (m, column) that is the first occurrence of its index,
// summing the later occurrences in the CPU's order; bias backward one thread
// per column. Deterministic, no atomics in the sums.
// Bad indexes on the GPU: the host does not read the indexes (that would
// synchronize the device). The kernels check each index, give its top row
// zeros (forward) or skip it (weight backward), and record the first bad
// one with atomicMin in a GpuLabelError word; the layer's next Forward or
// Backward throws the CPU's FieldError for it before launching anything.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"
#include "cortado/layers/gpu_label_error.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class EmbedLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Embed", BlobRules().Bottoms(1).Tops(1).NoForcedBackward())
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES
#ifdef CORTADO_USE_CUDA
  /// Throws the FieldError of a bad index a GPU kernel recorded, if any.
  void CheckGpuIndexError();
#endif

 private:
  /// Throws a field error naming the first bottom value that is not an index.
  void CheckIndexes(const float* idx) const;
  /// Throws that field error if v, at bottom position m, is not an index.
  void CheckIndex(float v, int64_t m) const;

  int num_output_ = 0, input_dim_ = 0;
  bool bias_term_ = true;
  int64_t m_ = 0;
  GpuLabelError index_error_;  // GPU path: the first bad index a kernel met
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[m, d] = W[idx[m], d] (+ b[d] when b is not null); n = M * N; W has `rows` rows. A row m whose
/// idx[m] is not an integer in [0, rows) gets zeros, and the first such m is recorded in *error
/// (pinned, device-mapped) as (m << 32) | float bits, by atomicMin.
template <typename T>
void embed_forward(int64_t n, int64_t N, int rows, const float* idx, const T* w, const T* b, T* y,
                   unsigned long long* error, CUstream_st* stream);
/// dW[r, d] += sum_{m: idx[m] = r} dy[m, d]; M indexes, N columns, `rows` rows. A bad idx[m] is
/// skipped and recorded in *error as in embed_forward.
template <typename T>
void embed_backward_weight(int64_t M, int64_t N, int rows, const float* idx, const T* dy, T* dw,
                           unsigned long long* error, CUstream_st* stream);
/// db[d] += sum_m dy[m, d].
template <typename T>
void embed_backward_bias(int64_t M, int64_t N, const T* dy, T* db, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
