// Pooling kernels (MAX with argmax mask, AVE with Caffe's divisor, global
// pooling as the window that covers the whole input).
//
// Forward: one thread per top element (plane, oy, ox), grid-stride with
//   64-bit indexes, split into (plane, row, column) with 32-bit divisions
//   where the count allows. It walks its clipped window in row-major order: MAX keeps
//   the first maximum (strict >, the CPU's tie rule) and stores its h*W + w
//   index in the int mask; AVE sums in float (double for double) and divides
//   by the window clipped to the padded image.
// STOCHASTIC (no padding): forward one thread per top element; TRAIN reads
//   its uniform draw (made on the host) and walks the window in row-major
//   order summing in float (double for double) exactly as the CPU does, then
//   stores the picked index in the int mask (backward = MAX's routing); TEST
//   sums x and x^2. The TEST backward is a per-bottom-element gather like AVE,
//   recomputing each covering window's sums.
// Backward: one thread per bottom element (plane, h, w). It visits the outputs
//   whose windows contain (h, w) -- oy from (h + PH - KH) / SH + 1 (or 0) to
//   (h + PH) / SH -- and sums, in float (double for double), the diffs routed
//   to it (MAX: mask == h*W + w; AVE: dy / pool size). One store per element,
//   no atomics: the result does not depend on the schedule.
// Channels last (PoolWindow.channels > 0; MAX and AVE): the same, each
// thread one (n, pixel, c) element, the window's values C apart in memory,
// so that a warp reads 32 neighbouring channels of each pixel at once.
// MAX channels last, where C is a multiple of V = 16 / sizeof(T) and the
// arrays are aligned for it (no mask top): each thread V neighbouring
// channels of one pixel, with the same walk and comparisons per channel
// (the same bits), 16-byte loads and stores, and the index arithmetic
// (divisions) once per V values instead of once per value.
#include <cuda_fp16.h>

#include "cortado/layers/pooling_layer.hpp"
#include "device_values.cuh"
#include "vector_access.cuh"
#include "cortado/storage_types.hpp"
#include "cortado/util/cuda.hpp"

