// Kernels of BatchNormLayer. x is (N, C, S); channel c holds m = N * S values.
//
// Reductions (statistics in the forward, sum dy and sum dy * xhat in the
// backward) go through channel_reduce.cuh: many blocks per channel, 16-byte
// loads where a row's length and the pointers allow, partial sums in M
// (float for __half, the type itself otherwise), added per channel in a
// fixed order. The statistics take one pass over x: the sums of x - k and
// its square, k the channel's first value (the CPU takes two passes, the
// variance once the mean is known; the two agree to M's rounding). The
// finishing step writes the per-channel results and updates the running
// statistics (channel 0 also the moving-average factor).
// Elementwise kernels (normalize, dx) are grid-stride loops over N * C * S,
// a thread per V values of one channel (16-byte loads where S and the
// pointers allow; the channel once per V values), computing in M and
// rounding once to the storage type.
// Fused chains (layer_fusion.hpp: a Scale and/or a ReLU after the
// normalization) have their own kernels: the forward and dx take one plane
// (n, c) per block (vector_access.cuh: the channel once per plane, 16-byte
// loads where the plane's length and the pointers allow), and round to the
// storage type wherever the unfused layers store; the backward sums are one
// channel_reduce of four quantities (BatchNorm's two, the Scale's two).

#include "cortado/layers/batch_norm_layer.hpp"
#include "cortado/storage_types.hpp"
#include "cortado/layers/relu_layer.hpp"
#include "channel_reduce.cuh"
#include "device_values.cuh"
#include "vector_access.cuh"

namespace cortado {

namespace {

using namespace kernels;

// Statistics in one pass: the sums of d = x - k and d * d, k the channel's
// first value (a shift against the cancellation of sum x^2 - m * mean^2
// when the mean is large against the spread); finishing: the mean, the
// biased variance and the running statistics.
template <typename T, typename M>
struct SumShifted {
  const T* x;
  int64_t inner;
  template <int V, typename A>
  __device__ __forceinline__ void add(int64_t j, int64_t ch, A* acc) const {
    const M k = load(x, ch * inner);
    const VecOf<T, V> v = load_vec<V>(x, j);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const M d = M(load(v.v, e)) - k;
      acc[0] += d;
      acc[1] += d * d;
    }
  }
};
template <typename T, typename M>
struct FinishStats {
  const T* x;
  int64_t inner;
  bool any;  // the channels hold values (m > 0)
  M inv_m, unbias, maf;
  M *mean, *var, *run_mean, *run_var, *run_factor;
  __device__ void operator()(int64_t ch, const M* t) const {
    const M k = any ? M(load(x, ch * inner)) : M(0);
    const M d = t[0] * inv_m;
    const M mu = k + d;
    const M v = max(t[1] * inv_m - d * d, M(0));
    mean[ch] = mu;
    var[ch] = v;
    run_mean[ch] = maf * run_mean[ch] + mu;
    run_var[ch] = maf * run_var[ch] + unbias * v;
    if (ch == 0) run_factor[0] = maf * run_factor[0] + M(1);
  }
};
// Backward: sum dy and sum dy * xhat, xhat recomputed from the saved x as
// the forward computed it.
template <typename T, typename X, typename M>
struct SumDyDyXhat {
  const T* dy;
  const X* xs;
  const M* mean;
  const M* inv_std;
  template <int V, typename A>
  __device__ __forceinline__ void add(int64_t j, int64_t ch, A* acc) const {
    const M mu = mean[ch], is = inv_std[ch];
    const VecOf<T, V> d = load_vec<V>(dy, j);
    const VecOf<X, V> x = load_vec<V>(xs, j);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const M g = load(d.v, e);
      acc[0] += g;
      acc[1] += g * ((M(load(x.v, e)) - mu) * is);
    }
  }
};
template <typename T, typename M>
struct FinishBackward {
  M *sdy, *sdyx;
  T *dgamma, *dbeta;
  __device__ void operator()(int64_t ch, const M* t) const {
    sdy[ch] = t[0];
    sdyx[ch] = t[1];
    if (dgamma) store(dgamma, ch, M(load(dgamma, ch)) + t[1]);
    if (dbeta) store(dbeta, ch, M(load(dbeta, ch)) + t[0]);
  }
};

