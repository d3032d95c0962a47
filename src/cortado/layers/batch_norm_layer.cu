// Kernels of BatchNormLayer. x is (N, C, S); channel c holds m = N * S values.
//
// Reductions (statistics in the forward, sum dy and sum dy * xhat in the
// backward): one block of kThreads threads per channel; thread t walks the
// channel's values t, t + kThreads, ... (over n and s), accumulating in M
// (float for __half, the type itself otherwise); the partial sums meet in
// shared memory in a tree. The variance is a second pass over the channel
// once the block knows the mean. Thread 0 writes the per-channel results and
// updates the running statistics (and, in block 0, the moving-average factor).
// Elementwise kernels (normalize, dx) are grid-stride loops over N * C * S
// computing in M and rounding once to the storage type.

#include "cortado/layers/batch_norm_layer.hpp"
#include "device_values.cuh"

namespace cortado {

namespace {

using kernels::dev;
using kernels::dmath_t;
using kernels::load;
using kernels::store;

constexpr int kBlock = 256;

/// Sums v over the block (blockDim.x == kBlock); the result is valid in thread 0.
template <typename M>
__device__ M block_sum(M v, M* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int k = kBlock / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) shared[threadIdx.x] += shared[threadIdx.x + k];
    __syncthreads();
  }
  const M r = shared[0];
  __syncthreads();
  return r;
}

template <typename T, typename M>
__global__ void batch_stats_kernel(int n, int c, int64_t s, const T* x, M maf, M* mean, M* var, M* run_mean,
                                   M* run_var, M* run_factor) {
  __shared__ M shared[kBlock];
  const int ch = blockIdx.x;
  const int64_t m = int64_t(n) * s;
  M sum = 0;
  for (int64_t k = threadIdx.x; k < m; k += kBlock) sum += load(x, ((k / s) * c + ch) * s + k % s);
  const M mu = m > 0 ? block_sum(sum, shared) / M(m) : M(0);
  M sq = 0;
  for (int64_t k = threadIdx.x; k < m; k += kBlock) {
    const M d = load(x, ((k / s) * c + ch) * s + k % s) - mu;
    sq += d * d;
  }
  const M v = m > 0 ? block_sum(sq, shared) / M(m) : M(0);
  if (threadIdx.x == 0) {
    mean[ch] = mu;
    var[ch] = v;
    const M unbias = m > 1 ? M(double(m) / double(m - 1)) : M(1);
    run_mean[ch] = maf * run_mean[ch] + mu;
    run_var[ch] = maf * run_var[ch] + unbias * v;
    if (ch == 0) run_factor[0] = maf * run_factor[0] + M(1);
  }
}

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

template <typename T, typename M>
__global__ void normalize_kernel(int64_t total, int c, int64_t s, const T* x, const M* mean, const M* inv_std,
                                 const T* gamma, const T* beta, M* xhat, T* y) {
  CORTADO_KERNEL_LOOP(j, total) {
    const int ch = static_cast<int>((j / s) % c);
    const M h = (M(load(x, j)) - mean[ch]) * inv_std[ch];
    xhat[j] = h;
    store(y, j, gamma ? M(load(gamma, ch)) * h + M(load(beta, ch)) : h);
  }
}

template <typename T, typename M>
__global__ void backward_reduce_kernel(int n, int c, int64_t s, const T* dy, const M* xhat, M* sdy, M* sdyx,
                                       T* dgamma, T* dbeta) {
  __shared__ M shared[kBlock];
  const int ch = blockIdx.x;
  const int64_t m = int64_t(n) * s;
  M a = 0, b = 0;
  for (int64_t k = threadIdx.x; k < m; k += kBlock) {
    const int64_t j = ((k / s) * c + ch) * s + k % s;
    const M d = load(dy, j);
    a += d;
    b += d * xhat[j];
  }
  a = block_sum(a, shared);
  b = block_sum(b, shared);
  if (threadIdx.x == 0) {
    sdy[ch] = a;
    sdyx[ch] = b;
    if (dgamma) store(dgamma, ch, M(load(dgamma, ch)) + b);
    if (dbeta) store(dbeta, ch, M(load(dbeta, ch)) + a);
  }
}