namespace cortado {

namespace {

using namespace kernels;

using gpu::PoolWindow;

// The clipped window of output (oy, ox) and its AVE divisor, as on the CPU.
struct Win {
  int h0, h1, w0, w1, size;
};
__device__ __forceinline__ Win window(const PoolWindow& g, int oy, int ox) {
  int h0 = oy * g.sh - g.ph, w0 = ox * g.sw - g.pw;
  int h1 = min(h0 + g.kh, g.height + g.ph), w1 = min(w0 + g.kw, g.width + g.pw);
  const int size = (h1 - h0) * (w1 - w0);
  return {max(h0, 0), min(h1, g.height), max(w0, 0), min(w1, g.width), size};
}

// Outputs along one axis whose windows contain coordinate v: [*lo, *hi).
__device__ __forceinline__ void covering(int v, int k, int p, int s, int out, int* lo, int* hi) {
  *lo = v + p < k ? 0 : (v + p - k) / s + 1;
  *hi = min((v + p) / s + 1, out);
}

// The outputs [oy0, oy1) x [ox0, ox1) whose windows contain bottom pixel (h, w).
struct Cover {
  int oy0, oy1, ox0, ox1;
};
__device__ __forceinline__ Cover covering(const PoolWindow& g, int h, int w) {
  Cover c;
  covering(h, g.kh, g.ph, g.sh, g.out_h, &c.oy0, &c.oy1);
  covering(w, g.kw, g.pw, g.sw, g.out_w, &c.ox0, &c.ox1);
  return c;
}

// Element i of the top (planes, out_h, out_w) or of the bottom (planes,
// height, width) as (plane, row, column), with divisions in the index type I
// (uint32_t where the elements' count allows: a 64-bit division costs
// several times a 32-bit one, and these kernels are otherwise a few loads).
struct Position {
  int64_t plane;
  int row, col;
};
template <typename I>
__device__ __forceinline__ Position position(I i, int rows, int cols) {
  const I plane_size = static_cast<I>(rows) * static_cast<I>(cols);
  const I plane = i / plane_size;
  const I r = i - plane * plane_size;
  const I row = r / static_cast<I>(cols);
  return {static_cast<int64_t>(plane), static_cast<int>(row), static_cast<int>(r - row * static_cast<I>(cols))};
}
template <typename I>
__device__ __forceinline__ Position top_position(const PoolWindow& g, int64_t i) {
  return position<I>(static_cast<I>(i), g.out_h, g.out_w);
}
template <typename I>
__device__ __forceinline__ Position bottom_position(const PoolWindow& g, int64_t i) {
  return position<I>(static_cast<I>(i), g.height, g.width);
}

// Element i of an array of rows x cols pixels per plane (the top or the
// bottom), for the kernels that also run channels last (MAX and AVE; g.channels
// > 0: the values of a pixel are C apart, element i is (n, row, col, c)):
// the offset of its plane's pixel 0 in its own array and in the other one
// (other_rows x other_cols pixels per plane), its row and column, and the
// distance between two pixels in memory (1, or C channels last).
struct Site {
  int64_t base, other;
  int row, col;
  int64_t step;
};
template <typename I>
__device__ __forceinline__ Site site(const PoolWindow& g, int64_t i, int rows, int cols, int other_rows,
                                     int other_cols) {
  if (g.channels == 0) {
    const Position p = position<I>(static_cast<I>(i), rows, cols);
    return {p.plane * rows * cols, p.plane * other_rows * other_cols, p.row, p.col, 1};
  }
  const I c = static_cast<I>(i) % static_cast<I>(g.channels);
  const Position p = position<I>(static_cast<I>(i) / static_cast<I>(g.channels), rows, cols);  // plane: n
  const int64_t ch = g.channels;
  return {p.plane * rows * cols * ch + static_cast<int64_t>(c),
          p.plane * other_rows * other_cols * ch + static_cast<int64_t>(c), p.row, p.col, ch};
}

template <typename I, typename T>
__global__ void max_forward_kernel(int64_t n, PoolWindow g, const T* x, T* y, int* mask, float* mask_top) {
  CORTADO_KERNEL_LOOP(i, n) {
    const Site at = site<I>(g, i, g.out_h, g.out_w, g.height, g.width);
    const int oy = at.row, ox = at.col;
    const T* xp = x + at.other;
    const int64_t step = at.step;
    const Win win = window(g, oy, ox);
    int best = win.h0 * g.width + win.w0;
    auto best_v = load(xp, best * step);
    for (int h = win.h0; h < win.h1; ++h) {
      for (int w = win.w0; w < win.w1; ++w) {
        const auto v = load(xp, (h * g.width + w) * step);
        if (v > best_v) {
          best_v = v;
          best = h * g.width + w;
        }
      }
    }
    store(y, i, best_v);
    mask[i] = best;
    if (mask_top) mask_top[i] = static_cast<float>(best);
  }
}

// n: N * out_h * out_w * C / V threads.
template <typename I, int V, typename T>
__global__ void max_forward_nhwc_kernel(int64_t n, PoolWindow g, const T* x, T* y, int* mask) {
  using M = decltype(load(x, 0));
  const I groups = static_cast<I>(g.channels / V);
  const int64_t ch = g.channels;
  CORTADO_KERNEL_LOOP(i, n) {
    const I c0 = static_cast<I>(i) % groups * V;
    const Position p = position<I>(static_cast<I>(i) / groups, g.out_h, g.out_w);
    const T* xp = x + p.plane * g.height * g.width * ch + static_cast<int64_t>(c0);
    const Win win = window(g, p.row, p.col);
    const int first = win.h0 * g.width + win.w0;
    VecOf<int, V> best;
    M best_v[V];
    {
      const VecOf<T, V> v = load_vec<V>(xp, first * ch);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        best.v[e] = first;
        best_v[e] = load(v.v, e);
      }
    }
    for (int h = win.h0; h < win.h1; ++h) {
      for (int w = win.w0; w < win.w1; ++w) {
        const int at = h * g.width + w;
        const VecOf<T, V> v = load_vec<V>(xp, at * ch);
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const M m = load(v.v, e);
          if (m > best_v[e]) {
            best_v[e] = m;
            best.v[e] = at;
          }
        }
      }
    }
    VecOf<T, V> out;
#pragma unroll
    for (int e = 0; e < V; ++e) store(out.v, e, best_v[e]);
    store_vec<V>(y, i * V, out);
    store_vec<V>(mask, i * V, best);
  }
}