template <typename M>
__global__ void global_stats_kernel(int c, const M* run_mean, const M* run_var, const M* run_factor, M* mean,
                                    M* var) {
  const M f = run_factor[0] == M(0) ? M(0) : M(1) / run_factor[0];
  CORTADO_KERNEL_LOOP(i, c) {
    mean[i] = run_mean[i] * f;
    var[i] = run_var[i] * f;
  }
}

template <typename M>
__global__ void inv_std_kernel(int c, M eps, M* v) {
  CORTADO_KERNEL_LOOP(i, c) v[i] = M(1) / sqrt(v[i] + eps);
}

// One thread per V values of one channel (V divides s), the channel found
// once per V values.
template <typename I, int V, typename T, typename M>
__global__ void normalize_kernel(int64_t vectors, int c, int64_t s, const T* x, const M* mean, const M* inv_std,
                                 const T* gamma, const T* beta, T* x_saved, T* y) {
  CORTADO_KERNEL_LOOP(q, vectors) {
    const int64_t j = q * V;
    const int64_t ch = kernels::channel_of<I>(j, s, c);
    const M mu = mean[ch], is = inv_std[ch];
    const M a = gamma ? M(load(gamma, ch)) : M(1), b = gamma ? M(load(beta, ch)) : M(0);
    const VecOf<T, V> in = load_vec<V>(x, j);  // read before y (which may be x) is written
    if (x_saved) store_vec<V>(x_saved, j, in);
    VecOf<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const M h = (M(load(in.v, k)) - mu) * is;
      store(out.v, k, gamma ? a * h + b : h);
    }
    store_vec<V>(y, j, out);
  }
}

template <typename I, int V, typename T, typename X, typename M>
__global__ void backward_dx_kernel(int64_t vectors, int c, int64_t s, M inv_m, const T* dy, const X* xs,
                                   const M* mean, const M* inv_std, const T* gamma, const M* sdy, const M* sdyx,
                                   T* dx) {
  CORTADO_KERNEL_LOOP(q, vectors) {
    const int64_t j = q * V;
    const int64_t ch = kernels::channel_of<I>(j, s, c);
    const M g = (gamma ? M(load(gamma, ch)) : M(1)) * inv_std[ch];
    const M mu = mean[ch], is = inv_std[ch];
    const M mdy = sdy ? sdy[ch] * inv_m : M(0), mdyx = sdy ? sdyx[ch] * inv_m : M(0);
    const VecOf<T, V> d = load_vec<V>(dy, j);
    VecOf<X, V> xv{};
    if (sdy) xv = load_vec<V>(xs, j);
    VecOf<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      M e = load(d.v, k);
      if (sdy) {
        const M xhat = (M(load(xv.v, k)) - mu) * is;
        e = e - mdy - xhat * mdyx;
      }
      store(out.v, k, g * e);
    }
    store_vec<V>(dx, j, out);
  }
}

// ---- fused chains ----

// z from xhat for a plane: gamma/beta (scale_bias), a Scale's s/b applied to
// the stored xhat, or xhat; then a residual r added to the stored z (as
// Eltwise SUM adds); then the ReLU applied to the stored z.
template <typename T, typename M>
struct TailMath {
  M a = M(1), b = M(0);
  bool scale_bias = false, affine = false, residual = false, relu = false;
  __device__ M operator()(M h, M r) const {
    M z = affine ? stored<T>(h) * a + b : scale_bias ? a * h + b : h;
    if (residual) z = stored<T>(z) + r;
    return relu ? ReLUOp().forward(stored<T>(z)) : z;
  }
};

