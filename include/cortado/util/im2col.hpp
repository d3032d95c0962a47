#pragma once
// im2col / col2im for 2D convolution, (C, H, W) image <-> (C*KH*KW, OH*OW)
// column matrix, with padding, stride and dilation. Pure data movement, so it
// runs in the storage type T; col2im accumulates into the image in math_t<T>.
// OH = (H + 2*PH - (DH*(KH-1)+1)) / SH + 1, likewise OW.

#include "cortado/float16.hpp"

namespace cortado {

template <typename T>
void im2col_cpu(const T* im, int channels, int height, int width, int kh, int kw, int ph, int pw,
                int sh, int sw, int dh, int dw, T* col);

/// im is overwritten (set to zero, then accumulated).
template <typename T>
void col2im_cpu(const T* col, int channels, int height, int width, int kh, int kw, int ph, int pw,
                int sh, int sw, int dh, int dw, T* im);

}  // namespace cortado
