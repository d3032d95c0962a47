#pragma once
// HingeLoss: one-vs-all hinge loss for N samples of D class scores.
//
//   m[n, d] = max(0, 1 - s x[n, d]), s = +1 when d == label_n, else -1
//   L1 (default): loss = sum m / N;   L2: loss = sum m^2 / N   (math_t<Ftype>)
//   backward: dx[n, d] = -s * w / N * (L1: [m > 0];  L2: 2 m), w the loss
//             top's diff.
//
// Bottoms: 2. bottom[0] x: (N, ...), D = count / N; bottom[1] labels: N
// values, read as float, each an integer in [0, D).
// Tops: 1, the loss, a scalar (shape ()), written as float.
// Fields: hinge_loss_param.norm: L1 (default) or L2; loss_weight (default 1).
// Errors: a label that is not a class index (FieldError "bottom[1]" naming the
// value and D); a label count other than N; propagate_down to the labels.
// In place: no. Family: LossLayer (loss_layer.hpp).
// GPU (hinge_loss_layer.cu): one kernel computes the margins (kept on the
// device in math_t) and per-block partial sums of m or m^2 in math_t; a
// second adds the block sums and writes the loss to top[0], all without
// leaving the device. The backward reads the loss weight on the device.
// A label that is not a class index cannot throw inside a kernel: the first
// one is recorded in pinned host memory, its sample contributes nothing, and
// the layer's next Backward or Forward (after the Net has synchronized)
// raises the same FieldError as the CPU path.

#include <vector>

#include "cortado/config.hpp"
#include "cortado/layers/loss_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class HingeLossLayer : public LossLayer<Ftype, Btype> {
 public:
  CORTADO_LAYER_TYPE(LossLayer, "HingeLoss")
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  using M = math_t<Ftype>;
  bool l2_ = false;
  int num_ = 1, dim_ = 0;
  std::vector<M> margin_;  // m
  // GPU path.
  Tensor margin_gpu_{type_of<M>()};   // (N, D) m in M
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// m[n, d] = max(0, 1 - s x[n, d]) into margin (num * dim values, math_t<T>), and top[0] =
/// float(sum (m or m^2) / A(max(1, num))) summed in A = math_t<T>. A label (read as float) that is not a
/// class index gives its sample m = 0 and is recorded in *error (pinned, device-mapped) as
/// (n << 32) | float bits, by atomicMin. partial is scratch of cuda::blocks_for(num * dim) values.
template <typename T>
void hinge_loss_forward(int num, int dim, const T* x, const float* label, bool l2, math_t<T>* margin,
                        math_t<T>* partial, float* top, unsigned long long* error, CUstream_st* stream);
/// dx[n, d] = B(+-s * g), s = math_t<B>(*weight / num) (weight read in double), - at the label, g = 2 m
/// (L2) or [m > 0] (L1); 0 for a sample whose label is not a class index.
template <typename M, typename B>
void hinge_loss_backward(int num, int dim, const M* margin, const float* label, bool l2, const double* weight,
                         B* dx, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