template <typename T, typename M>
__device__ __forceinline__ TailMath<T, M> tail_of(const T* gamma, const T* beta, const gpu::BnTail<T>& tail, int ch) {
  TailMath<T, M> f;
  f.relu = tail.relu;
  f.residual = tail.residual != nullptr;
  if (gamma) {
    f.scale_bias = true;
    f.a = load(gamma, ch);
    f.b = load(beta, ch);
  } else if (tail.scale) {
    f.affine = true;
    f.a = load(tail.scale, ch);
    f.b = tail.bias ? M(load(tail.bias, ch)) : M(0);
  }
  return f;
}

// Channels last (s == 1: rows of c values, net_layout.hpp): a thread per V
// neighbouring values of one row, V channels (V divides c), the channel
// found once per V values; the arithmetic is the plane kernels'.
template <typename I, int V, typename T, typename M>
__global__ void normalize_fused_rows_kernel(int64_t vectors, int c, const T* x, const M* mean, const M* inv_std,
                                            const T* gamma, const T* beta, gpu::BnTail<T> tail, T* x_saved, T* y) {
  CORTADO_KERNEL_LOOP(q, vectors) {
    const int64_t j = q * V;
    const int ch0 = static_cast<int>(static_cast<I>(j) % static_cast<I>(c));
    const VecOf<T, V> in = load_vec<V>(x, j);  // read before y (which may be x) is written
    if (x_saved) store_vec<V>(x_saved, j, in);
    VecOf<T, V> r{};
    if (tail.residual) r = load_vec<V>(tail.residual, j);  // likewise: y may be its memory
    VecOf<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const int ch = ch0 + k;
      const TailMath<T, M> f = tail_of<T, M>(gamma, beta, tail, ch);
      store(out.v, k, f((M(load(in.v, k)) - mean[ch]) * inv_std[ch], M(load(r.v, k))));
    }
    store_vec<V>(y, j, out);
  }
}

template <int V, typename T, typename M>
__global__ void normalize_fused_kernel(int64_t planes, int c, int64_t s, const T* x, const M* mean,
                                       const M* inv_std, const T* gamma, const T* beta, gpu::BnTail<T> tail,
                                       T* x_saved, T* y) {
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const int ch = static_cast<int>(p % c);
    const M mu = mean[ch], is = inv_std[ch];
    const TailMath<T, M> f = tail_of<T, M>(gamma, beta, tail, ch);
    const int64_t base = p * s;
    for (int64_t i = int64_t(threadIdx.x) * V; i < s; i += int64_t(blockDim.x) * V) {
      const VecOf<T, V> in = load_vec<V>(x, base + i);  // read before y (which may be x) is written
      if (x_saved) store_vec<V>(x_saved, base + i, in);
      VecOf<T, V> r{};
      if (tail.residual) r = load_vec<V>(tail.residual, base + i);  // likewise: y may be its memory
      VecOf<T, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k) store(out.v, k, f((M(load(in.v, k)) - mu) * is, M(load(r.v, k))));
      store_vec<V>(y, base + i, out);
    }
  }
}

// dy as BatchNorm's formulas see it, from the chain's output gradient g at
// element j of channel ch: masked by the ReLU (y read as T, as ReLU's
// backward reads it), with the Scale's sums (acc[2], acc[3]) when acc is
// given, then multiplied by the Scale's s and stored as T.
template <typename T, typename M>
__device__ __forceinline__ M tail_mask(M g, M yv, const gpu::BnTail<T>& tail) {
  return tail.relu ? stored<T>(ReLUOp().backward(stored<T>(yv), M(0), g)) : g;
}
template <typename T, typename X, typename M>
__device__ __forceinline__ M tail_dy(M g, M yv, M xhat, const gpu::BnTail<T>& tail, int64_t ch, M* acc) {
  g = tail_mask<T, M>(g, yv, tail);
  if (!tail.scale) return g;
  if (acc) {
    acc[2] += g;
    acc[3] += g * stored<X>(xhat);
  }
  return stored<T>(g * M(load(tail.scale, ch)));
}

