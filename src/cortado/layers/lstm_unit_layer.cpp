#include "cortado/layers/lstm_unit_layer.hpp"

#include "recurrent_ops.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void LSTMUnitLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& c_prev = *bottom[0];
  if (c_prev.num_axes() != 3 || c_prev.shape(0) != 1) {
    this->field_error("bottom", "c_prev (bottom[0]) must have shape (1, N, H), got ", c_prev.shape_string());
  }
  N_ = c_prev.shape(1);
  H_ = c_prev.shape(2);
  const std::vector<int> x_shape{1, N_, 4 * H_}, cont_shape{1, N_};
  if (bottom[1]->shape() != x_shape) {
    this->field_error("bottom", "the gate inputs (bottom[1]) have shape ", bottom[1]->shape_string(), ", expected ",
                      shape_string(x_shape), " for c_prev of shape ", c_prev.shape_string());
  }
  if (bottom[2]->shape() != cont_shape) {
    this->field_error("bottom", "cont (bottom[2]) has shape ", bottom[2]->shape_string(), ", expected ",
                      shape_string(cont_shape));
  }
  for (const Blob* b : bottom) {
    if (b == top[0] || b == top[1]) this->field_error("top", "LSTMUnit cannot be computed in place");
  }
  top[0]->ReshapeLike(c_prev);
  top[1]->ReshapeLike(c_prev);
  gates_.Reshape(x_shape);
  dgates_.Reshape(x_shape);
  dc_.Reshape({N_, H_});
  cell_.Reshape({N_, H_});
  zeros_.Reshape({N_, H_});  // never written: zero from its allocation on
}

template <typename Ftype, typename Btype>
template <class Ops>
void LSTMUnitLayer<Ftype, Btype>::ForwardWith(const Ops& ops, const BlobVec& bottom, const BlobVec& top) {
  M* gates = ops.mutable_data(gates_);
  ops.copy(static_cast<int64_t>(N_) * 4 * H_, ops.data(*bottom[1]), gates);
  M* c = ops.mutable_data(cell_);
  ops.lstm_forward_step(N_, H_, ops.data(*bottom[2]), ops.data(*bottom[0]), gates, c, ops.mutable_data(*top[1]));
  ops.copy(static_cast<int64_t>(N_) * H_, c, ops.mutable_data(*top[0]));
  ops.template round_data<Ftype>(*top[0]);
  ops.template round_data<Ftype>(*top[1]);
}

template <typename Ftype, typename Btype>
template <class Ops>
void LSTMUnitLayer<Ftype, Btype>::BackwardWith(const Ops& ops, const BlobVec& top,
                                               const std::vector<bool>& propagate_down, const BlobVec& bottom) {
  if (propagate_down[2]) {
    this->field_error("bottom", "cannot back-propagate to the continuation indicators (bottom[2], cont)");
  }
  if (!propagate_down[0] && !propagate_down[1]) return;
  const int64_t nh = static_cast<int64_t>(N_) * H_;
  M* dc = ops.mutable_data(dc_);
  M* dg = ops.mutable_data(dgates_);
  ops.copy(nh, ops.diff(*top[0]), dc);
  ops.lstm_backward_step(N_, H_, ops.data(*bottom[2]), ops.data(*bottom[0]), ops.data(gates_), ops.data(cell_),
                         ops.diff(*top[1]), ops.data(zeros_), dc, dg);
  if (propagate_down[0]) {
    ops.copy(nh, dc, ops.mutable_diff(*bottom[0]));
    ops.template round_diff<Btype>(*bottom[0]);
  }
  if (propagate_down[1]) {
    ops.copy(nh * 4, dg, ops.mutable_diff(*bottom[1]));
    ops.template round_diff<Btype>(*bottom[1]);
  }
}

CORTADO_RECURRENT_PASSES(LSTMUnitLayer)

CORTADO_INSTANTIATE_LAYER(LSTMUnitLayer);

}  // namespace cortado
