// ReLU kernels. One thread per element in a grid-stride loop (64-bit
// indexes); each value is loaded from its storage type into its math type
// (float for float16, double for double), computed and stored once. Nothing
// accumulates.
#include "cortado/layers/relu_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void relu_forward_kernel(int64_t n, const T* x, T* y, dmath_t<T> slope) {
  CORTADO_KERNEL_LOOP(i, n) {
    const dmath_t<T> v = load(x, i);
    store(y, i, v > dmath_t<T>(0) ? v : slope * v);
  }
}

template <typename T>
__global__ void relu_backward_kernel(int64_t n, const T* dy, const T* x, T* dx, dmath_t<T> slope) {
  CORTADO_KERNEL_LOOP(i, n) {
    const dmath_t<T> g = load(dy, i);
    store(dx, i, load(x, i) > dmath_t<T>(0) ? g : slope * g);
  }
}

}  // namespace

namespace gpu {

template <typename T>
void relu_forward(int64_t n, const T* x, T* y, double slope, CUstream_st* stream) {
  if (n == 0) return;
  using D = dev_t<T>;
  relu_forward_kernel<D><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(x), dev(y),
                                                                             static_cast<dmath_t<D>>(slope));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void relu_backward(int64_t n, const T* dy, const T* x, T* dx, double slope, CUstream_st* stream) {
  if (n == 0) return;
  using D = dev_t<T>;
  relu_backward_kernel<D><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(dy), dev(x), dev(dx),
                                                                              static_cast<dmath_t<D>>(slope));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_RELU(T)                                                 \
  template void relu_forward<T>(int64_t, const T*, T*, double, CUstream_st*);       \
  template void relu_backward<T>(int64_t, const T*, const T*, T*, double, CUstream_st*);
CORTADO_INSTANTIATE_RELU(double)
CORTADO_INSTANTIATE_RELU(float)
CORTADO_INSTANTIATE_RELU(float16)
CORTADO_INSTANTIATE_RELU(bfloat16)

}  // namespace gpu
}  // namespace cortado