template <typename T, typename X, typename M>
struct SumFusedDy {
  const T* dout;
  const X* y;
  const X* xs;
  const M* mean;
  const M* inv_std;
  gpu::BnTail<T> tail;
  template <int V, typename A>
  __device__ __forceinline__ void add(int64_t j, int64_t ch, A* acc) const {
    const M mu = mean[ch], is = inv_std[ch];
    const VecOf<T, V> g = load_vec<V>(dout, j);
    const VecOf<X, V> x = load_vec<V>(xs, j);
    VecOf<X, V> yv{};
    if (y) yv = load_vec<V>(y, j);
    if (tail.residual_diff) {  // the residual's gradient: the masked dout (after every read of dout here)
      VecOf<T, V> rd;
#pragma unroll
      for (int e = 0; e < V; ++e) store(rd.v, e, tail_mask<T, M>(M(load(g.v, e)), M(load(yv.v, e)), tail));
      store_vec<V>(tail.residual_diff, j, rd);
    }
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const M xhat = (M(load(x.v, e)) - mu) * is;
      const M d = tail_dy<T, X, M>(M(load(g.v, e)), M(load(yv.v, e)), xhat, tail, ch, acc);
      acc[0] += d;
      acc[1] += d * xhat;
    }
  }
};
template <typename T, typename M>
struct FinishFusedBackward {
  M *sdy, *sdyx;
  T *dgamma, *dbeta, *ds, *db;
  __device__ void operator()(int64_t ch, const M* t) const {
    sdy[ch] = t[0];
    sdyx[ch] = t[1];
    if (dgamma) store(dgamma, ch, M(load(dgamma, ch)) + t[1]);
    if (dbeta) store(dbeta, ch, M(load(dbeta, ch)) + t[0]);
    if (ds) store(ds, ch, M(load(ds, ch)) + t[3]);
    if (db) store(db, ch, M(load(db, ch)) + t[2]);
  }
};

template <typename I, int V, typename T, typename X, typename M>
__global__ void backward_dx_fused_rows_kernel(int64_t vectors, int c, M inv_m, const T* dout, const X* y,
                                              const X* xs, const M* mean, const M* inv_std, const T* gamma,
                                              gpu::BnTail<T> tail, const M* sdy, const M* sdyx, T* dx) {
  CORTADO_KERNEL_LOOP(q, vectors) {
    const int64_t j = q * V;
    const int ch0 = static_cast<int>(static_cast<I>(j) % static_cast<I>(c));
    const VecOf<T, V> d = load_vec<V>(dout, j);
    VecOf<X, V> yv{}, xv{};
    if (y) yv = load_vec<V>(y, j);
    if (sdy) xv = load_vec<V>(xs, j);
    VecOf<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const int ch = ch0 + k;
      const M mu = mean[ch], is = inv_std[ch];
      const M g = (gamma ? M(load(gamma, ch)) : M(1)) * is;
      const M xhat = sdy ? (M(load(xv.v, k)) - mu) * is : M(0);
      M e = tail_dy<T, X, M>(M(load(d.v, k)), M(load(yv.v, k)), xhat, tail, ch, nullptr);
      if (sdy) e = e - sdy[ch] * inv_m - xhat * (sdyx[ch] * inv_m);
      store(out.v, k, g * e);
    }
    store_vec<V>(dx, j, out);
  }
}

