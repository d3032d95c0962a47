// Kernels of ScaleLayer; x, y are (outer, dim, inner).
// Forward and dx: grid-stride loops over every element, computing in float
// (double for double) and rounding once. Parameter gradients: one block per
// scale value d; its threads walk the outer * inner values of d, summing
// dy * x and dy in float (double for double), then a shared-memory tree;
// thread 0 writes ds[d] and db[d].

#include "cortado/layers/scale_layer.hpp"
#include "device_values.cuh"

namespace cortado {

namespace {

using kernels::dev;
using kernels::dmath_t;
using kernels::load;
using kernels::store;

constexpr int kBlock = 256;

template <typename T>
__global__ void forward_kernel(int64_t total, int64_t dim, int64_t inner, const T* x, const T* s, const T* b, T* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(j, total) {
    const int64_t d = (j / inner) % dim;
    const M v = M(load(x, j)) * M(load(s, d));
    store(y, j, b ? v + M(load(b, d)) : v);
  }
}

template <typename T>
__global__ void dx_kernel(int64_t total, int64_t dim, int64_t inner, const T* dy, const T* s, T* dx) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(j, total) store(dx, j, M(load(dy, j)) * M(load(s, (j / inner) % dim)));
}

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

template <typename T>
__global__ void params_kernel(int64_t outer, int64_t dim, int64_t inner, const T* dy, const T* x, T* ds,
                              bool accumulate_s, T* db) {
  using M = dmath_t<T>;
  __shared__ M shared[kBlock];
  const int64_t d = blockIdx.x;
  const int64_t m = outer * inner;
  M sx = 0, sb = 0;
  for (int64_t k = threadIdx.x; k < m; k += kBlock) {
    const int64_t j = ((k / inner) * dim + d) * inner + k % inner;
    const M g = load(dy, j);
    if (ds) sx += g * M(load(x, j));
    sb += g;
  }
  if (ds) sx = block_sum(sx, shared);
  if (db) sb = block_sum(sb, shared);
  if (threadIdx.x == 0) {
    if (ds) store(ds, d, (accumulate_s ? M(load(ds, d)) : M(0)) + sx);
    if (db) store(db, d, M(load(db, d)) + sb);
  }
}

}  // namespace

namespace gpu {

template <typename T>
void scale_forward(int64_t outer, int64_t dim, int64_t inner, const T* x, const T* s, const T* b, T* y,
                   CUstream_st* stream) {
  const int64_t total = outer * dim * inner;
  if (total == 0) return;
  forward_kernel<<<cuda::blocks_for(total), cuda::kThreads, 0, stream>>>(total, dim, inner, dev(x), dev(s), dev(b),
                                                                         dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void scale_backward_dx(int64_t outer, int64_t dim, int64_t inner, const T* dy, const T* s, T* dx,
                       CUstream_st* stream) {
  const int64_t total = outer * dim * inner;
  if (total == 0) return;
  dx_kernel<<<cuda::blocks_for(total), cuda::kThreads, 0, stream>>>(total, dim, inner, dev(dy), dev(s), dev(dx));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void scale_backward_params(int64_t outer, int64_t dim, int64_t inner, const T* dy, const T* x, T* ds,
                           bool accumulate_s, T* db, CUstream_st* stream) {
  if (dim == 0) return;
  params_kernel<<<static_cast<unsigned>(dim), kBlock, 0, stream>>>(outer, dim, inner, dev(dy), dev(x), dev(ds),
                                                                    accumulate_s, dev(db));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_SCALE_GPU(T)                                                                          \
  template void scale_forward<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, T*, CUstream_st*);     \
  template void scale_backward_dx<T>(int64_t, int64_t, int64_t, const T*, const T*, T*, CUstream_st*);           \
  template void scale_backward_params<T>(int64_t, int64_t, int64_t, const T*, const T*, T*, bool, T*, CUstream_st*)
CORTADO_INSTANTIATE_SCALE_GPU(double);
CORTADO_INSTANTIATE_SCALE_GPU(float);
CORTADO_INSTANTIATE_SCALE_GPU(float16);
#undef CORTADO_INSTANTIATE_SCALE_GPU

}  // namespace gpu

}  // namespace cortado
