// Kernels of BiasLayer; x, y are (outer, dim, inner).
// Forward: a grid-stride loop over every element, y = x + b[d] in float
// (double for double), rounded once. Backward: one block per bias value d;
// its threads walk the outer * inner values of d, summing dy in float
// (double for double), then a shared-memory tree; thread 0 writes db[d].

#include "cortado/layers/bias_layer.hpp"
#include "device_values.cuh"

namespace cortado {

namespace {

using kernels::dev;
using kernels::dmath_t;
using kernels::load;
using kernels::store;

constexpr int kBlock = 256;

template <typename T>
__global__ void forward_kernel(int64_t total, int64_t dim, int64_t inner, const T* x, const T* b, T* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(j, total) store(y, j, M(load(x, j)) + M(load(b, (j / inner) % dim)));
}

template <typename T>
__global__ void backward_kernel(int64_t outer, int64_t dim, int64_t inner, const T* dy, bool accumulate, T* db) {
  using M = dmath_t<T>;
  __shared__ M shared[kBlock];
  const int64_t d = blockIdx.x;
  const int64_t m = outer * inner;
  M sum = 0;
  for (int64_t k = threadIdx.x; k < m; k += kBlock) sum += load(dy, ((k / inner) * dim + d) * inner + k % inner);
  shared[threadIdx.x] = sum;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) store(db, d, (accumulate ? M(load(db, d)) : M(0)) + shared[0]);
}

}  // namespace

namespace gpu {

template <typename T>
void bias_forward(int64_t outer, int64_t dim, int64_t inner, const T* x, const T* b, T* y, CUstream_st* stream) {
  const int64_t total = outer * dim * inner;
  if (total == 0) return;
  forward_kernel<<<cuda::blocks_for(total), cuda::kThreads, 0, stream>>>(total, dim, inner, dev(x), dev(b), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void bias_backward(int64_t outer, int64_t dim, int64_t inner, const T* dy, bool accumulate, T* db,
                   CUstream_st* stream) {
  if (dim == 0) return;
  backward_kernel<<<static_cast<unsigned>(dim), kBlock, 0, stream>>>(outer, dim, inner, dev(dy), accumulate, dev(db));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_BIAS_GPU(T)                                                                  \
  template void bias_forward<T>(int64_t, int64_t, int64_t, const T*, const T*, T*, CUstream_st*);       \
  template void bias_backward<T>(int64_t, int64_t, int64_t, const T*, bool, T*, CUstream_st*)
CORTADO_INSTANTIATE_BIAS_GPU(double);
CORTADO_INSTANTIATE_BIAS_GPU(float);
CORTADO_INSTANTIATE_BIAS_GPU(float16);
#undef CORTADO_INSTANTIATE_BIAS_GPU

}  // namespace gpu

}  // namespace cortado