template <typename I, typename T>
__global__ void ave_forward_kernel(int64_t n, PoolWindow g, const T* x, T* y) {
  using A = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const Site at = site<I>(g, i, g.out_h, g.out_w, g.height, g.width);
    const T* xp = x + at.other;
    const Win win = window(g, at.row, at.col);
    A sum = 0;
    for (int h = win.h0; h < win.h1; ++h) {
      for (int w = win.w0; w < win.w1; ++w) sum += load(xp, (h * g.width + w) * at.step);
    }
    store(y, i, sum / static_cast<A>(win.size));
  }
}

template <typename I, typename T>
__global__ void max_backward_kernel(int64_t n, PoolWindow g, const T* dy, const int* mask, T* dx) {
  using A = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const Site at = site<I>(g, i, g.height, g.width, g.out_h, g.out_w);
    const int h = at.row, w = at.col;
    const int64_t base = at.other;
    const int self = h * g.width + w;
    const Cover cover = covering(g, h, w);
    A sum = 0;
    for (int oy = cover.oy0; oy < cover.oy1; ++oy) {
      for (int ox = cover.ox0; ox < cover.ox1; ++ox) {
        const int64_t o = base + (static_cast<int64_t>(oy) * g.out_w + ox) * at.step;
        if (mask[o] == self) sum += load(dy, o);
      }
    }
    store(dx, i, sum);
  }
}

// n: N * height * width * C / V threads.
template <typename I, int V, typename T>
__global__ void max_backward_nhwc_kernel(int64_t n, PoolWindow g, const T* dy, const int* mask, T* dx) {
  using A = dmath_t<T>;
  const I groups = static_cast<I>(g.channels / V);
  const int64_t ch = g.channels;
  CORTADO_KERNEL_LOOP(i, n) {
    const I c0 = static_cast<I>(i) % groups * V;
    const Position p = position<I>(static_cast<I>(i) / groups, g.height, g.width);
    const int64_t base = p.plane * g.out_h * g.out_w * ch + static_cast<int64_t>(c0);
    const int self = p.row * g.width + p.col;
    const Cover cover = covering(g, p.row, p.col);
    A sum[V];
#pragma unroll
    for (int e = 0; e < V; ++e) sum[e] = 0;
    for (int oy = cover.oy0; oy < cover.oy1; ++oy) {
      for (int ox = cover.ox0; ox < cover.ox1; ++ox) {
        const int64_t o = base + (static_cast<int64_t>(oy) * g.out_w + ox) * ch;
        const VecOf<int, V> m = load_vec<V>(mask, o);
        const VecOf<T, V> d = load_vec<V>(dy, o);
#pragma unroll
        for (int e = 0; e < V; ++e)
          if (m.v[e] == self) sum[e] += load(d.v, e);
      }
    }
    VecOf<T, V> out;
#pragma unroll
    for (int e = 0; e < V; ++e) store(out.v, e, sum[e]);
    store_vec<V>(dx, i * V, out);
  }
}

// The vector width of the channels-last MAX kernels for C channels of T
// (the values 16-byte aligned, the mask aligned to V ints), else 0: the
// scalar kernels.
template <typename T>
int nhwc_max_width(const PoolWindow& g, const void* a, const void* b, const int* mask) {
  if (g.channels <= 0) return 0;
  const int v = vector_width(g.channels, sizeof(T), {a, b});
  if (v <= 1 || reinterpret_cast<uintptr_t>(mask) % (sizeof(int) * v) != 0) return 0;
  return v;
}