template <int V, typename T, typename X, typename M>
__global__ void backward_dx_fused_kernel(int64_t planes, int c, int64_t s, M inv_m, const T* dout, const X* y,
                                         const X* xs, const M* mean, const M* inv_std, const T* gamma,
                                         gpu::BnTail<T> tail, const M* sdy, const M* sdyx, T* dx) {
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const int ch = static_cast<int>(p % c);
    const M mu = mean[ch], is = inv_std[ch];
    const M g = (gamma ? M(load(gamma, ch)) : M(1)) * is;
    const M mdy = sdy ? sdy[ch] * inv_m : M(0), mdyx = sdy ? sdyx[ch] * inv_m : M(0);
    const int64_t base = p * s;
    for (int64_t i = int64_t(threadIdx.x) * V; i < s; i += int64_t(blockDim.x) * V) {
      const VecOf<T, V> d = load_vec<V>(dout, base + i);
      VecOf<X, V> yv{}, xv{};
      if (y) yv = load_vec<V>(y, base + i);
      if (sdy) xv = load_vec<V>(xs, base + i);
      VecOf<T, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const M xhat = sdy ? (M(load(xv.v, k)) - mu) * is : M(0);
        M e = tail_dy<T, X, M>(M(load(d.v, k)), M(load(yv.v, k)), xhat, tail, ch, nullptr);
        if (sdy) e = e - mdy - xhat * mdyx;
        store(out.v, k, g * e);
      }
      store_vec<V>(dx, base + i, out);
    }
  }
}

template <typename M>
__global__ void running_from_saved_kernel(int c, M eps, M maf, M unbias, const M* mean, const M* inv_std,
                                          M* run_mean, M* run_var, M* run_factor) {
  CORTADO_KERNEL_LOOP(i, c) {
    const M v = max(M(1) / (inv_std[i] * inv_std[i]) - eps, M(0));
    run_mean[i] = maf * run_mean[i] + mean[i];
    run_var[i] = maf * run_var[i] + unbias * v;
    if (i == 0) run_factor[0] = maf * run_factor[0] + M(1);
  }
}

template <typename T>
__global__ void add_param_diff_kernel(int c, const float* d, T* diff) {
  CORTADO_KERNEL_LOOP(i, c) store(diff, i, dmath_t<T>(load(diff, i)) + dmath_t<T>(d[i]));
}

}  // namespace

