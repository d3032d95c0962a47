// Embed kernels (64-bit indexes, grid-stride loops).
// Forward: one thread per top element (m, d) copies W[idx[m], d] and adds
// b[d] in dmath_t (float for half, double for double).
// Weight backward: one thread per (m, d); the thread whose m is the first
// occurrence of its index sums dy[m', d] over every m' >= m with the same
// index, ascending, in dmath_t, and adds the sum once to dW[idx, d]: no
// atomics, the CPU's order, deterministic. Cost O(M^2 N) comparisons of
// indexes, fine for the batch sizes an Embed sees per iteration.
// Bias backward: one thread per column d sums its M values in dmath_t.
// Indexes: every thread checks its index as the CPU does (an integer in
// [0, rows), compared in float). A bad one is never used as an address: its
// forward row gets zeros and the weight backward skips it; the column-0
// thread records it in the pinned error word with atomicMin (lowest position
// wins), for the layer to report on its next call.
#include "cortado/layers/embed_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"
#include "loss_sum.cuh"  // bad_label_key: the GpuLabelError word's format

namespace cortado {
namespace {

using namespace kernels;

/// Whether v names one of `rows` rows: the CPU's CheckIndex, range first.
__device__ __forceinline__ bool is_index(float v, int rows) {
  return v >= 0.f && v < static_cast<float>(rows) && static_cast<float>(static_cast<int64_t>(v)) == v;
}

template <typename T>
__global__ void embed_forward_kernel(int64_t n, int64_t N, int rows, const float* idx, const T* w, const T* b,
                                     T* y, unsigned long long* error) {
  CORTADO_KERNEL_LOOP(k, n) {
    const int64_t m = k / N, d = k % N;
    const float v = idx[m];
    if (!is_index(v, rows)) {
      if (d == 0) atomicMin(error, bad_label_key(m, v));
      store(y, k, dmath_t<T>(0));
      continue;
    }
    const int64_t r = static_cast<int64_t>(v);
    if (b) {
      store(y, k, add_rn(load(w, r * N + d), load(b, d)));
    } else {
      y[k] = w[r * N + d];
    }
  }
}

template <typename T>
__global__ void embed_backward_weight_kernel(int64_t M, int64_t N, int rows, const float* idx, const T* dy, T* dw,
                                             unsigned long long* error) {
  CORTADO_KERNEL_LOOP(k, M * N) {
    const int64_t m = k / N, d = k % N;
    const float r = idx[m];
    if (!is_index(r, rows)) {
      if (d == 0) atomicMin(error, bad_label_key(m, r));
      continue;
    }
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
void embed_forward(int64_t n, int64_t N, int rows, const float* idx, const T* w, const T* b, T* y,
                   unsigned long long* error, CUstream_st* stream) {
  if (n == 0) return;
  embed_forward_kernel<dev_t<T>><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, N, rows, idx, dev(w),
                                                                                       dev(b), dev(y), error);
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void embed_backward_weight(int64_t M, int64_t N, int rows, const float* idx, const T* dy, T* dw,
                           unsigned long long* error, CUstream_st* stream) {
  if (M * N == 0) return;
  embed_backward_weight_kernel<dev_t<T>><<<cuda::blocks_for(M * N), cuda::kThreads, 0, stream>>>(
      M, N, rows, idx, dev(dy), dev(dw), error);
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
  template void embed_forward<T>(int64_t, int64_t, int, const float*, const T*, const T*, T*,              \
                                 unsigned long long*, CUstream_st*);                                        \
  template void embed_backward_weight<T>(int64_t, int64_t, int, const float*, const T*, T*,                 \
                                         unsigned long long*, CUstream_st*);                                \
  template void embed_backward_bias<T>(int64_t, int64_t, const T*, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_EMBED)

}  // namespace gpu
}  // namespace cortado
