#include "cortado/layers/lstm_layer.hpp"

#include "recurrent_ops.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
std::vector<typename LSTMLayer<Ftype, Btype>::ParamSpec> LSTMLayer<Ftype, Btype>::param_specs(int H, int I,
                                                                                               int I_static) const {
  std::vector<ParamSpec> specs{{"W_xc", {4 * H, I}, false}, {"b_c", {4 * H}, true}};
  if (I_static > 0) specs.push_back({"W_xc_static", {4 * H, I_static}, false});
  specs.push_back({"W_hc", {4 * H, H}, false});
  return specs;
}

template <typename Ftype, typename Btype>
void LSTMLayer<Ftype, Btype>::ReshapeBuffers() {
  const int T = this->T_, N = this->N_, H = this->H_;
  gates_.Reshape({T, N, 4 * H});
  dgates_.Reshape({T, N, 4 * H});
  cell_.Reshape({T, N, H});
  hc_.Reshape({T, N, H});
  static_.Reshape({this->static_input_ ? N : 0, 4 * H});
  dh_.Reshape({N, H});
  dc_.Reshape({N, H});
  tmp_.Reshape({N, H});
}

template <typename Ftype, typename Btype>
template <class Ops>
void LSTMLayer<Ftype, Btype>::ForwardWith(const Ops& ops, const BlobVec& bottom, const BlobVec& top) {
  const int T = this->T_, N = this->N_, H = this->H_, G = 4 * H, TN = T * N;
  const int64_t NH = static_cast<int64_t>(N) * H, NG = static_cast<int64_t>(N) * G;
  auto& blobs = this->blobs_;
  const M* x = ops.data(*bottom[0]);
  const M* cont = ops.data(*bottom[1]);
  const M* w_x = ops.data(*blobs[0]);
  const M* b = ops.data(*blobs[1]);
  const M* w_h = ops.data(*blobs[wh_index()]);
  const M* h0 = this->expose_hidden_ ? ops.data(*bottom[this->first_state_bottom_]) : ops.data(this->zeros_);
  const M* c0 = this->expose_hidden_ ? ops.data(*bottom[this->first_state_bottom_ + 1]) : ops.data(this->zeros_);
  M* gates = ops.mutable_data(gates_);
  M* cell = ops.mutable_data(cell_);
  M* hc = ops.mutable_data(hc_);
  M* h = ops.mutable_data(*top[0]);

  // The input part of every step at once: x W_xc^T + 1 b_c^T.
  ops.gemm(Trans::No, Trans::Yes, TN, G, this->I_, M(1), x, w_x, M(0), gates);
  ops.gemm(Trans::No, Trans::No, TN, G, 1, M(1), ops.data(this->ones_), b, M(1), gates);
  if (this->static_input_) {
    M* s = ops.mutable_data(static_);
    ops.gemm(Trans::No, Trans::Yes, N, G, this->I_static_, M(1), ops.data(*bottom[2]), ops.data(*blobs[2]), M(0), s);
    for (int t = 0; t < T; ++t) ops.axpy(NG, M(1), s, gates + t * NG);
  }
  for (int t = 0; t < T; ++t) {
    const M* h_prev = t > 0 ? h + (t - 1) * NH : h0;
    const M* c_prev = t > 0 ? cell + (t - 1) * NH : c0;
    ops.cont_scale(N, H, cont + static_cast<int64_t>(t) * N, h_prev, hc + t * NH);
    ops.gemm(Trans::No, Trans::Yes, N, G, H, M(1), hc + t * NH, w_h, M(1), gates + t * NG);
    ops.lstm_forward_step(N, H, cont + static_cast<int64_t>(t) * N, c_prev, gates + t * NG, cell + t * NH, h + t * NH);
  }
  if (this->expose_hidden_) {
    ops.copy(NH, h + (T - 1) * NH, ops.mutable_data(*top[1]));
    ops.copy(NH, cell + (T - 1) * NH, ops.mutable_data(*top[2]));
    ops.template round_data<Ftype>(*top[1]);
    ops.template round_data<Ftype>(*top[2]);
  }
  ops.template round_data<Ftype>(*top[0]);
}

