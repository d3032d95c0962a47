#pragma once
// The pixel loops of DataTransformer (transform_record.cpp): step 4 (crop,
// mirror, mean, scale) and the random-resized crop's resampling pass, each
// written once for the source layouts (uint8 or float, planar (C, H, W) or
// interleaved (H, W, C)) and the output types. Values are computed in
// math_t<T> and rounded once into T (for the 16-bit types: a float staging
// buffer converted in bulk).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cortado/util/math.hpp"

namespace cortado {
namespace transform_detail {

// The window of the mean file subtracted from the output (null: none).
struct MeanWindow {
  const float* data = nullptr;  // (C, H, W)
  int H = 0, W = 0, h0 = 0, w0 = 0;
};

// The inner loop, on the source type S (uint8_t or float), planar (C, H, W)
// or interleaved (H, W, C).
template <typename S, bool Interleaved, typename T>
void transform_pixels(const S* src, int C, int H, int W, int out_h, int out_w, int h0, int w0, bool mirror,
                      math_t<T> scale, const MeanWindow& mean, const std::vector<math_t<T>>& mean_values, T* out) {
  using M = math_t<T>;
  // For float16 and bfloat16 the image is computed in float, then converted in bulk (F16C
  // where the CPU has it): the per-value conversion was the reader's
  // bottleneck for FP16 nets.
  const size_t count = static_cast<size_t>(C) * out_h * out_w;
  thread_local std::vector<M> staging;
  if constexpr (!std::is_same_v<T, M>) staging.resize(count);
  M* base = std::is_same_v<T, M> ? reinterpret_cast<M*>(out) : staging.data();
  const size_t step = Interleaved ? static_cast<size_t>(C) : 1;
  for (int c = 0; c < C; ++c) {
    const M mv = mean_values.empty() ? M(0) : mean_values[c];
    for (int h = 0; h < out_h; ++h) {
      const S* row = Interleaved ? src + (static_cast<size_t>(h + h0) * W + w0) * C + c
                                 : src + (static_cast<size_t>(c) * H + h + h0) * W + w0;
      const float* mrow = mean.data ? mean.data + (static_cast<size_t>(c) * mean.H + h + mean.h0) * mean.W + mean.w0
                                    : nullptr;
      M* dst = base + (static_cast<size_t>(c) * out_h + h) * out_w;
      for (int w = 0; w < out_w; ++w) {
        const int sw = mirror ? out_w - 1 - w : w;
        const M m = mrow ? static_cast<M>(mrow[sw]) : mv;
        dst[w] = (static_cast<M>(row[sw * step]) - m) * scale;
      }
    }
  }
  if constexpr (!std::is_same_v<T, M>) convert_array<M, T>(static_cast<int64_t>(count), base, out);
}

/// The bilinear taps of one output axis of the random-resized crop
/// (data_transformer.hpp): output i reads source pixels i0[i] and i1[i] of
/// the image scaled by scale/8, weighted 1 - w[i] and w[i]:
///   x = (window0 + (j + 0.5) * window_n / out_n) * scale / 8 - 0.5,
///   j = out_n - 1 - i when reversed (the mirror), else i,
///   i0 = clamp(floor(x), 0, size - 1), i1 = clamp(floor(x) + 1, 0, size - 1),
///   w = x - floor(x)
/// (size: the scaled image's pixels on this axis). lo and hi + 1 bound the
/// pixels read, so a decode of [lo, hi] gives the same output.
struct ResampleAxis {
  std::vector<int> i0, i1;
  std::vector<float> w;
  int lo = 0, hi = 0;

  ResampleAxis(int out_n, int window0, int window_n, int scale, int size, bool reverse) {
    i0.resize(static_cast<size_t>(out_n));
    i1.resize(static_cast<size_t>(out_n));
    w.resize(static_cast<size_t>(out_n));
    const double step = static_cast<double>(window_n) / out_n, s = scale / 8.0;
    lo = size - 1;
    hi = 0;
    for (int i = 0; i < out_n; ++i) {
      const int j = reverse ? out_n - 1 - i : i;
      const double x = (window0 + (j + 0.5) * step) * s - 0.5;
      const double f = std::floor(x);
      const auto k = static_cast<size_t>(i);
      i0[k] = std::clamp(static_cast<int>(f), 0, size - 1);
      i1[k] = std::clamp(static_cast<int>(f) + 1, 0, size - 1);
      w[k] = static_cast<float>(x - f);
      lo = std::min(lo, i0[k]);
      hi = std::max(hi, i1[k]);
    }
  }
  /// Makes the taps relative to a region that starts at `origin`.
  void Shift(int origin) {
    for (int& v : i0) v -= origin;
    for (int& v : i1) v -= origin;
  }
};

/// The resampling pass: out (C, ys.size(), xs.size()) from src (C, H, W)
/// planar or (H, W, C) interleaved, whose pixels the taps index; mean rows
/// and columns at the unmirrored output position (x' of data_transformer.hpp).
template <typename S, bool Interleaved, typename T>
void resample_pixels(const S* src, int C, int H, int W, const ResampleAxis& ys, const ResampleAxis& xs, bool mirror,
                     math_t<T> scale, const MeanWindow& mean, const std::vector<math_t<T>>& mean_values, T* out) {
  using M = math_t<T>;
  const int out_h = static_cast<int>(ys.w.size()), out_w = static_cast<int>(xs.w.size());
  const size_t count = static_cast<size_t>(C) * out_h * out_w;
  thread_local std::vector<M> staging;
  if constexpr (!std::is_same_v<T, M>) staging.resize(count);
  M* base = std::is_same_v<T, M> ? reinterpret_cast<M*>(out) : staging.data();
  const size_t step = Interleaved ? static_cast<size_t>(C) : 1;
  const size_t row_stride = Interleaved ? static_cast<size_t>(W) * C : static_cast<size_t>(W);
  for (int c = 0; c < C; ++c) {
    const M mv = mean_values.empty() ? M(0) : mean_values[static_cast<size_t>(c)];
    const S* plane = Interleaved ? src + c : src + static_cast<size_t>(c) * H * W;
    for (int y = 0; y < out_h; ++y) {
      const auto ky = static_cast<size_t>(y);
      const S* r0 = plane + static_cast<size_t>(ys.i0[ky]) * row_stride;
      const S* r1 = plane + static_cast<size_t>(ys.i1[ky]) * row_stride;
      const M fy = static_cast<M>(ys.w[ky]);
      const float* mrow = mean.data ? mean.data + (static_cast<size_t>(c) * mean.H + y + mean.h0) * mean.W + mean.w0
                                    : nullptr;
      M* dst = base + (static_cast<size_t>(c) * out_h + y) * out_w;
      for (int x = 0; x < out_w; ++x) {
        const auto kx = static_cast<size_t>(x);
        const size_t a = static_cast<size_t>(xs.i0[kx]) * step, b = static_cast<size_t>(xs.i1[kx]) * step;
        const M fx = static_cast<M>(xs.w[kx]);
        const M top = static_cast<M>(r0[a]) + (static_cast<M>(r0[b]) - static_cast<M>(r0[a])) * fx;
        const M bottom = static_cast<M>(r1[a]) + (static_cast<M>(r1[b]) - static_cast<M>(r1[a])) * fx;
        const M m = mrow ? static_cast<M>(mrow[mirror ? out_w - 1 - x : x]) : mv;
        dst[x] = (top + (bottom - top) * fy - m) * scale;
      }
    }
  }
  if constexpr (!std::is_same_v<T, M>) convert_array<M, T>(static_cast<int64_t>(count), base, out);
}

}  // namespace transform_detail
}  // namespace cortado
