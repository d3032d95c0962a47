#include "cortado/layers/rnn_layer.hpp"

#include "recurrent_ops.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
std::vector<typename RNNLayer<Ftype, Btype>::ParamSpec> RNNLayer<Ftype, Btype>::param_specs(int H, int I,
                                                                                             int I_static) const {
  std::vector<ParamSpec> specs{{"W_xh", {H, I}, false}, {"b_h", {H}, true}};
  if (I_static > 0) specs.push_back({"W_xh_static", {H, I_static}, false});
  specs.push_back({"W_hh", {H, H}, false});
  specs.push_back({"W_ho", {H, H}, false});
  specs.push_back({"b_o", {H}, true});
  return specs;
}

template <typename Ftype, typename Btype>
void RNNLayer<Ftype, Btype>::ReshapeBuffers() {
  const int T = this->T_, N = this->N_, H = this->H_;
  for (Blob* b : {&hidden_, &hc_, &out_, &dout_, &dhid_}) b->Reshape({T, N, H});
  static_.Reshape({this->static_input_ ? N : 0, H});
  dh_.Reshape({N, H});
  tmp_.Reshape({N, H});
}

template <typename Ftype, typename Btype>
template <class Ops>
void RNNLayer<Ftype, Btype>::ForwardWith(const Ops& ops, const BlobVec& bottom, const BlobVec& top) {
  const int T = this->T_, N = this->N_, H = this->H_, TN = T * N;
  const int64_t NH = static_cast<int64_t>(N) * H;
  auto& blobs = this->blobs_;
  const int hh = hh_index();
  const M* x = ops.data(*bottom[0]);
  const M* cont = ops.data(*bottom[1]);
  const M* ones = ops.data(this->ones_);
  const M* w_hh = ops.data(*blobs[hh]);
  const M* h0 = this->expose_hidden_ ? ops.data(*bottom[this->first_state_bottom_]) : ops.data(this->zeros_);
  M* hidden = ops.mutable_data(hidden_);
  M* hc = ops.mutable_data(hc_);
  M* out = ops.mutable_data(out_);

  // The input part of every step at once: x W_xh^T + 1 b_h^T.
  ops.gemm(Trans::No, Trans::Yes, TN, H, this->I_, M(1), x, ops.data(*blobs[0]), M(0), hidden);
  ops.gemm(Trans::No, Trans::No, TN, H, 1, M(1), ones, ops.data(*blobs[1]), M(1), hidden);
  if (this->static_input_) {
    M* s = ops.mutable_data(static_);
    ops.gemm(Trans::No, Trans::Yes, N, H, this->I_static_, M(1), ops.data(*bottom[2]), ops.data(*blobs[2]), M(0), s);
    for (int t = 0; t < T; ++t) ops.axpy(NH, M(1), s, hidden + t * NH);
  }
  for (int t = 0; t < T; ++t) {
    const M* h_prev = t > 0 ? hidden + (t - 1) * NH : h0;
    ops.cont_scale(N, H, cont + static_cast<int64_t>(t) * N, h_prev, hc + t * NH);
    ops.gemm(Trans::No, Trans::Yes, N, H, H, M(1), hc + t * NH, w_hh, M(1), hidden + t * NH);
    ops.tanh(NH, hidden + t * NH);
  }
  // o = tanh(h W_ho^T + 1 b_o^T) for all steps.
  ops.gemm(Trans::No, Trans::Yes, TN, H, H, M(1), hidden, ops.data(*blobs[hh + 1]), M(0), out);
  ops.gemm(Trans::No, Trans::No, TN, H, 1, M(1), ones, ops.data(*blobs[hh + 2]), M(1), out);
  ops.tanh(TN * static_cast<int64_t>(H), out);
  ops.copy(TN * static_cast<int64_t>(H), out, ops.mutable_data(*top[0]));
  ops.template round_data<Ftype>(*top[0]);
  if (this->expose_hidden_) {
    ops.copy(NH, hidden + (T - 1) * NH, ops.mutable_data(*top[1]));
    ops.template round_data<Ftype>(*top[1]);
  }
}

