#pragma once
// EuclideanLoss: half the mean squared distance between two blobs.
//
//   d = a - b (elementwise, kept in math_t<Ftype>)
//   loss = sum(d^2) / (2 N), N = a.shape(0) (the batch), summed in math_t
//   backward: da = w / N * d, db = -w / N * d, w the loss top's diff.
//
// Bottoms: 2, same count (shapes may differ, e.g. (N, C) and (N, C, 1, 1)).
// Tops: 1, the loss, a scalar (shape ()), written as float.
// Fields: loss_weight (default 1: a loss layer). No other parameters.
// Errors: bottoms of different counts (FieldError "bottom[1]").
// Both bottoms may receive gradients. In place: no. Family: LossLayer
// (loss_layer.hpp).
// GPU (euclidean_loss_layer.cu): one kernel computes d (kept on the device in
// math_t) and per-block partial sums of d^2 in math_t, a second sums the
// partials and writes the loss to top[0], without leaving the device. The
// backward reads the loss weight on the device and rounds like the CPU.

#include <vector>

#include "cortado/config.hpp"
#include "cortado/layers/loss_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class EuclideanLossLayer : public LossLayer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(LossLayer, "EuclideanLoss", BlobRules().Bottoms(2).Tops(1))
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  CORTADO_LAYER_PASSES

 private:
  using M = math_t<Ftype>;
  std::vector<M> diff_;  // a - b
  int num_ = 1;
  // GPU path.
  Tensor diff_gpu_{type_of<M>()};     // a - b in M
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// d = a - b in math_t<T> into diff (n values), and top[0] = float(sum(d^2) / A(divisor)) summed in
/// A = math_t<T>; partial is scratch of cuda::blocks_for(n) values.
template <typename T>
void euclidean_loss_forward(int64_t n, const T* a, const T* b, math_t<T>* diff, math_t<T>* partial, double divisor,
                            float* top, CUstream_st* stream);
/// da = B(w / num * d), db = B(-w / num * d) (either may be null), w = *weight read in double, the scale
/// rounded to math_t<B> first, as the CPU path does.
template <typename M, typename B>
void euclidean_loss_backward(int64_t n, const M* diff, const double* weight, int num, B* da, B* db,
                             CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