namespace gpu {

template <typename M>
void bn_running_from_saved(int c, double eps, double maf, double unbias, const M* mean, const M* inv_std,
                           M* run_mean, M* run_var, M* run_factor, CUstream_st* stream) {
  if (c <= 0) return;
  running_from_saved_kernel<M><<<cuda::blocks_for(c), cuda::kThreads, 0, stream>>>(
      c, M(eps), M(maf), M(unbias), mean, inv_std, run_mean, run_var, run_factor);
  CORTADO_KERNEL_CHECK();
}
template void bn_running_from_saved<float>(int, double, double, double, const float*, const float*, float*, float*,
                                           float*, CUstream_st*);
template void bn_running_from_saved<double>(int, double, double, double, const double*, const double*, double*,
                                            double*, double*, CUstream_st*);

template <typename T>
void bn_add_param_diff(int c, const float* d, T* diff, CUstream_st* stream) {
  if (c <= 0) return;
  add_param_diff_kernel<<<cuda::blocks_for(c), cuda::kThreads, 0, stream>>>(c, d, dev(diff));
  CORTADO_KERNEL_CHECK();
}
#define CORTADO_INSTANTIATE_BN_ADD(T) template void bn_add_param_diff<T>(int, const float*, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_BN_ADD)
#undef CORTADO_INSTANTIATE_BN_ADD

template <typename T, typename M>
void bn_normalize_fused(int n, int c, int64_t s, const T* x, const M* mean, const M* inv_std, const T* gamma,
                        const T* beta, BnTail<T> tail, T* x_saved, T* y, CUstream_st* stream) {
  const int64_t planes = int64_t(n) * c;
  if (planes == 0 || s == 0) return;
  using D = dev_t<T>;
  const BnTail<D> t{dev(tail.scale), dev(tail.bias), tail.relu, dev(tail.residual), dev(tail.residual_diff)};
  const void* residual = tail.residual;
  if (s == 1 && c > 1) {  // channels last
    constexpr int V = 16 / sizeof(T);
    if (kernels::vector_width(c, sizeof(T), {x, x_saved, y, residual}) > 1) {
      CORTADO_LAUNCH_INDEXED_V(normalize_fused_rows_kernel, V, planes, stream, planes / V, c, dev(x), mean, inv_std,
                               dev(gamma), dev(beta), t, dev(x_saved), dev(y));
    } else {
      CORTADO_LAUNCH_INDEXED_V(normalize_fused_rows_kernel, 1, planes, stream, planes, c, dev(x), mean, inv_std,
                               dev(gamma), dev(beta), t, dev(x_saved), dev(y));
    }
    CORTADO_KERNEL_CHECK();
    return;
  }
  const int v = kernels::vector_width(s, sizeof(T), {x, x_saved, y, residual});
  const dim3 grid = kernels::plane_grid(planes);
  if (v > 1) {
    constexpr int V = 16 / sizeof(T);
    normalize_fused_kernel<V, D, M><<<grid, kernels::plane_block(s / V), 0, stream>>>(
        planes, c, s, dev(x), mean, inv_std, dev(gamma), dev(beta), t, dev(x_saved), dev(y));
  } else {
    normalize_fused_kernel<1, D, M><<<grid, kernels::plane_block(s), 0, stream>>>(
        planes, c, s, dev(x), mean, inv_std, dev(gamma), dev(beta), t, dev(x_saved), dev(y));
  }
  CORTADO_KERNEL_CHECK();
}

template <typename T, typename X, typename M>
void bn_backward_reduce_fused(int n, int c, int64_t s, const T* dout, const X* y, const X* x_saved, const M* mean,
                              const M* inv_std, BnTail<T> tail, M* sdy, M* sdyx, T* dgamma, T* dbeta, T* ds,
                              T* db, CUstream_st* stream) {
  if (c == 0) return;
  using D = dev_t<T>;
  using DX = dev_t<X>;
  const BnTail<D> t{dev(tail.scale), dev(tail.bias), tail.relu, dev(tail.residual), dev(tail.residual_diff)};
  const void* residual_diff = tail.residual_diff;
  constexpr size_t widest = sizeof(T) > sizeof(X) ? sizeof(T) : sizeof(X);
  kernels::channel_reduce_vec<4, M, widest>(
      kernels::ChannelShape{n, c, s}, {dout, y, x_saved, residual_diff},
      SumFusedDy<D, DX, M>{dev(dout), dev(y), dev(x_saved), mean, inv_std, t},
      FinishFusedBackward<D, M>{sdy, sdyx, dev(dgamma), dev(dbeta), dev(ds), dev(db)}, stream);
}

template <typename T, typename X, typename M>
void bn_backward_dx_fused(int n, int c, int64_t s, const T* dout, const X* y, const X* x_saved, const M* mean,
                          const M* inv_std, const T* gamma, BnTail<T> tail, const M* sdy, const M* sdyx, T* dx,
                          CUstream_st* stream) {
  const int64_t planes = int64_t(n) * c;
  if (planes == 0 || s == 0) return;
  using D = dev_t<T>;
  using DX = dev_t<X>;
  const BnTail<D> t{dev(tail.scale), dev(tail.bias), tail.relu, dev(tail.residual), dev(tail.residual_diff)};
  const M inv_m = M(1) / M(double(n) * double(s));
  constexpr size_t widest = sizeof(T) > sizeof(X) ? sizeof(T) : sizeof(X);
  constexpr int V = static_cast<int>(16 / widest);
  if (s == 1 && c > 1) {  // channels last
    if (kernels::vector_width(c, widest, {dout, y, x_saved, dx}) > 1) {
      CORTADO_LAUNCH_INDEXED_V(backward_dx_fused_rows_kernel, V, planes, stream, planes / V, c, inv_m, dev(dout),
                               dev(y), dev(x_saved), mean, inv_std, dev(gamma), t, sdy, sdyx, dev(dx));
    } else {
      CORTADO_LAUNCH_INDEXED_V(backward_dx_fused_rows_kernel, 1, planes, stream, planes, c, inv_m, dev(dout), dev(y),
                               dev(x_saved), mean, inv_std, dev(gamma), t, sdy, sdyx, dev(dx));
    }
    CORTADO_KERNEL_CHECK();
    return;
  }
  const dim3 grid = kernels::plane_grid(planes);
  if (kernels::vector_width(s, widest, {dout, y, x_saved, dx}) > 1) {
    backward_dx_fused_kernel<V, D, DX, M><<<grid, kernels::plane_block(s / V), 0, stream>>>(
        planes, c, s, inv_m, dev(dout), dev(y), dev(x_saved), mean, inv_std, dev(gamma), t, sdy, sdyx, dev(dx));
  } else {
    backward_dx_fused_kernel<1, D, DX, M><<<grid, kernels::plane_block(s), 0, stream>>>(
        planes, c, s, inv_m, dev(dout), dev(y), dev(x_saved), mean, inv_std, dev(gamma), t, sdy, sdyx, dev(dx));
  }
  CORTADO_KERNEL_CHECK();
}


template <typename T, typename M>
void bn_batch_stats(int n, int c, int64_t s, const T* x, double maf, M* mean, M* var, M* run_mean, M* run_var,
                    M* run_factor, CUstream_st* stream) {
  if (c == 0) return;
  using D = dev_t<T>;
  const kernels::ChannelShape shape{n, c, s};
  const int64_t m = int64_t(n) * s;
  const M inv_m = m > 0 ? M(1) / M(m) : M(0);
  const M unbias = m > 1 ? M(double(m) / double(m - 1)) : M(1);
  kernels::channel_reduce_vec<2, M, sizeof(T)>(
      shape, {x}, SumShifted<D, M>{dev(x), s},
      FinishStats<D, M>{dev(x), s, m > 0, inv_m, unbias, M(maf), mean, var, run_mean, run_var, run_factor}, stream);
}

template <typename M>
void bn_global_stats(int c, const M* run_mean, const M* run_var, const M* run_factor, M* mean, M* var,
                     CUstream_st* stream) {
  if (c == 0) return;
  global_stats_kernel<<<cuda::blocks_for(c), cuda::kThreads, 0, stream>>>(c, run_mean, run_var, run_factor, mean,
                                                                          var);
  CORTADO_KERNEL_CHECK();
}

template <typename M>
void bn_inv_std(int c, double eps, M* v, CUstream_st* stream) {
  if (c == 0) return;
  inv_std_kernel<<<cuda::blocks_for(c), cuda::kThreads, 0, stream>>>(c, M(eps), v);
  CORTADO_KERNEL_CHECK();
}

template <typename T, typename M>
void bn_normalize(int n, int c, int64_t s, const T* x, const M* mean, const M* inv_std, const T* gamma,
                  const T* beta, T* x_saved, T* y, CUstream_st* stream) {
  const int64_t total = int64_t(n) * c * s;
  if (total == 0) return;
  constexpr int V = static_cast<int>(16 / sizeof(T));
  if (kernels::vector_width(s, sizeof(T), {x, x_saved, y}) > 1)
    CORTADO_LAUNCH_INDEXED_V(normalize_kernel, V, total, stream, total / V, c, s, dev(x), mean, inv_std, dev(gamma),
                             dev(beta), dev(x_saved), dev(y));
  else
    CORTADO_LAUNCH_INDEXED_V(normalize_kernel, 1, total, stream, total, c, s, dev(x), mean, inv_std, dev(gamma),
                             dev(beta), dev(x_saved), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T, typename X, typename M>
void bn_backward_reduce(int n, int c, int64_t s, const T* dy, const X* x_saved, const M* mean, const M* inv_std,
                        M* sdy, M* sdyx, T* dgamma, T* dbeta, CUstream_st* stream) {
  if (c == 0) return;
  using D = dev_t<T>;
  constexpr size_t widest = sizeof(T) > sizeof(X) ? sizeof(T) : sizeof(X);
  kernels::channel_reduce_vec<2, M, widest>(
      kernels::ChannelShape{n, c, s}, {dy, x_saved}, SumDyDyXhat<D, dev_t<X>, M>{dev(dy), dev(x_saved), mean, inv_std},
      FinishBackward<D, M>{sdy, sdyx, dev(dgamma), dev(dbeta)}, stream);
}

template <typename T, typename X, typename M>
void bn_backward_dx(int n, int c, int64_t s, const T* dy, const X* x_saved, const M* mean, const M* inv_std,
                    const T* gamma, const M* sdy, const M* sdyx, T* dx, CUstream_st* stream) {
  const int64_t total = int64_t(n) * c * s;
  if (total == 0) return;
  const M inv_m = M(1) / M(double(n) * double(s));
  constexpr size_t widest = sizeof(T) > sizeof(X) ? sizeof(T) : sizeof(X);
  constexpr int V = static_cast<int>(16 / widest);
  if (kernels::vector_width(s, widest, {dy, sdy ? x_saved : nullptr, dx}) > 1)
    CORTADO_LAUNCH_INDEXED_V(backward_dx_kernel, V, total, stream, total / V, c, s, inv_m, dev(dy), dev(x_saved),
                             mean, inv_std, dev(gamma), sdy, sdyx, dev(dx));
  else
    CORTADO_LAUNCH_INDEXED_V(backward_dx_kernel, 1, total, stream, total, c, s, inv_m, dev(dy), dev(x_saved), mean,
                             inv_std, dev(gamma), sdy, sdyx, dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_BN_FORWARD(T, M)                                                                    \
  template void bn_batch_stats<T, M>(int, int, int64_t, const T*, double, M*, M*, M*, M*, M*, CUstream_st*);   \
  template void bn_normalize<T, M>(int, int, int64_t, const T*, const M*, const M*, const T*, const T*, T*, T*, \
                                   CUstream_st*);                                                              \
  template void bn_normalize_fused<T, M>(int, int, int64_t, const T*, const M*, const M*, const T*, const T*,   \
                                         BnTail<T>, T*, T*, CUstream_st*);
#define CORTADO_INSTANTIATE_BN_FORWARD_T(T) CORTADO_INSTANTIATE_BN_FORWARD(T, math_t<T>)
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_BN_FORWARD_T)
#undef CORTADO_INSTANTIATE_BN_FORWARD
// T: the backward type (dy, dx), X: the forward type (the saved x).
#define CORTADO_INSTANTIATE_BN_BACKWARD(T, X, M)                                                               \
  template void bn_backward_reduce<T, X, M>(int, int, int64_t, const T*, const X*, const M*, const M*, M*, M*, \
                                            T*, T*, CUstream_st*);                                             \
  template void bn_backward_dx<T, X, M>(int, int, int64_t, const T*, const X*, const M*, const M*, const T*,   \
                                        const M*, const M*, T*, CUstream_st*);                                 \
  template void bn_backward_reduce_fused<T, X, M>(int, int, int64_t, const T*, const X*, const X*, const M*,   \
                                                  const M*, BnTail<T>, M*, M*, T*, T*, T*, T*, CUstream_st*);  \
  template void bn_backward_dx_fused<T, X, M>(int, int, int64_t, const T*, const X*, const X*, const M*,       \
                                              const M*, const T*, BnTail<T>, const M*, const M*, T*,           \
                                              CUstream_st*)
// For every layer pair (F, B): T = B, X = F.
#define CORTADO_INSTANTIATE_BN_BACKWARD_PAIR(_, F, B) CORTADO_INSTANTIATE_BN_BACKWARD(B, F, math_t<B>);
CORTADO_FOR_EACH_PAIR(CORTADO_INSTANTIATE_BN_BACKWARD_PAIR, _)
#undef CORTADO_INSTANTIATE_BN_BACKWARD_PAIR
#undef CORTADO_INSTANTIATE_BN_BACKWARD
template void bn_global_stats<double>(int, const double*, const double*, const double*, double*, double*,
                                      CUstream_st*);
template void bn_global_stats<float>(int, const float*, const float*, const float*, float*, float*, CUstream_st*);
template void bn_inv_std<double>(int, double, double*, CUstream_st*);
template void bn_inv_std<float>(int, double, float*, CUstream_st*);

}  // namespace gpu

}  // namespace cortado
