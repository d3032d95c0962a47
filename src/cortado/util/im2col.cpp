#include "cortado/util/im2col.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace cortado {

namespace {

// Output extent along one axis; the caller validated that the dilated kernel
// fits the padded input, so this is >= 1.
inline int out_extent(int in, int k, int p, int s, int d) {
  return (in + 2 * p - (d * (k - 1) + 1)) / s + 1;
}

// Walks the rows of the column matrix, one per (channel, kernel tap, output
// row), and calls f(col_row, image_row, x_lo, x_hi, offset): col_row is the
// row's first index in the column matrix (ow values), image_row the index of
// image row iy in the image or -1 when iy is in the padding, and output
// columns x in [x_lo, x_hi) read image column x * sw + offset, which lies
// inside the row; the others are padding. Shared by im2col and col2im so the
// two are adjoint by construction; a row at a time, so that the inner loops
// are plain copies (contiguous when sw == 1) without a test per value.
template <typename F>
void for_each_row(int channels, int height, int width, int kh, int kw, int ph, int pw, int sh, int sw, int dh, int dw,
                  F&& f) {
  const int oh = out_extent(height, kh, ph, sh, dh);
  const int ow = out_extent(width, kw, pw, sw, dw);
  int64_t col = 0;
  for (int c = 0; c < channels; ++c) {
    const int64_t plane = static_cast<int64_t>(c) * height * width;
    for (int ky = 0; ky < kh; ++ky) {
      for (int kx = 0; kx < kw; ++kx) {
        // x * sw + offset in [0, width)  <=>  x in [x_lo, x_hi)
        const int offset = kx * dw - pw;
        const int x_lo = std::min(ow, offset >= 0 ? 0 : (-offset + sw - 1) / sw);
        const int x_hi = std::max(x_lo, std::min(ow, width - offset <= 0 ? 0 : (width - offset + sw - 1) / sw));
        for (int y = 0; y < oh; ++y, col += ow) {
          const int iy = y * sh - ph + ky * dh;
          const bool inside = iy >= 0 && iy < height;
          f(col, inside ? plane + static_cast<int64_t>(iy) * width : int64_t{-1}, x_lo, x_hi, offset);
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void im2col_cpu(const T* im, int channels, int height, int width, int kh, int kw, int ph, int pw,
                int sh, int sw, int dh, int dw, T* col) {
  const int ow = out_extent(width, kw, pw, sw, dw);
  for_each_row(channels, height, width, kh, kw, ph, pw, sh, sw, dh, dw,
               [&](int64_t ci, int64_t row, int x_lo, int x_hi, int offset) {
                 T* out = col + ci;
                 if (row < 0) {
                   std::fill(out, out + ow, T(0.0f));
                   return;
                 }
                 std::fill(out, out + x_lo, T(0.0f));
                 const T* in = im + row + offset;
                 if (sw == 1) {
                   std::copy(in + x_lo, in + x_hi, out + x_lo);
                 } else {
                   for (int x = x_lo; x < x_hi; ++x) out[x] = in[static_cast<int64_t>(x) * sw];
                 }
                 std::fill(out + x_hi, out + ow, T(0.0f));
               });
}

template <typename T>
void col2im_cpu(const T* col, int channels, int height, int width, int kh, int kw, int ph, int pw,
                int sh, int sw, int dh, int dw, T* im) {
  using M = math_t<T>;
  const int64_t n = static_cast<int64_t>(channels) * height * width;
  // Overlapping windows sum several taps into one pixel: 16-bit types
  // accumulate in the math type and round once, never in half.
  std::vector<M> scratch(std::is_same_v<T, M> ? 0 : static_cast<size_t>(n));
  M* acc = nullptr;
  if constexpr (std::is_same_v<T, M>) {
    acc = im;
  } else {
    acc = scratch.data();
  }
  std::fill(acc, acc + n, M(0));
  for_each_row(channels, height, width, kh, kw, ph, pw, sh, sw, dh, dw,
               [&](int64_t ci, int64_t row, int x_lo, int x_hi, int offset) {
                 if (row < 0) return;
                 const T* in = col + ci;
                 M* out = acc + row + offset;
                 for (int x = x_lo; x < x_hi; ++x) out[static_cast<int64_t>(x) * sw] += static_cast<M>(in[x]);
               });
  if constexpr (!std::is_same_v<T, M>) {
    for (int64_t i = 0; i < n; ++i) im[i] = T(acc[i]);
  }
}

#define CORTADO_INSTANTIATE_IM2COL(T)                                                           \
  template void im2col_cpu<T>(const T*, int, int, int, int, int, int, int, int, int, int, int,  \
                              T*);                                                              \
  template void col2im_cpu<T>(const T*, int, int, int, int, int, int, int, int, int, int, int,  \
                              T*)
CORTADO_INSTANTIATE_IM2COL(double);
CORTADO_INSTANTIATE_IM2COL(float);
CORTADO_INSTANTIATE_IM2COL(float16);
CORTADO_INSTANTIATE_IM2COL(bfloat16);
#undef CORTADO_INSTANTIATE_IM2COL

}  // namespace cortado
