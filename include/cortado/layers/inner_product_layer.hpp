#pragma once
// Fully connected layer, as Caffe's InnerProductLayer.
//
// The bottom is seen as a matrix X (M, K): M = product of the axes before
// `axis`, K = product of the axes from `axis` on. With W the weight,
//   Y (M, N) = X * W^T + 1 * bias^T   (transpose false: W stored (N, K))
//   Y (M, N) = X * W   + 1 * bias^T   (transpose true:  W stored (K, N))
// Backward: dX = dY * W (resp. dY * W^T), dW += dY^T * X (resp. X^T * dY),
// dbias += column sums of dY.
//
// Shapes:
//   bottom (d0, ..., d_{axis-1}, d_axis, ...): K = count(axis) is fixed at setup.
//   top    (d0, ..., d_{axis-1}, N).
//   blobs_[0] weight (N, K), or (K, N) with transpose; blobs_[1] bias (N) when
//   bias_term. Loaded or shared blobs are kept; a shape mismatch is a field error.
//
// inner_product_param fields:
//   num_output N (required, > 0)
//   bias_term (default true)
//   weight_filler, bias_filler (default constant 0)
//   axis (default 1; negative counts from the end)
//   transpose (default false)
//
// Types: Forward reads X and the parameters as Ftype and computes in
// math_t<Ftype>; Backward reads dY, W and X as math_t<Btype>, adds the
// parameter gradients to the Btype diffs (rounded once) and overwrites dX.
// In place: no.
//
// GPU: the three products are cuBLAS GEMMs in the storage type with compute
// type forward_math (forward) / backward_math (backward) for float16 storage
// (FLOAT unless FLOAT16 is asked for: FP32 accumulation on Tensor Cores),
// FLOAT for bfloat16, the storage type for float and double; dW is accumulated by the GEMM (beta = 1,
// one rounding). The bias add and the bias gradient (column sums of dY in
// float, double for double, added once) are kernels.

#include <cstdint>
#include <vector>

#include "cortado/layer.hpp"

struct CUstream_st;

namespace cortado {

template <typename Ftype, typename Btype>
class InnerProductLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "InnerProduct", BlobRules().Bottoms(1).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  int CheckedAxis(const Blob& bottom) const;

  int num_output_ = 0;  // N
  bool bias_term_ = true;
  bool transpose_ = false;
  int axis_ = 1;
  int k_ = 0;  // K, fixed at setup
  int m_ = 0;  // M, from the current bottom
  Type forward_math_ = FLOAT, backward_math_ = FLOAT;  // GPU GEMM compute types
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
// Launchers of inner_product_layer.cu (device pointers, enqueued on `stream`).

/// y (rows, cols) += b (cols) on every row.
template <typename T>
void ip_add_bias(int64_t rows, int cols, const T* b, T* y, CUstream_st* stream);
/// db[j] += sum over rows of dy (rows, cols)[:, j], summed in float (double
/// for double) and rounded once.
template <typename T>
void ip_bias_grad(int64_t rows, int cols, const T* dy, T* db, CUstream_st* stream);
}  // namespace gpu
#endif  // CORTADO_USE_CUDA

}  // namespace cortado