template <typename Ftype, typename Btype>
template <class Ops>
void RNNLayer<Ftype, Btype>::BackwardWith(const Ops& ops, const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  this->CheckNoContGradient(propagate_down);
  const int T = this->T_, N = this->N_, H = this->H_, TN = T * N;
  const int64_t NH = static_cast<int64_t>(N) * H;
  auto& blobs = this->blobs_;
  const int hh = hh_index();
  const M* cont = ops.data(*bottom[1]);
  const M* ones = ops.data(this->ones_);
  const M* hidden = ops.data(hidden_);
  M* dout = ops.mutable_data(dout_);
  M* dhid = ops.mutable_data(dhid_);
  M* dh = ops.mutable_data(dh_);
  M* tmp = ops.mutable_data(tmp_);

  // Output transform: d(pre-activation of o), then W_ho, b_o and dh from o.
  ops.tanh_grad(TN * static_cast<int64_t>(H), ops.data(out_), ops.diff(*top[0]), nullptr, dout);
  if (this->param_propagate_down(hh + 1)) {
    ops.gemm(Trans::Yes, Trans::No, H, H, TN, M(1), dout, hidden, M(1), ops.mutable_diff(*blobs[hh + 1]));
    ops.template round_diff<Btype>(*blobs[hh + 1]);
  }
  if (this->param_propagate_down(hh + 2)) {
    ops.gemv(Trans::Yes, TN, H, M(1), dout, ones, M(1), ops.mutable_diff(*blobs[hh + 2]));
    ops.template round_diff<Btype>(*blobs[hh + 2]);
  }
  ops.gemm(Trans::No, Trans::No, TN, H, H, M(1), dout, ops.data(*blobs[hh + 1]), M(0), dhid);

  // Back through the steps: dhid_t becomes the gradient of h_t's pre-activation.
  if (this->expose_hidden_) {
    ops.copy(NH, ops.diff(*top[1]), dh);
  } else {
    ops.set(NH, M(0), dh);
  }
  const M* w_hh = ops.data(*blobs[hh]);
  for (int t = T - 1; t >= 0; --t) {
    ops.tanh_grad(NH, hidden + t * NH, dhid + t * NH, dh, dhid + t * NH);
    ops.gemm(Trans::No, Trans::No, N, H, H, M(1), dhid + t * NH, w_hh, M(0), tmp);
    ops.cont_scale(N, H, cont + static_cast<int64_t>(t) * N, tmp, dh);
  }

  if (this->param_propagate_down(0)) {
    ops.gemm(Trans::Yes, Trans::No, H, this->I_, TN, M(1), dhid, ops.data(*bottom[0]), M(1),
             ops.mutable_diff(*blobs[0]));
    ops.template round_diff<Btype>(*blobs[0]);
  }
  if (this->param_propagate_down(1)) {
    ops.gemv(Trans::Yes, TN, H, M(1), dhid, ones, M(1), ops.mutable_diff(*blobs[1]));
    ops.template round_diff<Btype>(*blobs[1]);
  }
  if (this->param_propagate_down(hh)) {
    ops.gemm(Trans::Yes, Trans::No, H, H, TN, M(1), dhid, ops.data(hc_), M(1), ops.mutable_diff(*blobs[hh]));
    ops.template round_diff<Btype>(*blobs[hh]);
  }
  if (this->static_input_) {
    M* ds = ops.mutable_data(static_);
    ops.copy(NH, dhid, ds);
    for (int t = 1; t < T; ++t) ops.axpy(NH, M(1), dhid + t * NH, ds);
    if (this->param_propagate_down(2)) {
      ops.gemm(Trans::Yes, Trans::No, H, this->I_static_, N, M(1), ds, ops.data(*bottom[2]), M(1),
               ops.mutable_diff(*blobs[2]));
      ops.template round_diff<Btype>(*blobs[2]);
    }
    if (propagate_down[2]) {
      ops.gemm(Trans::No, Trans::No, N, this->I_static_, H, M(1), ds, ops.data(*blobs[2]), M(0),
               ops.mutable_diff(*bottom[2]));
      ops.template round_diff<Btype>(*bottom[2]);
    }
  }
  if (propagate_down[0]) {
    ops.gemm(Trans::No, Trans::No, TN, this->I_, H, M(1), dhid, ops.data(*blobs[0]), M(0),
             ops.mutable_diff(*bottom[0]));
    ops.template round_diff<Btype>(*bottom[0]);
  }
  if (this->expose_hidden_ && propagate_down[this->first_state_bottom_]) {
    ops.copy(NH, dh, ops.mutable_diff(*bottom[this->first_state_bottom_]));
    ops.template round_diff<Btype>(*bottom[this->first_state_bottom_]);
  }
}

CORTADO_RECURRENT_PASSES(RNNLayer)

CORTADO_INSTANTIATE_LAYER(RNNLayer);

}  // namespace cortado
