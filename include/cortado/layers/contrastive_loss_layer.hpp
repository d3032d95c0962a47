#pragma once
// ContrastiveLoss (Hadsell, Chopra, LeCun 2006) over N pairs of C-vectors.
//
//   d_n = a_n - b_n, D_n = |d_n|^2 (math_t<Ftype>)
//   similar pair (y_n != 0): l_n = D_n
//   dissimilar pair: l_n = max(margin - sqrt(D_n), 0)^2, or with
//     legacy_version max(margin - D_n, 0)
//   loss = sum_n l_n / (2 N)
//   backward (alpha = +-w / N for a / b, w the loss top's diff):
//     similar: alpha * d_n; dissimilar: legacy -alpha * d_n where
//     margin - D_n > 0; else -alpha * (margin - sqrt(D_n)) / (sqrt(D_n) + 1e-4)
//     * d_n where margin - sqrt(D_n) > 0; 0 otherwise.
//
// Bottoms: 3. a and b: (N, C, ...) of the same shape; y: N values read as
// float (the similarity flag, truncated to an integer; non-zero = similar).
// Tops: 1, the loss, a scalar (shape ()), written as float.
// Fields: contrastive_loss_param.margin (default 1.0),
//   contrastive_loss_param.legacy_version (default false); loss_weight
//   (default 1: a loss layer).
// Errors: a and b of different shapes, y count other than N (FieldError
// "bottom[1]" / "bottom[2]"); propagate_down to y.
// In place: no. Family: LossLayer (loss_layer.hpp).
// GPU (contrastive_loss_layer.cu): one thread per pair computes d and D_n in
// the CPU path's order (both kept on the device in math_t) and its l_n; the
// pairs' losses are summed in math_t per block, then across blocks, and the
// loss is written to top[0] without leaving the device. The backward reads
// the loss weight on the device and rounds like the CPU path.

#include <vector>

#include "cortado/config.hpp"
#include "cortado/layers/loss_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class ContrastiveLossLayer : public LossLayer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(LossLayer, "ContrastiveLoss", BlobRules().Bottoms(3).Tops(1).NoForcedBackwardTo(2))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  using M = math_t<Ftype>;
  double margin_ = 1;
  bool legacy_ = false;
  int num_ = 1, dim_ = 0;
  std::vector<M> diff_;     // a - b
  std::vector<M> dist_sq_;  // (N)
  // GPU path.
  Tensor diff_gpu_{type_of<M>()};     // (N, C) a - b in M
  Tensor dist_sq_gpu_{type_of<M>()};  // (N) D_n in M
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// d = a - b into diff (num * dim values) and D_n = |d_n|^2 into dist_sq (num), both in math_t<T>, and
/// top[0] = float(sum_n l_n / A(2 max(1, num))), l_n as in the class comment, in A = math_t<T>; y is read
/// as float. partial is scratch of cuda::blocks_for(num) values.
template <typename T>
void contrastive_loss_forward(int num, int dim, const T* a, const T* b, const float* y, double margin, bool legacy,
                              math_t<T>* diff, math_t<T>* dist_sq, math_t<T>* partial, float* top,
                              CUstream_st* stream);
/// da and db (either may be null) as in the class comment, with alpha = math_t<B>(+-*weight / num)
/// (weight read in double) and every product in math_t<B>.
template <typename M, typename B>
void contrastive_loss_backward(int num, int dim, const M* diff, const M* dist_sq, const float* y, double margin,
                               bool legacy, const double* weight, B* da, B* db, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