template <typename T, typename M>
__global__ void backward_dx_kernel(int64_t total, int c, int64_t s, M inv_m, const T* dy, const M* xhat,
                                   const M* inv_std, const T* gamma, const M* sdy, const M* sdyx, T* dx) {
  CORTADO_KERNEL_LOOP(j, total) {
    const int ch = static_cast<int>((j / s) % c);
    const M g = (gamma ? M(load(gamma, ch)) : M(1)) * inv_std[ch];
    M d = load(dy, j);
    if (sdy) d = d - sdy[ch] * inv_m - xhat[j] * (sdyx[ch] * inv_m);
    store(dx, j, g * d);
  }
}

}  // namespace

namespace gpu {

template <typename T, typename M>
void bn_batch_stats(int n, int c, int64_t s, const T* x, double maf, M* mean, M* var, M* run_mean, M* run_var,
                    M* run_factor, CUstream_st* stream) {
  if (c == 0) return;
  batch_stats_kernel<<<c, kBlock, 0, stream>>>(n, c, s, dev(x), M(maf), mean, var, run_mean, run_var, run_factor);
  CORTADO_KERNEL_CHECK();
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
                  const T* beta, M* xhat, T* y, CUstream_st* stream) {
  const int64_t total = int64_t(n) * c * s;
  if (total == 0) return;
  normalize_kernel<<<cuda::blocks_for(total), cuda::kThreads, 0, stream>>>(total, c, s, dev(x), mean, inv_std,
                                                                           dev(gamma), dev(beta), xhat, dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T, typename M>
void bn_backward_reduce(int n, int c, int64_t s, const T* dy, const M* xhat, M* sdy, M* sdyx, T* dgamma, T* dbeta,
                        CUstream_st* stream) {
  if (c == 0) return;
  backward_reduce_kernel<<<c, kBlock, 0, stream>>>(n, c, s, dev(dy), xhat, sdy, sdyx, dev(dgamma), dev(dbeta));
  CORTADO_KERNEL_CHECK();
}

template <typename T, typename M>
void bn_backward_dx(int n, int c, int64_t s, const T* dy, const M* xhat, const M* inv_std, const T* gamma,
                    const M* sdy, const M* sdyx, T* dx, CUstream_st* stream) {
  const int64_t total = int64_t(n) * c * s;
  if (total == 0) return;
  const M inv_m = M(1) / M(double(n) * double(s));
  backward_dx_kernel<<<cuda::blocks_for(total), cuda::kThreads, 0, stream>>>(total, c, s, inv_m, dev(dy), xhat,
                                                                             inv_std, dev(gamma), sdy, sdyx, dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_BN_GPU(T, M)                                                                        \
  template void bn_batch_stats<T, M>(int, int, int64_t, const T*, double, M*, M*, M*, M*, M*, CUstream_st*);   \
  template void bn_normalize<T, M>(int, int, int64_t, const T*, const M*, const M*, const T*, const T*, M*, T*, \
                                   CUstream_st*);                                                               \
  template void bn_backward_reduce<T, M>(int, int, int64_t, const T*, const M*, M*, M*, T*, T*, CUstream_st*); \
  template void bn_backward_dx<T, M>(int, int, int64_t, const T*, const M*, const M*, const T*, const M*,      \
                                     const M*, T*, CUstream_st*)
CORTADO_INSTANTIATE_BN_GPU(double, double);
CORTADO_INSTANTIATE_BN_GPU(float, float);
CORTADO_INSTANTIATE_BN_GPU(float16, float);
#undef CORTADO_INSTANTIATE_BN_GPU
template void bn_global_stats<double>(int, const double*, const double*, const double*, double*, double*,
                                      CUstream_st*);
template void bn_global_stats<float>(int, const float*, const float*, const float*, float*, float*, CUstream_st*);
template void bn_inv_std<double>(int, double, double*, CUstream_st*);
template void bn_inv_std<float>(int, double, float*, CUstream_st*);

}  // namespace gpu

}  // namespace cortado
