// Elementwise kernels shared by RNN and LSTM, on their math type (float or
// double): the continuation scaling of the previous state and tanh with its
// gradient. One thread per element, grid-stride, 64-bit indexes.
#include "cortado/layers/recurrent_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

__device__ __forceinline__ float tanh_of(float v) { return tanhf(v); }
__device__ __forceinline__ double tanh_of(double v) { return tanh(v); }

template <typename T>
__global__ void cont_scale_kernel(int64_t n, int64_t cols, const T* cont, const T* x, T* y) {
  CORTADO_KERNEL_LOOP(k, n) y[k] = cont[k / cols] * x[k];
}

template <typename T>
__global__ void tanh_kernel(int64_t n, T* x) {
  CORTADO_KERNEL_LOOP(k, n) x[k] = tanh_of(x[k]);
}

template <typename T>
__global__ void tanh_grad_kernel(int64_t n, const T* y, const T* dy, const T* dy2, T* dx) {
  CORTADO_KERNEL_LOOP(k, n) {
    const T d = dy2 ? dy[k] + dy2[k] : dy[k];
    dx[k] = d * (T(1) - y[k] * y[k]);
  }
}

}  // namespace

namespace gpu {

template <typename T>
void recurrent_cont_scale(int64_t rows, int64_t cols, const T* cont, const T* x, T* y, CUstream_st* stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  cont_scale_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, cols, cont, x, y);
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void recurrent_tanh(int64_t n, T* x, CUstream_st* stream) {
  if (n == 0) return;
  tanh_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, x);
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void recurrent_tanh_grad(int64_t n, const T* y, const T* dy, const T* dy2, T* dx, CUstream_st* stream) {
  if (n == 0) return;
  tanh_grad_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, y, dy, dy2, dx);
  CORTADO_KERNEL_CHECK();
}

// The recurrent layers compute in their math type only.
#define CORTADO_INSTANTIATE_RECURRENT(T)                                                                 \
  template void recurrent_cont_scale<T>(int64_t, int64_t, const T*, const T*, T*, CUstream_st*);         \
  template void recurrent_tanh<T>(int64_t, T*, CUstream_st*);                                           \
  template void recurrent_tanh_grad<T>(int64_t, const T*, const T*, const T*, T*, CUstream_st*);
CORTADO_INSTANTIATE_RECURRENT(float)
CORTADO_INSTANTIATE_RECURRENT(double)

}  // namespace gpu
}  // namespace cortado
