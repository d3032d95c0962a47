// Embed kernels (64-bit indexes, grid-stride loops).
// Forward: one thread per top element (m, d) copies W[idx[m], d] and adds
// b[d] in dmath_t (float for half, double for double).
// Weight backward: one thread per (m, d); the thread whose m is the first
// occurrence of its index sums dy[m', d] over every m' >= m with the same
// index, ascending, in dmath_t, and adds the sum once to dW[idx, d]: no
// atomics, the CPU's order, deterministic. Cost O(M^2 N) comparisons of
// indexes, fine for the batch sizes an Embed sees per iteration.
// Bias backward: one thread per column d sums its M values in dmath_t.
#include "cortado/layers/embed_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void embed_forward_kernel(int64_t n, int64_t N, const float* idx, const T* w, const T* b, T* y) {
  CORTADO_KERNEL_LOOP(k, n) {
    const int64_t m = k / N, d = k % N;
    const int64_t r = static_cast<int64_t>(idx[m]);
    if (b) {
      store(y, k, add_rn(load(w, r * N + d), load(b, d)));
    } else {
      y[k] = w[r * N + d];
    }
  }
}

template <typename T>
__global__ void embed_backward_weight_kernel(int64_t M, int64_t N, const float* idx, const T* dy, T* dw) {
  CORTADO_KERNEL_LOOP(k, M * N) {
    const int64_t m = k / N, d = k % N;
    const float r = idx[m];
    bool first = true;
    for (int64_t p = 0; p < m && first; ++p) first = idx[p] != r;
    if (!first) continue;
    dmath_t<T> sum = 0;
    for (int64_t p = m; p < M; ++p) {
      if (idx[p] == r) sum = add_rn(sum, load(dy, p * N + d));
    }
    const int64_t at = static_cast<int64_t>(r) * N + d;
    store(dw, at, add_rn(load(dw, at), sum));
  }
}

template <typename T>
__global__ void embed_backward_bias_kernel(int64_t M, int64_t N, const T* dy, T* db) {
  CORTADO_KERNEL_LOOP(d, N) {
    dmath_t<T> sum = 0;
    for (int64_t m = 0; m < M; ++m) sum = add_rn(sum, load(dy, m * N + d));
    store(db, d, add_rn(load(db, d), sum));
  }
}

}  // namespace

namespace gpu {

template <typename T>
void embed_forward(int64_t n, int64_t N, const float* idx, const T* w, const T* b, T* y, CUstream_st* stream) {
  if (n == 0) return;
  embed_forward_kernel<dev_t<T>><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, N, idx, dev(w), dev(b),
                                                                                       dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void embed_backward_weight(int64_t M, int64_t N, const float* idx, const T* dy, T* dw, CUstream_st* stream) {
  if (M * N == 0) return;
  embed_backward_weight_kernel<dev_t<T>><<<cuda::blocks_for(M * N), cuda::kThreads, 0, stream>>>(
      M, N, idx, dev(dy), dev(dw));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void embed_backward_bias(int64_t M, int64_t N, const T* dy, T* db, CUstream_st* stream) {
  if (N == 0) return;
  embed_backward_bias_kernel<dev_t<T>><<<cuda::blocks_for(N), cuda::kThreads, 0, stream>>>(M, N, dev(dy),
                                                                                             dev(db));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_EMBED(T)                                                                         \
  template void embed_forward<T>(int64_t, int64_t, const float*, const T*, const T*, T*, CUstream_st*);   \
  template void embed_backward_weight<T>(int64_t, int64_t, const float*, const T*, T*, CUstream_st*);     \
  template void embed_backward_bias<T>(int64_t, int64_t, const T*, T*, CUstream_st*);
CORTADO_INSTANTIATE_EMBED(double)
CORTADO_INSTANTIATE_EMBED(float)
CORTADO_INSTANTIATE_EMBED(float16)

}  // namespace gpu
}  // namespace cortado