template <typename Ftype, typename Btype>
template <class Ops>
void LSTMLayer<Ftype, Btype>::BackwardWith(const Ops& ops, const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  this->CheckNoContGradient(propagate_down);
  const int T = this->T_, N = this->N_, H = this->H_, G = 4 * H, TN = T * N;
  const int64_t NH = static_cast<int64_t>(N) * H, NG = static_cast<int64_t>(N) * G;
  auto& blobs = this->blobs_;
  const M* dtop = ops.diff(*top[0]);
  const M* cont = ops.data(*bottom[1]);
  const M* w_h = ops.data(*blobs[wh_index()]);
  const M* c0 = this->expose_hidden_ ? ops.data(*bottom[this->first_state_bottom_ + 1]) : ops.data(this->zeros_);
  const M* gates = ops.data(gates_);
  const M* cell = ops.data(cell_);
  M* dg = ops.mutable_data(dgates_);
  M* dh = ops.mutable_data(dh_);
  M* dc = ops.mutable_data(dc_);
  M* tmp = ops.mutable_data(tmp_);
  if (this->expose_hidden_) {
    ops.copy(NH, ops.diff(*top[1]), dh);
    ops.copy(NH, ops.diff(*top[2]), dc);
  } else {
    ops.set(NH, M(0), dh);
    ops.set(NH, M(0), dc);
  }
  for (int t = T - 1; t >= 0; --t) {
    const M* cont_t = cont + static_cast<int64_t>(t) * N;
    const M* c_prev = t > 0 ? cell + (t - 1) * NH : c0;
    ops.lstm_backward_step(N, H, cont_t, c_prev, gates + t * NG, cell + t * NH, dtop + t * NH, dh, dc, dg + t * NG);
    // dh_{t-1} = cont_t * (da_t W_hc)
    ops.gemm(Trans::No, Trans::No, N, H, G, M(1), dg + t * NG, w_h, M(0), tmp);
    ops.cont_scale(N, H, cont_t, tmp, dh);
  }

  // Parameter gradients, accumulated over all steps.
  if (this->param_propagate_down(0)) {
    ops.gemm(Trans::Yes, Trans::No, G, this->I_, TN, M(1), dg, ops.data(*bottom[0]), M(1),
             ops.mutable_diff(*blobs[0]));
    ops.template round_diff<Btype>(*blobs[0]);
  }
  if (this->param_propagate_down(1)) {
    ops.gemv(Trans::Yes, TN, G, M(1), dg, ops.data(this->ones_), M(1), ops.mutable_diff(*blobs[1]));
    ops.template round_diff<Btype>(*blobs[1]);
  }
  if (this->param_propagate_down(wh_index())) {
    ops.gemm(Trans::Yes, Trans::No, G, H, TN, M(1), dg, ops.data(hc_), M(1), ops.mutable_diff(*blobs[wh_index()]));
    ops.template round_diff<Btype>(*blobs[wh_index()]);
  }
  if (this->static_input_) {
    M* ds = ops.mutable_data(static_);
    ops.copy(NG, dg, ds);
    for (int t = 1; t < T; ++t) ops.axpy(NG, M(1), dg + t * NG, ds);
    if (this->param_propagate_down(2)) {
      ops.gemm(Trans::Yes, Trans::No, G, this->I_static_, N, M(1), ds, ops.data(*bottom[2]), M(1),
               ops.mutable_diff(*blobs[2]));
      ops.template round_diff<Btype>(*blobs[2]);
    }
    if (propagate_down[2]) {
      ops.gemm(Trans::No, Trans::No, N, this->I_static_, G, M(1), ds, ops.data(*blobs[2]), M(0),
               ops.mutable_diff(*bottom[2]));
      ops.template round_diff<Btype>(*bottom[2]);
    }
  }
  if (propagate_down[0]) {
    ops.gemm(Trans::No, Trans::No, TN, this->I_, G, M(1), dg, ops.data(*blobs[0]), M(0), ops.mutable_diff(*bottom[0]));
    ops.template round_diff<Btype>(*bottom[0]);
  }
  if (this->expose_hidden_) {
    const int hb = this->first_state_bottom_;
    if (propagate_down[hb]) {
      ops.copy(NH, dh, ops.mutable_diff(*bottom[hb]));
      ops.template round_diff<Btype>(*bottom[hb]);
    }
    if (propagate_down[hb + 1]) {
      ops.copy(NH, dc, ops.mutable_diff(*bottom[hb + 1]));
      ops.template round_diff<Btype>(*bottom[hb + 1]);
    }
  }
}

CORTADO_RECURRENT_PASSES(LSTMLayer)

CORTADO_INSTANTIATE_LAYER(LSTMLayer);

}  // namespace cortado
