#pragma once
// Im2col: the im2col column matrix of each image, as Caffe's Im2colLayer.
//
//   top[n, (c*KH + ky)*KW + kx, y, x] =
//       bottom[n, c, y*SH - PH + ky*DH, x*SW - PW + kx*DW]   (0 outside the image);
//   backward is its adjoint, col2im: each bottom pixel's diff is the sum of
//   the top diffs of every (tap, position) that read it.
//
// Bottoms: 1, (N, C, H, W). Tops: 1, (N, C*KH*KW, OH, OW),
//   OH = (H + 2*PH - (DH*(KH-1)+1)) / SH + 1, likewise OW.
// convolution_param fields (2D only; repeated fields take 1 value for both
// axes or 2 values for (h, w)):
//   kernel_size (repeated) or kernel_h + kernel_w: required, > 0
//   pad (repeated, default 0) or pad_h / pad_w
//   stride (repeated, default 1) or stride_h + stride_w; > 0
//   dilation (repeated, default 1); > 0
//   axis (default 1): only 1 is implemented
//   num_output, bias_term, group, weight_filler, bias_filler, engine,
//   force_nd_im2col: accepted and ignored (Caffe's Im2col ignores them too;
//   the result of a 2D im2col does not depend on force_nd_im2col).
// The dilated kernel must fit the padded input. In place: no.
//
// Types: forward is pure data movement in Ftype; backward (col2im) sums the
// overlapping taps of each pixel in math_t<Btype> (float for float16 and
// bfloat16) and stores once in Btype (overwritten).
// Window, checks and output shape: conv_geometry.hpp, as Convolution's.
// GPU: the shared im2col_gpu / col2im_gpu (util/im2col.hpp), one launch per
// image; col2im gathers every tap of a pixel in one thread (no atomics). No
// kernel of its own.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"
#include "cortado/layers/conv_geometry.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class Im2colLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Im2col", BlobRules().Bottoms(1).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  ConvWindow win_;
  int num_ = 0;
  ConvImage image_shape_{};  // one bottom image (C, H, W) and the window
  int64_t image_ = 0, col_ = 0;  // values per image in the bottom and in the top
};

}  // namespace cortado
