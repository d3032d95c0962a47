// PReLU kernels.
// - prelu_forward / prelu_backward: one thread per element in a grid-stride
//   loop (64-bit indexes); values loaded into their math type (float for
//   float16, double for double) and stored once; nothing accumulates.
// - prelu_param_backward: one block per slope (blockIdx.x = slope c). The
//   block's threads stride over the elements of that slope (all elements when
//   the slope is shared; else every (n, c, j) with j < dim), summing
//   dy * x * (x <= 0) in math_t; a shared-memory tree reduction in math_t
//   gives the block's sum, which thread 0 adds to da[c] (read and written once
//   in the storage type). The summation order differs from the CPU path's.
#include "cortado/layers/prelu_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

constexpr int kReduceThreads = 256;

template <typename T>
__global__ void prelu_forward_kernel(int64_t n, int channels, int64_t dim, int div, const T* x, const T* a, T* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const int c = static_cast<int>((i / dim) % channels) / div;
    const M v = load(x, i);
    store(y, i, v > M(0) ? v : load(a, c) * v);
  }
}

template <typename T>
__global__ void prelu_backward_kernel(int64_t n, int channels, int64_t dim, int div, const T* dy, const T* x,
                                      const T* a, T* dx) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const int c = static_cast<int>((i / dim) % channels) / div;
    const M g = load(dy, i);
    store(dx, i, load(x, i) > M(0) ? g : load(a, c) * g);
  }
}

template <typename T>
__global__ void prelu_param_backward_kernel(int64_t n, int channels, int64_t dim, bool shared, const T* dy,
                                            const T* x, T* da) {
  using M = dmath_t<T>;
  __shared__ M partial[kReduceThreads];
  const int c = blockIdx.x;
  M sum = M(0);
  if (shared) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const M v = load(x, i);
      if (v <= M(0)) sum += load(dy, i) * v;
    }
  } else {
    const int64_t per_channel = (n / (dim * channels)) * dim;  // num * dim elements
    for (int64_t k = threadIdx.x; k < per_channel; k += blockDim.x) {
      const int64_t i = ((k / dim) * channels + c) * dim + k % dim;
      const M v = load(x, i);
      if (v <= M(0)) sum += load(dy, i) * v;
    }
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) store(da, c, load(da, c) + partial[0]);
}

}  // namespace

namespace gpu {

template <typename T>
void prelu_forward(int64_t n, int channels, int64_t dim, int div, const T* x, const T* a, T* y, CUstream_st* stream) {
  if (n == 0) return;
  prelu_forward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, channels, dim, div, dev(x), dev(a),
                                                                           dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void prelu_backward(int64_t n, int channels, int64_t dim, int div, const T* dy, const T* x, const T* a, T* dx,
                    CUstream_st* stream) {
  if (n == 0) return;
  prelu_backward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, channels, dim, div, dev(dy), dev(x),
                                                                            dev(a), dev(dx));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void prelu_param_backward(int64_t n, int channels, int64_t dim, int num_slopes, const T* dy, const T* x, T* da,
                          CUstream_st* stream) {
  if (n == 0) return;
  // One slope (shared, or a single channel): it covers every element.
  prelu_param_backward_kernel<<<num_slopes, kReduceThreads, 0, stream>>>(n, channels, dim, num_slopes == 1, dev(dy),
                                                                         dev(x), dev(da));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_PRELU(T)                                                                        \
  template void prelu_forward<T>(int64_t, int, int64_t, int, const T*, const T*, T*, CUstream_st*);         \
  template void prelu_backward<T>(int64_t, int, int64_t, int, const T*, const T*, const T*, T*, CUstream_st*); \
  template void prelu_param_backward<T>(int64_t, int, int64_t, int, const T*, const T*, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_PRELU)

}  // namespace gpu
}  // namespace cortado
