#pragma once
// MultinomialLogisticLoss: negative log-likelihood of given probabilities.
//
//   loss = -sum_n log(max(p[n, label_n], 1e-20)) / N   (math_t<Ftype>)
//   backward: dp[n, label_n] = -w / N / max(p[n, label_n], 1e-20), 0
//             elsewhere; w the loss top's diff.
//
// Bottoms: 2. bottom[0] p: (N, ...) probabilities, D = count / N per sample;
// bottom[1] labels: N values, read as float, each an integer in [0, D).
// Tops: 1, the loss, a scalar (shape ()), written as float.
// Fields: loss_weight (default 1: a loss layer).
// Errors: a label that is not a class index (FieldError "bottom[1]"); a
// label count other than N; propagate_down to the labels.
// In place: no. Family: LossLayer (loss_layer.hpp).
// GPU (multinomial_logistic_loss_layer.cu): one kernel sums -log p of the
// labelled entries in math_t per block; a second adds the block sums and
// writes the loss to top[0], all without leaving the device. The backward
// writes every element of dp (zero off the label) and reads the loss weight
// on the device. A label that is not a class index cannot throw inside a
// kernel: the first one is recorded in pinned host memory, its sample
// contributes nothing, and the layer's next Backward or Forward (after the
// Net has synchronized) raises the same FieldError as the CPU path.

#include <vector>

#include "cortado/config.hpp"
#include "cortado/layers/loss_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class MultinomialLogisticLossLayer : public LossLayer<Ftype, Btype> {
 public:
  CORTADO_LAYER_TYPE(LossLayer, "MultinomialLogisticLoss")
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  CORTADO_LAYER_PASSES

 private:
  using M = math_t<Ftype>;
  int num_ = 1, dim_ = 0;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// top[0] = float(-sum_n log(max(p[n, label_n], 1e-20)) / A(max(1, num))), summed in A = math_t<T>. A label
/// (read as float) that is not a class index contributes nothing and is recorded in *error (pinned,
/// device-mapped) as (n << 32) | float bits, by atomicMin. partial is scratch of cuda::blocks_for(num) values.
template <typename T>
void multinomial_logistic_loss_forward(int num, int dim, const T* p, const float* label, math_t<T>* partial,
                                       float* top, unsigned long long* error, CUstream_st* stream);
/// dp[n, label_n] = B(-s / max(p, 1e-20)), s = math_t<B>(*weight / num) (weight read in double); every
/// other element of dp, and the samples whose label is not a class index, 0.
template <typename T, typename B>
void multinomial_logistic_loss_backward(int num, int dim, const T* p, const float* label, const double* weight,
                                        B* dp, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
