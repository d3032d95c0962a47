#pragma once
// Deconvolution (transposed 2D convolution), as Caffe's DeconvolutionLayer:
// the forward of this layer is the backward-data pass of a Convolution whose
// input is this layer's top and whose output is this layer's bottom.
//
// Math, per image n and group g (Cg = C/group, Og = num_output/group):
//   col_g (Og*KH*KW, H*W) = W_g^T x_g      W_g = weight[g*Cg:(g+1)*Cg] as (Cg, Og*KH*KW)
//   top_n = col2im(col) (scatter-add of every tap) + bias[o]
// Backward: col = im2col(dtop_n); dx_g = W_g col_g;
//   dW_g += x_g col_g^T summed over the batch; dbias[o] += sum of dtop over (n, y, x).
//
// Shapes:
//   bottom[i] (N, C, H, W), every bottom the same shape; top[i] (N, num_output,
//   OH, OW), one per bottom, OH = SH*(H-1) + DH*(KH-1) + 1 - 2*PH, likewise OW
//   (must be positive).
//   blobs_[0] weight (C, num_output/group, KH, KW); blobs_[1] bias (num_output)
//   when bias_term. Loaded or shared blobs are kept if their shapes match.
// Fields: convolution_param, read and validated exactly as Convolution's
// (num_output, bias_term, kernel_size / kernel_h+kernel_w, pad, stride,
// dilation, group dividing C and num_output, weight_filler, bias_filler, axis 1
// only). In place: no.
//
// Types: every pass reads its operands as math_t (float for float16, double
// for double), runs im2col/col2im and GEMM in that type and rounds once on the
// store; the weight gradient of the batch is summed in math_t and added once to
// the parameter diff.
// GPU: the same algorithm with im2col_gpu / col2im_gpu and cuBLAS GEMM in
// math_t (FP32 compute for float16 storage), scratch from the caching device
// allocator; bias add and bias gradient are Bias's kernels.
//
// Implementation: a ConvolutionLayer with transposed_ set: set-up, checks,
// parameter blobs and reshape are Convolution's (conv_geometry.hpp gives the
// output shape); both passes are its own, through the same per-group GEMMs
// (ConvGemm) with the roles of bottom and top exchanged.

#include <vector>

#include "cortado/layers/convolution_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class DeconvolutionLayer : public ConvolutionLayer<Ftype, Btype> {
 public:
  explicit DeconvolutionLayer(const LayerParameter& param) : ConvolutionLayer<Ftype, Btype>(param) {
    this->transposed_ = true;
  }
  const char* type() const override { return "Deconvolution"; }

 protected:
  CORTADO_LAYER_PASSES
};

}  // namespace cortado