template <typename I, typename T>
__global__ void ave_backward_kernel(int64_t n, PoolWindow g, const T* dy, T* dx) {
  using A = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const Site at = site<I>(g, i, g.height, g.width, g.out_h, g.out_w);
    const int64_t base = at.other;
    const Cover cover = covering(g, at.row, at.col);
    A sum = 0;
    for (int oy = cover.oy0; oy < cover.oy1; ++oy) {
      for (int ox = cover.ox0; ox < cover.ox1; ++ox) {
        const Win win = window(g, oy, ox);
        sum += load(dy, base + (static_cast<int64_t>(oy) * g.out_w + ox) * at.step) / static_cast<A>(win.size);
      }
    }
    store(dx, i, sum);
  }
}

template <typename I, typename T>
__global__ void stochastic_forward_kernel(int64_t n, PoolWindow g, const T* x, T* y, const float* rand, int* mask) {
  using A = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const auto [plane, oy, ox] = top_position<I>(g, i);
    const T* xp = x + plane * g.height * g.width;
    const Win win = window(g, oy, ox);
    A sum = 0, sq = 0;
    for (int h = win.h0; h < win.h1; ++h) {
      for (int w = win.w0; w < win.w1; ++w) {
        const A v = static_cast<A>(load(xp, h * g.width + w));
        sum += v;
        sq += v * v;
      }
    }
    if (rand) {
      const A thres = static_cast<A>(rand[i]) * sum;
      A run = 0;
      int pick = (win.h1 - 1) * g.width + win.w1 - 1;
      bool found = false;
      for (int h = win.h0; h < win.h1 && !found; ++h) {
        for (int w = win.w0; w < win.w1; ++w) {
          run += static_cast<A>(load(xp, h * g.width + w));
          if (run >= thres) {
            pick = h * g.width + w;
            found = true;
            break;
          }
        }
      }
      store(y, i, static_cast<A>(load(xp, pick)));
      mask[i] = pick;
    } else {
      store(y, i, sum > A(0) ? sq / sum : A(0));
    }
  }
}

template <typename I, typename T>
__global__ void stochastic_test_backward_kernel(int64_t n, PoolWindow g, const T* x, const T* dy, T* dx) {
  using A = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const auto [plane, h, w] = bottom_position<I>(g, i);
    const T* xp = x + plane * g.height * g.width;
    const T* dyp = dy + plane * g.out_h * g.out_w;
    const Cover cover = covering(g, h, w);
    const A xv = static_cast<A>(load(xp, h * g.width + w));
    A total = 0;
    for (int oy = cover.oy0; oy < cover.oy1; ++oy) {
      for (int ox = cover.ox0; ox < cover.ox1; ++ox) {
        const Win win = window(g, oy, ox);
        A sum = 0, sq = 0;
        for (int hh = win.h0; hh < win.h1; ++hh) {
          for (int ww = win.w0; ww < win.w1; ++ww) {
            const A v = static_cast<A>(load(xp, hh * g.width + ww));
            sum += v;
            sq += v * v;
          }
        }
        if (!(sum > A(0))) continue;
        total += static_cast<A>(load(dyp, oy * g.out_w + ox)) * (A(2) * xv - sq / sum) / sum;
      }
    }
    store(dx, i, total);
  }
}

// Launches kernel<uint32_t, T>(n, args...) (k32) where n fits in 32 bits,
// else kernel<uint64_t, T> (k64), one thread per element (grid-stride) over
// n elements; nothing when n is 0.
template <typename... P, typename... A>
void launch(void (*k32)(int64_t, P...), void (*k64)(int64_t, P...), int64_t n, CUstream_st* stream, A... args) {
  if (n == 0) return;
  const auto kernel = n < (int64_t(1) << 32) ? k32 : k64;
  kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, args...);
  CORTADO_KERNEL_CHECK();
}
#define CORTADO_POOL_KERNELS(k, T) k<uint32_t, T>, k<uint64_t, T>

}  // namespace

