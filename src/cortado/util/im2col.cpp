#include "cortado/util/im2col.hpp"

#include <type_traits>
#include <vector>

namespace cortado {

namespace {

// Output extent along one axis; the caller validated that the dilated kernel
// fits the padded input, so this is >= 1.
inline int out_extent(int in, int k, int p, int s, int d) {
  return (in + 2 * p - (d * (k - 1) + 1)) / s + 1;
}

// Walks every (channel, kernel tap, output position) in column-matrix order
// and calls f(col_index, image_index_or_-1). Shared by im2col and col2im so
// the two are adjoint by construction.
template <typename F>
void for_each_tap(int channels, int height, int width, int kh, int kw, int ph, int pw, int sh,
                  int sw, int dh, int dw, F&& f) {
  const int oh = out_extent(height, kh, ph, sh, dh);
  const int ow = out_extent(width, kw, pw, sw, dw);
  int64_t col = 0;
  for (int c = 0; c < channels; ++c) {
    const int64_t plane = static_cast<int64_t>(c) * height * width;
    for (int ky = 0; ky < kh; ++ky) {
      for (int kx = 0; kx < kw; ++kx) {
        for (int y = 0; y < oh; ++y) {
          const int iy = y * sh - ph + ky * dh;
          if (iy < 0 || iy >= height) {
            for (int x = 0; x < ow; ++x) f(col++, int64_t{-1});
            continue;
          }
          const int64_t row = plane + static_cast<int64_t>(iy) * width;
          for (int x = 0; x < ow; ++x) {
            const int ix = x * sw - pw + kx * dw;
            f(col++, (ix >= 0 && ix < width) ? row + ix : int64_t{-1});
          }
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void im2col_cpu(const T* im, int channels, int height, int width, int kh, int kw, int ph, int pw,
                int sh, int sw, int dh, int dw, T* col) {
  for_each_tap(channels, height, width, kh, kw, ph, pw, sh, sw, dh, dw,
               [&](int64_t ci, int64_t ii) { col[ci] = ii >= 0 ? im[ii] : T(0.0f); });
}

template <typename T>
void col2im_cpu(const T* col, int channels, int height, int width, int kh, int kw, int ph, int pw,
                int sh, int sw, int dh, int dw, T* im) {
  using M = math_t<T>;
  const int64_t n = static_cast<int64_t>(channels) * height * width;
  if constexpr (std::is_same_v<T, M>) {
    for (int64_t i = 0; i < n; ++i) im[i] = T(0);
    for_each_tap(channels, height, width, kh, kw, ph, pw, sh, sw, dh, dw,
                 [&](int64_t ci, int64_t ii) {
                   if (ii >= 0) im[ii] += col[ci];
                 });
  } else {
    // Overlapping windows sum several taps into one pixel: accumulate in the
    // math type and round once, never in half.
    std::vector<M> acc(static_cast<size_t>(n), M(0));
    for_each_tap(channels, height, width, kh, kw, ph, pw, sh, sw, dh, dw,
                 [&](int64_t ci, int64_t ii) {
                   if (ii >= 0) acc[ii] += static_cast<M>(col[ci]);
                 });
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
