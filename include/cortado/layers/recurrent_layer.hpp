#pragma once
// RecurrentLayer: what RNN and LSTM share, with BVLC Caffe's blobs, fields
// and parameter order, so prototxt files and trained weights carry over.
//
// Bottoms, in order:
//   x      (T, N, ...)  T time steps of N independent streams; I = count(2).
//   cont   (T, N)       0 where a sequence starts (the state is reset to the
//                       initial state), 1 where it continues. The state is
//                       multiplied by cont, as in Caffe, so any value works
//                       (for values other than 0 and 1 the forget gate's
//                       gradient here is the exact one; Caffe's LSTMUnit
//                       differentiates the cont-scaled gate instead).
//                       It takes no gradient: back-propagating to it is an
//                       error.
//   x_static (N, ...)   optional; a per-stream input added at every step.
//   h0 [, c0] (1, N, H) with recurrent_param.expose_hidden only: the initial
//                       state (else zero). They take gradients.
// Tops: the output (T, N, H), then, with expose_hidden, the final state
//   hT [, cT] (1, N, H), so that a long sequence can be run in chunks
//   (truncated back-propagation through time) by feeding them back as h0/c0.
//
// Fields (recurrent_param): num_output H (required, > 0); weight_filler and
// bias_filler (default constant 0); expose_hidden (default false);
// debug_info is accepted and ignored (Caffe printed its unrolled net, which
// does not exist here).
//
// Unlike Caffe, which unrolls the recurrence into an internal net of T copies
// of its layers, each subclass runs the recurrence itself: the input
// transform of all T steps is one GEMM, each step is one GEMM plus one
// elementwise kernel, and the weight gradients are one GEMM each over all
// steps. That gives the same numbers with far fewer launches and no net
// rebuild when T changes.
//
// Types: all arithmetic runs in math_t<Ftype> (float for float16 and
// bfloat16, double for double) and the state (cell, gates) is kept in that
// type between steps: a float16 cell state would lose the small updates of
// long sequences. Tops are rounded to Ftype once, bottom and parameter diffs
// to Btype once. The GPU path does the same on the device (cuBLAS GEMMs in
// float, or double); Tensor Cores and cuDNN's RNN kernels are not used yet.

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class RecurrentLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;

  BlobRules blob_rules() const override {
    const int exposed = this->layer_param().recurrent_param().expose_hidden() ? num_states() : 0;
    return BlobRules().Bottoms(2, 3 + num_states()).Tops(1 + exposed).NoForcedBackwardTo(1);
  }

  CORTADO_LAYER_SETUP

 protected:
  using M = math_t<Ftype>;
  static_assert(std::is_same_v<M, math_t<Btype>>, "a recurrent layer computes forward and backward in one type");

  /// Hidden states carried between steps: RNN 1 (h), LSTM 2 (h, c).
  virtual int num_states() const = 0;
  /// The parameter shapes, in Caffe's order, and which of them are biases
  /// (filled with bias_filler); given H, I and the static input size (0 for none).
  struct ParamSpec { std::string name; std::vector<int> shape; bool bias; };
  virtual std::vector<ParamSpec> param_specs(int H, int I, int I_static) const = 0;
  /// Allocates the per-shape buffers of the subclass (called by Reshape).
  virtual void ReshapeBuffers() = 0;

  /// Throws if the net asks for a gradient with respect to cont.
  void CheckNoContGradient(const std::vector<bool>& propagate_down) const;

  int T_ = 0, N_ = 0, H_ = 0, I_ = 0, I_static_ = 0;
  bool static_input_ = false, expose_hidden_ = false;
  int first_state_bottom_ = 2;  // index of h0 when expose_hidden
  Blob ones_{type_of<M>()};     // (T * N) ones: bias adds and sums as GEMMs
  Blob zeros_{type_of<M>()};    // (N * H) zeros: the initial state without expose_hidden
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[i, j] = cont[i] * x[i, j] for i < rows, j < cols.
template <typename T>
void recurrent_cont_scale(int64_t rows, int64_t cols, const T* cont, const T* x, T* y, CUstream_st* stream);
/// x[i] = tanh(x[i]).
template <typename T>
void recurrent_tanh(int64_t n, T* x, CUstream_st* stream);
/// dx[i] = (dy[i] + (dy2 ? dy2[i] : 0)) * (1 - y[i]^2); dx may be dy.
template <typename T>
void recurrent_tanh_grad(int64_t n, const T* y, const T* dy, const T* dy2, T* dx, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