namespace gpu {

template <typename T>
void stochastic_pool_forward(int64_t planes, PoolWindow g, const T* x, T* y, const float* rand, int* mask,
                             CUstream_st* stream) {
  launch(CORTADO_POOL_KERNELS(stochastic_forward_kernel, dev_t<T>), planes * g.out_h * g.out_w, stream,
        g, dev(x), dev(y), rand, mask);
}

template <typename T>
void stochastic_pool_test_backward(int64_t planes, PoolWindow g, const T* x, const T* dy, T* dx, CUstream_st* stream) {
  launch(CORTADO_POOL_KERNELS(stochastic_test_backward_kernel, dev_t<T>), planes * g.height * g.width, stream,
        g, dev(x), dev(dy), dev(dx));
}

template <typename T>
void max_pool_forward(int64_t planes, PoolWindow g, const T* x, T* y, int* mask, float* mask_top,
                      CUstream_st* stream) {
  using D = dev_t<T>;
  constexpr int V = 16 / sizeof(T);
  if constexpr (V > 1) {
    if (!mask_top && nhwc_max_width<T>(g, x, y, mask) == V) {
      launch(max_forward_nhwc_kernel<uint32_t, V, D>, max_forward_nhwc_kernel<uint64_t, V, D>,
             planes * g.out_h * g.out_w / V, stream, g, dev(x), dev(y), mask);
      return;
    }
  }
  launch(CORTADO_POOL_KERNELS(max_forward_kernel, dev_t<T>), planes * g.out_h * g.out_w, stream,
        g, dev(x), dev(y), mask, mask_top);
}

template <typename T>
void ave_pool_forward(int64_t planes, PoolWindow g, const T* x, T* y, CUstream_st* stream) {
  launch(CORTADO_POOL_KERNELS(ave_forward_kernel, dev_t<T>), planes * g.out_h * g.out_w, stream, g, dev(x), dev(y));
}

template <typename T>
void max_pool_backward(int64_t planes, PoolWindow g, const T* dy, const int* mask, T* dx, CUstream_st* stream) {
  using D = dev_t<T>;
  constexpr int V = 16 / sizeof(T);
  if constexpr (V > 1) {
    if (nhwc_max_width<T>(g, dy, dx, mask) == V) {
      launch(max_backward_nhwc_kernel<uint32_t, V, D>, max_backward_nhwc_kernel<uint64_t, V, D>,
             planes * g.height * g.width / V, stream, g, dev(dy), mask, dev(dx));
      return;
    }
  }
  launch(CORTADO_POOL_KERNELS(max_backward_kernel, dev_t<T>), planes * g.height * g.width, stream,
        g, dev(dy), mask, dev(dx));
}

template <typename T>
void ave_pool_backward(int64_t planes, PoolWindow g, const T* dy, T* dx, CUstream_st* stream) {
  launch(CORTADO_POOL_KERNELS(ave_backward_kernel, dev_t<T>), planes * g.height * g.width, stream, g, dev(dy), dev(dx));
}

#define CORTADO_INSTANTIATE_POOL_GPU(T)                                                                   \
  template void stochastic_pool_forward<T>(int64_t, PoolWindow, const T*, T*, const float*, int*, CUstream_st*); \
  template void stochastic_pool_test_backward<T>(int64_t, PoolWindow, const T*, const T*, T*, CUstream_st*); \
  template void max_pool_forward<T>(int64_t, PoolWindow, const T*, T*, int*, float*, CUstream_st*);      \
  template void ave_pool_forward<T>(int64_t, PoolWindow, const T*, T*, CUstream_st*);                    \
  template void max_pool_backward<T>(int64_t, PoolWindow, const T*, const int*, T*, CUstream_st*);       \
  template void ave_pool_backward<T>(int64_t, PoolWindow, const T*, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_POOL_GPU)
#undef CORTADO_INSTANTIATE_POOL_GPU
#undef CORTADO_POOL_KERNELS

}  // namespace gpu

}  // namespace cortado
