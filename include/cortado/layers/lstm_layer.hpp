#pragma once
// LSTM: long short-term memory, as BVLC Caffe's LSTMLayer (Hochreiter and
// Schmidhuber; the variant without peepholes of Graves, Zaremba et al.).
// Bottoms, tops and fields: see recurrent_layer.hpp (two states, h and c).
//
// With cont_t the continuation indicator of step t and [i f o g] the four
// gate blocks of H values each (Caffe's order):
//   hc_{t-1} = cont_t * h_{t-1}
//   a_t      = W_xc x_t + b_c [+ W_xc_static x_static] + W_hc hc_{t-1}  (4H)
//   i, f, o  = sigmoid(a_i, a_f, a_o);  g = tanh(a_g)
//   c_t      = cont_t * f * c_{t-1} + i * g
//   h_t      = o * tanh(c_t)
// h_{-1} and c_{-1} are zero, or h0 and c0 with expose_hidden.
//
// Parameter blobs (Caffe's order and shapes): W_xc (4H, I), b_c (4H),
// [W_xc_static (4H, I_static) with a static input], W_hc (4H, H).
//
// Backward is back-propagation through all T steps; the gradients of the
// weights are one GEMM each over all steps.
// GPU (lstm_layer.cu): one kernel per step for the gates and the cell (one
// thread per (n, j) of the N x H state), GEMMs through cuBLAS.

#include "cortado/layers/recurrent_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class LSTMLayer : public RecurrentLayer<Ftype, Btype> {
 public:
  CORTADO_LAYER_TYPE(RecurrentLayer, "LSTM")
 protected:
  using typename RecurrentLayer<Ftype, Btype>::M;
  using typename RecurrentLayer<Ftype, Btype>::ParamSpec;
  int num_states() const override { return 2; }
  std::vector<ParamSpec> param_specs(int H, int I, int I_static) const override;
  void ReshapeBuffers() override;

  CORTADO_LAYER_PASSES

 private:
  CORTADO_LAYER_WITH_OPS

  int wh_index() const { return this->static_input_ ? 3 : 2; }

  // All in M. gates_: the activated gates [i f o g] of every step (T, N, 4H);
  // cell_: c_t (T, N, H); hc_: cont_t * h_{t-1} (T, N, H), the input of the
  // recurrent GEMM; dgates_: the gradient of the gate pre-activations;
  // static_: W_xc_static x_static (forward) and its gradient sum (backward);
  // dh_, dc_, tmp_: the state gradients carried back one step (N, H).
  Blob gates_{type_of<M>()}, cell_{type_of<M>()}, hc_{type_of<M>()}, dgates_{type_of<M>()};
  Blob static_{type_of<M>()}, dh_{type_of<M>()}, dc_{type_of<M>()}, tmp_{type_of<M>()};
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// One LSTM step for n = N * H state values: gates (N, 4H) holds the
/// pre-activations on entry and the activated gates on return; writes c and h.
template <typename T>
void lstm_forward_step(int64_t N, int64_t H, const T* cont, const T* c_prev, T* gates, T* c, T* h,
                       CUstream_st* stream);
/// The step's backward: from the activated gates, c_prev, c, the top's
/// gradient dh_top (may be null) plus the carried dh, and the carried dc,
/// writes the pre-activation gradients dgates (N, 4H) and replaces dc with
/// the gradient of c_prev.
template <typename T>
void lstm_backward_step(int64_t N, int64_t H, const T* cont, const T* c_prev, const T* gates, const T* c,
                        const T* dh_top, const T* dh, T* dc, T* dgates, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
