// im2col / col2im on the GPU (the twins of im2col.cpp).
//
// im2col: one thread per element of the column matrix (C*KH*KW, OH*OW),
// grid-stride, 64-bit indexes. Consecutive threads take consecutive output
// columns x, so the stores are coalesced and, for stride 1, so are the loads.
// Pure data movement in the storage type.
//
// col2im: one thread per image element (c, y, x). It gathers the KH*KW taps
// that read that pixel (tap (ky, kx) read it from output (oy, ox) when
// y = oy*SH - PH + ky*DH, likewise x) and sums them in float (double for
// double), then stores once: no atomics, the same result run after run.
#include "cortado/storage_types.hpp"
#include "cortado/util/cuda.hpp"
#include "cortado/util/im2col.hpp"
#include "device_types.cuh"

namespace cortado {

namespace {

using kernels::dev_t;
using kernels::load;
using kernels::store;

struct Geometry {
  int height, width, kh, kw, ph, pw, sh, sw, dh, dw, oh, ow;
};

// col (C*KH*KW, OH*OW): row (c, ky, kx), column (oy, ox).
template <typename T>
__global__ void im2col_kernel(int64_t n, const T* im, Geometry g, T* col) {
  CORTADO_KERNEL_LOOP(i, n) {
    const int ox = static_cast<int>(i % g.ow);
    int64_t r = i / g.ow;
    const int oy = static_cast<int>(r % g.oh);
    r /= g.oh;
    const int kx = static_cast<int>(r % g.kw);
    r /= g.kw;
    const int ky = static_cast<int>(r % g.kh);
    const int64_t c = r / g.kh;
    const int iy = oy * g.sh - g.ph + ky * g.dh;
    const int ix = ox * g.sw - g.pw + kx * g.dw;
    const bool inside = iy >= 0 && iy < g.height && ix >= 0 && ix < g.width;
    using A = kernels::dmath_t<T>;
    store(col, i, inside ? load(im, (c * g.height + iy) * g.width + ix) : A(0));
  }
}

// Whether image coordinate y is read by tap k (start = y + pad - k*dilation
// must be a multiple of the stride landing on an output in [0, out)).
__device__ __forceinline__ bool tap_output(int y, int k, int pad, int stride, int dilation, int out, int* o) {
  const int start = y + pad - k * dilation;
  if (start < 0 || start % stride != 0) return false;
  *o = start / stride;
  return *o < out;
}

template <typename T>
__global__ void col2im_kernel(int64_t n, const T* col, Geometry g, T* im) {
  using A = kernels::dmath_t<T>;
  const int64_t ohw = static_cast<int64_t>(g.oh) * g.ow;
  CORTADO_KERNEL_LOOP(i, n) {
    const int x = static_cast<int>(i % g.width);
    const int y = static_cast<int>((i / g.width) % g.height);
    const int64_t c = i / (static_cast<int64_t>(g.width) * g.height);
    A sum = 0;
    for (int ky = 0; ky < g.kh; ++ky) {
      int oy;
      if (!tap_output(y, ky, g.ph, g.sh, g.dh, g.oh, &oy)) continue;
      for (int kx = 0; kx < g.kw; ++kx) {
        int ox;
        if (!tap_output(x, kx, g.pw, g.sw, g.dw, g.ow, &ox)) continue;
        const int64_t row = (c * g.kh + ky) * g.kw + kx;
        sum += load(col, row * ohw + static_cast<int64_t>(oy) * g.ow + ox);
      }
    }
    store(im, i, sum);
  }
}

Geometry geometry(int height, int width, int kh, int kw, int ph, int pw, int sh, int sw, int dh, int dw) {
  Geometry g{height, width, kh, kw, ph, pw, sh, sw, dh, dw, 0, 0};
  g.oh = (height + 2 * ph - (dh * (kh - 1) + 1)) / sh + 1;
  g.ow = (width + 2 * pw - (dw * (kw - 1) + 1)) / sw + 1;
  return g;
}

}  // namespace

template <typename T>
void im2col_gpu(const T* im, int channels, int height, int width, int kh, int kw, int ph, int pw, int sh, int sw,
                int dh, int dw, T* col, CUstream_st* stream) {
  const Geometry g = geometry(height, width, kh, kw, ph, pw, sh, sw, dh, dw);
  const int64_t n = static_cast<int64_t>(channels) * kh * kw * g.oh * g.ow;
  if (n <= 0) return;
  im2col_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
      n, reinterpret_cast<const dev_t<T>*>(im), g, reinterpret_cast<dev_t<T>*>(col));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void col2im_gpu(const T* col, int channels, int height, int width, int kh, int kw, int ph, int pw, int sh, int sw,
                int dh, int dw, T* im, CUstream_st* stream) {
  const Geometry g = geometry(height, width, kh, kw, ph, pw, sh, sw, dh, dw);
  const int64_t n = static_cast<int64_t>(channels) * height * width;
  if (n <= 0) return;
  col2im_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
      n, reinterpret_cast<const dev_t<T>*>(col), g, reinterpret_cast<dev_t<T>*>(im));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_IM2COL_GPU(T)                                                                     \
  template void im2col_gpu<T>(const T*, int, int, int, int, int, int, int, int, int, int, int, T*, CUstream_st*); \
  template void col2im_gpu<T>(const T*, int, int, int, int, int, int, int, int, int, int, int, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_IM2COL_GPU)
#undef CORTADO_INSTANTIATE_IM2COL_GPU

}  // namespace cortado
