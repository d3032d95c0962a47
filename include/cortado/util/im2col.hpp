#pragma once
// im2col / col2im for 2D convolution, (C, H, W) image <-> (C*KH*KW, OH*OW)
// column matrix, with padding, stride and dilation. Pure data movement, so it
// runs in the storage type T; col2im accumulates into the image in math_t<T>.
// OH = (H + 2*PH - (DH*(KH-1)+1)) / SH + 1, likewise OW.
//
// The _gpu twins (CUDA builds) take device pointers and enqueue on `stream`
// without waiting; col2im_gpu gathers every tap of a pixel in one thread
// (no atomics, deterministic) and sums in float (double for double).

#include "cortado/config.hpp"
#include "cortado/bfloat16.hpp"

struct CUstream_st;

namespace cortado {

template <typename T>
void im2col_cpu(const T* im, int channels, int height, int width, int kh, int kw, int ph, int pw,
                int sh, int sw, int dh, int dw, T* col);

/// im is overwritten (set to zero, then accumulated).
template <typename T>
void col2im_cpu(const T* col, int channels, int height, int width, int kh, int kw, int ph, int pw,
                int sh, int sw, int dh, int dw, T* im);

#ifdef CORTADO_USE_CUDA
template <typename T>
void im2col_gpu(const T* im, int channels, int height, int width, int kh, int kw, int ph, int pw,
                int sh, int sw, int dh, int dw, T* col, CUstream_st* stream);

/// im is overwritten.
template <typename T>
void col2im_gpu(const T* col, int channels, int height, int width, int kh, int kw, int ph, int pw,
                int sh, int sw, int dh, int dw, T* im, CUstream_st* stream);
#endif  // CORTADO_USE_CUDA

}  // namespace cortado
