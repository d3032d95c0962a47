#pragma once
// LSTMUnit: one LSTM step on given gate inputs, as BVLC Caffe's LSTMUnitLayer
// (for nets that write the recurrence out themselves).
//
// Bottoms: c_prev (1, N, H); x, the gate pre-activations [i f o g] (1, N, 4H);
// cont (1, N). Tops: c (1, N, H), h (1, N, H).
//   i, f, o = sigmoid(x_i, x_f, x_o); g = tanh(x_g)
//   c = cont * f * c_prev + i * g;  h = o * tanh(c)
// Backward to c_prev and x; cont takes no gradient (an error if asked).
// No fields. Types and GPU path: the step kernels of lstm_layer.hpp, in
// math_t<Ftype> (the activated gates are kept in it for the backward).

#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class LSTMUnitLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "LSTMUnit", BlobRules().Bottoms(3).Tops(2).NoForcedBackwardTo(2))
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  using M = math_t<Ftype>;
  CORTADO_LAYER_PASSES

 private:
  CORTADO_LAYER_WITH_OPS

  int N_ = 0, H_ = 0;
  // gates_: the activated gates (N, 4H); cell_: c in M, kept because an
  // in-place layer may change the top; dgates_: the gates' pre-activation
  // gradient; dc_: the gradient of c, then of c_prev; zeros_: no carried dh.
  Blob gates_{type_of<M>()}, cell_{type_of<M>()}, dgates_{type_of<M>()}, dc_{type_of<M>()}, zeros_{type_of<M>()};
};

}  // namespace cortado
