#pragma once
// RNN: the simple (Elman) recurrent network of BVLC Caffe's RNNLayer.
// Bottoms, tops and fields: see recurrent_layer.hpp (one state, h).
//
//   h_t = tanh(W_xh x_t + b_h [+ W_xh_static x_static] + W_hh (cont_t * h_{t-1}))
//   o_t = tanh(W_ho h_t + b_o)
// The top is o (T, N, H); with expose_hidden the final h_T is the second top
// and the initial h0 the last bottom (else h_{-1} = 0).
//
// Parameter blobs (Caffe's order and shapes): W_xh (H, I), b_h (H),
// [W_xh_static (H, I_static)], W_hh (H, H), W_ho (H, H), b_o (H).
// The output transform of all steps is one GEMM after the recurrence.
// GPU: cuBLAS GEMMs and the tanh kernels of recurrent_layer.cu.

#include "cortado/layers/recurrent_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class RNNLayer : public RecurrentLayer<Ftype, Btype> {
 public:
  CORTADO_LAYER_TYPE(RecurrentLayer, "RNN")
 protected:
  using typename RecurrentLayer<Ftype, Btype>::M;
  using typename RecurrentLayer<Ftype, Btype>::ParamSpec;
  int num_states() const override { return 1; }
  std::vector<ParamSpec> param_specs(int H, int I, int I_static) const override;
  void ReshapeBuffers() override;

  CORTADO_LAYER_PASSES

 private:
  CORTADO_LAYER_WITH_OPS

  // Parameter indexes: W_xh 0, b_h 1, [W_xh_static 2], then W_hh, W_ho, b_o.
  int hh_index() const { return this->static_input_ ? 3 : 2; }

  // All in M. hidden_: h_t (T, N, H); hc_: cont_t * h_{t-1} (T, N, H);
  // out_: o_t (T, N, H), kept because an in-place layer may change the top;
  // dout_: the gradient of the output pre-activation; dhid_: of the hidden
  // pre-activation; static_: W_xh_static x_static and its gradient sum;
  // dh_, tmp_: the hidden gradient carried back one step (N, H).
  Blob hidden_{type_of<M>()}, hc_{type_of<M>()}, out_{type_of<M>()}, dout_{type_of<M>()}, dhid_{type_of<M>()};
  Blob static_{type_of<M>()}, dh_{type_of<M>()}, tmp_{type_of<M>()};
};

}  // namespace cortado
