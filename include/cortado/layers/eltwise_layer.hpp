#pragma once
// Eltwise: combines bottoms of one shape element by element.
//
//   SUM:  y = sum_i coeff_i * x_i;   dx_i = coeff_i * dy
//   PROD: y = prod_i x_i;            dx_i = dy * prod_{j != i} x_j
//         (stable_prod_grad true, the default: the product is recomputed
//          without x_i; false: dx_i = dy * y / x_i, cheaper but Inf/NaN at
//          x_i = 0)
//   MAX:  y = max_i x_i;             dx_i = dy where bottom i gave the max
//         (the first bottom wins ties), else 0. The argmax is kept by the
//         layer from the last forward.
//
// Bottoms: 2 or more, all the same shape. Tops: 1, that shape.
// Fields: eltwise_param.operation (default SUM); eltwise_param.coeff (SUM
// only; none = all 1, else one per bottom); eltwise_param.stable_prod_grad
// (default true).
// In place: no.
// Types: forward reads Ftype and accumulates in math_t; backward reads dy,
// the bottoms (and y for PROD) as Btype and computes in math_t.
// GPU: one thread per element (eltwise_layer.cu) with the CPU path's
// operations in the same order, each rounded on its own (no fused
// multiply-add), so GPU and CPU agree exactly; MAX keeps its argmax on the
// device. At most 64 bottoms on the GPU.
// Fusion (layer_fusion.hpp; the Net decides, NetParameter.fuse_layers): a SUM
// can take over a ReLU (negative_slope 0) that follows it in place on its
// top: y = max(0, stored(sum)) and dx_i = coeff_i * (y > 0 ? dy : 0), the test
// on y read as Btype, as ReLU's own passes compute them (the CPU result is
// the unfused one bit for bit). The fused GPU kernels move 16 bytes per load
// where the count and the pointers allow. A SUM of two bottoms with
// coefficients 1 can also be a tail (kResidualAdd): the BatchNorm chain that
// computes one of its bottoms right before it adds the other into its top
// (batch_norm_layer.hpp); its passes then do nothing.

#include <memory>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"
#include "cortado/layers/layer_fusion.hpp"
#include "cortado/synced_memory.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class EltwiseLayer : public Layer<Ftype, Btype>, public FusableLayer {
 public:
  CORTADO_LAYER_HEAD(Layer, "Eltwise", BlobRules().MinBottoms(2).Tops(1))
  /// SUM takes a ReLU.
  bool AbsorbTail(FusionRole role, LayerBase* tail) override;
  /// As a tail: a SUM of two bottoms with coefficients 1 (and no fused ReLU
  /// of its own) is a residual add that a BatchNorm chain can take.
  FusionRole fusion_role() const override;
  bool fused_relu() const { return relu_; }

  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  EltwiseParameter::EltwiseOp op_ = EltwiseParameter::SUM;
  std::vector<double> coeff_;  // one per bottom
  bool stable_prod_grad_ = true;
  bool relu_ = false;          // a fused ReLU (SUM only)
  std::vector<int> argmax_;    // MAX: which bottom gave each output
  std::unique_ptr<SyncedMemory> argmax_gpu_;  // MAX on the GPU: the same, on the device
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// Forward over `count` bottoms (device pointers): op is EltwiseParameter's
/// SUM / PROD / MAX; coeff (host, count values) for SUM; argmax (device, n
/// ints) is written for MAX. count <= 64.
template <typename T>
void eltwise_forward(int64_t n, int op, const T* const* x, int count, const double* coeff, T* y, int* argmax,
                     CUstream_st* stream);
/// Backward to bottom `which`: x are the bottoms as Btype (PROD), y the top
/// (PROD without stable_prod_grad), argmax from the forward (MAX).
template <typename T>
void eltwise_backward(int64_t n, int op, int which, const T* const* x, int count, double coeff, bool stable_prod_grad,
                      const T* y, const T* dy, const int* argmax, T* dx, CUstream_st* stream);
/// SUM then ReLU: y = max(0, stored(sum_i coeff_i * x_i)) (coeff: host).
template <typename T>
void eltwise_sum_relu_forward(int64_t n, const T* const* x, int count, const double* coeff, T* y,
                              CUstream_st* stream);
/// dx[i] = coeff[i] * (stored_T(y) > 0 ? dy : 0) for each of the `count`
/// bottoms whose dx[i] is not null (coeff, dx: host arrays), y and dy read
/// once per two bottoms; y is the top's data in the forward's type X.
template <typename T, typename X>
void eltwise_sum_relu_backward(int64_t n, int count, const double* coeff, const X* y, const T* dy, T* const* dx,
                               CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
