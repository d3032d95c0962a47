#pragma once
// InfogainLoss (BVLC Caffe's current form): softmax over `axis`, then a
// loss weighted by an infogain matrix H (K x K, K the number of classes).
//
//   p = softmax(x) along axis (kept in math_t<Ftype>)
//   loss = -sum_{valid n} sum_k H[label_n, k] log(max(p[n, k], FLT_MIN)) / normalizer
//   backward: dx[n, k] = w / normalizer * (p[n, k] * sum_j H[label_n, j] - H[label_n, k]),
//             0 where the label is ignored; w the loss top's diff.
// With H the identity this is SoftmaxWithLoss.
//
// Bottoms: 2 or 3. bottom[0] x: (outer, K, inner) around axis; bottom[1]
// labels: outer * inner values, read as float, integers in [0, K) or
// ignore_label; optional bottom[2] H: K * K values (read as float; no
// gradient). Without bottom[2], H is read once at set-up from
// infogain_loss_param.source.
// Tops: 1 or 2. top[0] the loss, a scalar (shape ()), written as float;
// optional top[1] the probabilities (bottom[0]'s shape, Ftype).
// Fields:
//   infogain_loss_param.source: path of a BlobProto (binaryproto) holding H
//     (K * K values, data or double_data); required without bottom[2].
//   infogain_loss_param.axis (default 1)
//   loss_param.ignore_label, loss_param.normalization (default VALID),
//   loss_param.normalize: as for SoftmaxWithLoss.
//   loss_weight: default 1 for top[0], 0 for top[1].
// Errors (FieldError): no source and no third bottom, an unreadable source
// ("infogain_loss_param.source", naming the path), H of the wrong count, a
// bad axis, a label count mismatch or a label that is not a class index;
// propagate_down to the labels or H.
// In place: no.
// Family: SoftmaxLossBase (loss_layer.hpp) holds the axis, the label checks,
// the normalization, the loss weight and the probabilities.
// GPU (infogain_loss_layer.cu): H (from bottom[2], or the file's matrix
// uploaded once) and its row sums are formed on the device in math_t; the
// probabilities are kept on the device in math_t (gpu::softmax_forward); one
// thread per position sums its H-weighted -log p terms in math_t, blocks sum
// the positions and the valid count (double), and one block writes
// loss / normalizer to top[0] and the normalizer to device memory, all
// without leaving the device. The backward reads the normalizer and the loss
// weight on the device and rounds like the CPU path. Labels that are not
// class indices cannot throw inside a kernel: the first one is recorded in
// pinned host memory, the position counts as ignored, and the layer's next
// Backward or Forward (after the Net has synchronized) raises the same
// FieldError as the CPU path.

#include <string>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/layers/loss_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class InfogainLossLayer : public SoftmaxLossBase<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(SoftmaxLossBase, "InfogainLoss", BlobRules().Bottoms(2, 3).Tops(1, 2).AutoTops().ForcedBackwardOnlyTo(0))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  using M = math_t<Ftype>;
  /// H as M values: from bottom[2] when present, else the matrix read at set-up.
  const M* Matrix(const BlobVec& bottom);
  /// The errors of propagate_down to the labels or the matrix.
  void CheckPropagateDown(const std::vector<bool>& propagate_down) const;

  std::vector<M> file_h_;   // H from the source file (K * K)
  std::vector<M> h_;        // H of the last forward
  std::vector<M> row_sum_;  // (K) sum_j H[k, j]
  // GPU path.
  Tensor file_h_gpu_{type_of<M>()};   // (K * K) H from the source file, uploaded on first use
  Tensor h_gpu_{type_of<M>()};        // (K * K) H of the last forward
  Tensor row_sum_gpu_{type_of<M>()};  // (K)
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// h = M(src) (k * k values) and row_sum[r] = sum_c h[r, c] summed in M in column order, as the CPU path
/// sums it. src is the float matrix bottom or the file's matrix already in M.
template <typename S, typename M>
void infogain_matrix(int k, const S* src, M* h, M* row_sum, CUstream_st* stream);
/// Per position p of outer * inner (labels read as float): the loss -sum_c h[label, c] log(max(prob[p, c],
/// FLT_MIN)) in M, summed over the positions in M; positions whose label is ignore_label or not a class
/// index count as ignored, and the first bad label is recorded in *error (pinned, device-mapped) as
/// (p << 32) | float bits, by atomicMin. Then top[0] = float(loss / M(normalizer)), normalizer =
/// max(1, fixed_normalizer), or max(1, valid count) when fixed_normalizer < 0; *normalizer_out =
/// normalizer. partial and valid are scratch of cuda::blocks_for(outer * inner) values each.
template <typename M>
void infogain_loss_forward(int outer, int channels, int inner, const M* prob, const float* label,
                           bool has_ignore_label, int ignore_label, const M* h, double fixed_normalizer, M* partial,
                           double* valid, float* top, double* normalizer_out, unsigned long long* error,
                           CUstream_st* stream);
/// dx[n, c] = B(math_t<B>(prob * row_sum[label] - h[label, c]) * s), s = math_t<B>(*weight / *normalizer)
/// (both double); 0 at ignored or bad labels.
template <typename M, typename B>
void infogain_loss_backward(int outer, int channels, int inner, const M* prob, const float* label,
                            bool has_ignore_label, int ignore_label, const M* h, const M* row_sum,
                            const double* weight, const double* normalizer, B* dx, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
