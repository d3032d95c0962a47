// LRN kernels. Thread-to-data mapping: one thread per element (n, c, h, w)
// in a grid-stride loop (64-bit indexes), in every kernel.
// - lrn_scale_output_kernel: the thread sums x^2 over its window (channels
//   c - half .. c + half, or the square (h, w) +- half in channel c, clipped)
//   in math_t (float for float16, double for double), in the CPU path's
//   order, writes the scale s (math_t) and y = x * s^-beta (storage type).
// - lrn_backward_kernel: the thread sums dy_j * y_j / s_j over the same
//   window in math_t and writes dx once.
// Products and sums are rounded one at a time (mul_rn / add_rn) so that only
// powf/pow can differ from the host.
#include "cortado/layers/lrn_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

__device__ __forceinline__ float pow_of(float b, float e) { return powf(b, e); }
__device__ __forceinline__ double pow_of(double b, double e) { return pow(b, e); }

struct Geometry {
  int C, H, W, size;
  bool within;
};

// Calls f(j) for each element j in the window of element i, in the CPU order.
template <typename Fn>
__device__ __forceinline__ void for_window(const Geometry& g, int64_t i, Fn&& f) {
  const int half = (g.size - 1) / 2;
  const int w = static_cast<int>(i % g.W);
  const int h = static_cast<int>((i / g.W) % g.H);
  const int c = static_cast<int>((i / (int64_t(g.W) * g.H)) % g.C);
  const int64_t n = i / (int64_t(g.W) * g.H * g.C);
  if (g.within) {
    const int h0 = max(h - half, 0), h1 = min(h + half, g.H - 1);
    const int w0 = max(w - half, 0), w1 = min(w + half, g.W - 1);
    for (int hh = h0; hh <= h1; ++hh) {
      for (int ww = w0; ww <= w1; ++ww) f(((n * g.C + c) * g.H + hh) * g.W + ww);
    }
  } else {
    const int c0 = max(c - half, 0), c1 = min(c + half, g.C - 1);
    for (int cc = c0; cc <= c1; ++cc) f(((n * g.C + cc) * g.H + h) * g.W + w);
  }
}

template <typename T>
__global__ void lrn_scale_output_kernel(int64_t count, Geometry g, const T* x, dmath_t<T>* scale, T* y,
                                        dmath_t<T> k, dmath_t<T> norm, dmath_t<T> beta) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, count) {
    M sum = M(0);
    for_window(g, i, [&](int64_t j) {
      const M v = load(x, j);
      sum = add_rn(sum, mul_rn(v, v));
    });
    const M s = add_rn(k, mul_rn(norm, sum));
    scale[i] = s;
    store(y, i, mul_rn(load(x, i), pow_of(s, -beta)));
  }
}

template <typename T>
__global__ void lrn_backward_kernel(int64_t count, Geometry g, const T* x, const T* y, const dmath_t<T>* scale,
                                    const T* dy, T* dx, dmath_t<T> coeff, dmath_t<T> beta) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, count) {
    M sum = M(0);
    for_window(g, i, [&](int64_t j) { sum = add_rn(sum, mul_rn(load(dy, j), load(y, j)) / scale[j]); });
    const M a = mul_rn(load(dy, i), pow_of(scale[i], -beta));
    const M b = mul_rn(mul_rn(coeff, load(x, i)), sum);
    store(dx, i, add_rn(a, -b));
  }
}

}  // namespace

namespace gpu {

template <typename T>
void lrn_forward(const LRNShape& s, const T* x, math_t<T>* scale, T* y, CUstream_st* stream) {
  const int64_t count = int64_t(s.num) * s.channels * s.height * s.width;
  if (count == 0) return;
  using M = dmath_t<dev_t<T>>;
  const Geometry g{s.channels, s.height, s.width, s.size, s.within};
  lrn_scale_output_kernel<<<cuda::blocks_for(count), cuda::kThreads, 0, stream>>>(
      count, g, dev(x), scale, dev(y), M(s.k), M(s.norm), M(s.beta));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void lrn_backward(const LRNShape& s, const T* x, const T* y, const math_t<T>* scale, const T* dy, T* dx,
                  CUstream_st* stream) {
  const int64_t count = int64_t(s.num) * s.channels * s.height * s.width;
  if (count == 0) return;
  using M = dmath_t<dev_t<T>>;
  const Geometry g{s.channels, s.height, s.width, s.size, s.within};
  // coeff = 2 * norm * beta, rounded in M as on the host.
  const M coeff = M(2) * M(s.norm) * M(s.beta);
  lrn_backward_kernel<<<cuda::blocks_for(count), cuda::kThreads, 0, stream>>>(
      count, g, dev(x), dev(y), scale, dev(dy), dev(dx), coeff, M(s.beta));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_LRN(T)                                                                   \
  template void lrn_forward<T>(const LRNShape&, const T*, math_t<T>*, T*, CUstream_st*);          \
  template void lrn_backward<T>(const LRNShape&, const T*, const T*, const math_t<T>*, const T*, T*, \
                                CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_LRN)

}  // namespace gpu
}  // namespace cortado
