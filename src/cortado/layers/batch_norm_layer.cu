// Kernels of BatchNormLayer. x is (N, C, S); channel c holds m = N * S values.
//
// Reductions (statistics in the forward, sum dy and sum dy * xhat in the
// backward) go through channel_reduce.cuh: many blocks per channel, partial
// sums in M (float for __half, the type itself otherwise), added per channel
// in a fixed order. The variance is a second pass over x once the mean is
// known (as on the CPU). The finishing step writes the per-channel results
// and updates the running statistics (channel 0 also the moving-average
// factor).
// Elementwise kernels (normalize, dx) are grid-stride loops over N * C * S
// computing in M and rounding once to the storage type.

#include "cortado/layers/batch_norm_layer.hpp"
#include "cortado/util/storage_types.hpp"
#include "channel_reduce.cuh"
#include "device_values.cuh"

namespace cortado {

namespace {

using namespace kernels;

// Statistics pass 1: the sum of x; finishing: mean = sum / m.
template <typename T, typename M>
struct SumX {
  const T* x;
  __device__ void operator()(int64_t j, int64_t, M* acc) const { acc[0] += M(load(x, j)); }
};
template <typename M>
struct FinishMean {
  M inv_m;
  M* mean;
  __device__ void operator()(int64_t ch, const M* t) const { mean[ch] = t[0] * inv_m; }
};
// Pass 2: the sum of squared deviations; finishing: the biased variance and
// the running statistics.
template <typename T, typename M>
struct SumSquaredDeviation {
  const T* x;
  const M* mean;
  __device__ void operator()(int64_t j, int64_t ch, M* acc) const {
    const M d = M(load(x, j)) - mean[ch];
    acc[0] += d * d;
  }
};
template <typename M>
struct FinishVariance {
  M inv_m, unbias, maf;
  const M* mean;
  M *var, *run_mean, *run_var, *run_factor;
  __device__ void operator()(int64_t ch, const M* t) const {
    const M v = t[0] * inv_m;
    var[ch] = v;
    run_mean[ch] = maf * run_mean[ch] + mean[ch];
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
  __device__ void operator()(int64_t j, int64_t ch, M* acc) const {
    const M d = load(dy, j);
    acc[0] += d;
    acc[1] += d * ((M(load(xs, j)) - mean[ch]) * inv_std[ch]);
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

template <typename I, typename T, typename M>
__global__ void normalize_kernel(int64_t total, int c, int64_t s, const T* x, const M* mean, const M* inv_std,
                                 const T* gamma, const T* beta, T* x_saved, T* y) {
  CORTADO_KERNEL_LOOP(j, total) {
    const int64_t ch = kernels::channel_of<I>(j, s, c);
    const T v = x[j];  // read before y (which may be x) is written
    if (x_saved) x_saved[j] = v;
    const M h = (M(load(&v, 0)) - mean[ch]) * inv_std[ch];
    store(y, j, gamma ? M(load(gamma, ch)) * h + M(load(beta, ch)) : h);
  }
}

template <typename I, typename T, typename X, typename M>
__global__ void backward_dx_kernel(int64_t total, int c, int64_t s, M inv_m, const T* dy, const X* xs,
                                   const M* mean, const M* inv_std, const T* gamma, const M* sdy, const M* sdyx,
                                   T* dx) {
  CORTADO_KERNEL_LOOP(j, total) {
    const int64_t ch = kernels::channel_of<I>(j, s, c);
    const M g = (gamma ? M(load(gamma, ch)) : M(1)) * inv_std[ch];
    M d = load(dy, j);
    if (sdy) {
      const M xhat = (M(load(xs, j)) - mean[ch]) * inv_std[ch];
      d = d - sdy[ch] * inv_m - xhat * (sdyx[ch] * inv_m);
    }
    store(dx, j, g * d);
  }
}

}  // namespace

namespace gpu {

template <typename T, typename M>
void bn_batch_stats(int n, int c, int64_t s, const T* x, double maf, M* mean, M* var, M* run_mean, M* run_var,
                    M* run_factor, CUstream_st* stream) {
  if (c == 0) return;
  using D = dev_t<T>;
  const kernels::ChannelShape shape{n, c, s};
  const int64_t m = int64_t(n) * s;
  const M inv_m = m > 0 ? M(1) / M(m) : M(0);
  const M unbias = m > 1 ? M(double(m) / double(m - 1)) : M(1);
  kernels::channel_reduce<1, M>(shape, SumX<D, M>{dev(x)}, FinishMean<M>{inv_m, mean}, stream);
  kernels::channel_reduce<1, M>(shape, SumSquaredDeviation<D, M>{dev(x), mean},
                                FinishVariance<M>{inv_m, unbias, M(maf), mean, var, run_mean, run_var, run_factor},
                                stream);
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
  CORTADO_LAUNCH_INDEXED(normalize_kernel, total, stream, total, c, s, dev(x), mean, inv_std, dev(gamma), dev(beta),
                         dev(x_saved), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T, typename X, typename M>
void bn_backward_reduce(int n, int c, int64_t s, const T* dy, const X* x_saved, const M* mean, const M* inv_std,
                        M* sdy, M* sdyx, T* dgamma, T* dbeta, CUstream_st* stream) {
  if (c == 0) return;
  using D = dev_t<T>;
  kernels::channel_reduce<2, M>(kernels::ChannelShape{n, c, s},
                                SumDyDyXhat<D, dev_t<X>, M>{dev(dy), dev(x_saved), mean, inv_std},
                                FinishBackward<D, M>{sdy, sdyx, dev(dgamma), dev(dbeta)}, stream);
}

template <typename T, typename X, typename M>
void bn_backward_dx(int n, int c, int64_t s, const T* dy, const X* x_saved, const M* mean, const M* inv_std,
                    const T* gamma, const M* sdy, const M* sdyx, T* dx, CUstream_st* stream) {
  const int64_t total = int64_t(n) * c * s;
  if (total == 0) return;
  const M inv_m = M(1) / M(double(n) * double(s));
  CORTADO_LAUNCH_INDEXED(backward_dx_kernel, total, stream, total, c, s, inv_m, dev(dy), dev(x_saved), mean, inv_std,
                         dev(gamma), sdy, sdyx, dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_BN_FORWARD(T, M)                                                                    \
  template void bn_batch_stats<T, M>(int, int, int64_t, const T*, double, M*, M*, M*, M*, M*, CUstream_st*);   \
  template void bn_normalize<T, M>(int, int, int64_t, const T*, const M*, const M*, const T*, const T*, T*, T*, \
                                   CUstream_st*);
#define CORTADO_INSTANTIATE_BN_FORWARD_T(T) CORTADO_INSTANTIATE_BN_FORWARD(T, math_t<T>)
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_BN_FORWARD_T)
#undef CORTADO_INSTANTIATE_BN_FORWARD
// T: the backward type (dy, dx), X: the forward type (the saved x).
#define CORTADO_INSTANTIATE_BN_BACKWARD(T, X, M)                                                               \
  template void bn_backward_reduce<T, X, M>(int, int, int64_t, const T*, const X*, const M*, const M*, M*, M*, \
                                            T*, T*, CUstream_st*);                                             \
  template void bn_backward_dx<T, X, M>(int, int, int64_t, const T*, const X*, const M*, const M*, const T*,   \
                                        const M*, const M*, T*, CUstream_st*)
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
