// InnerProduct kernels beside the cuBLAS GEMMs: bias add and bias gradient.
//
// ip_add_bias: one thread per element of Y (rows, cols), grid-stride with
//   64-bit indexes, computed in float (double for double), stored once.
// ip_bias_grad: one thread per column j, walking the rows (consecutive
//   threads read consecutive columns: coalesced), summing in float (double
//   for double) and adding the total to db[j] with one rounding. No atomics.
#include <cuda_fp16.h>

#include "cortado/layers/inner_product_layer.hpp"
#include "device_values.cuh"
#include "cortado/storage_types.hpp"
#include "cortado/util/cuda.hpp"

namespace cortado {

namespace {

using namespace kernels;

template <typename T>
__global__ void add_bias_kernel(int64_t n, int cols, const T* b, T* y) {
  CORTADO_KERNEL_LOOP(i, n) store(y, i, load(y, i) + load(b, i % cols));
}

template <typename T>
__global__ void bias_grad_kernel(int64_t rows, int cols, const T* dy, T* db) {
  using A = dmath_t<T>;
  CORTADO_KERNEL_LOOP(j, cols) {
    A sum = 0;
    for (int64_t i = 0; i < rows; ++i) sum += load(dy, i * cols + j);
    store(db, j, load(db, j) + sum);
  }
}

}  // namespace

namespace gpu {

template <typename T>
void ip_add_bias(int64_t rows, int cols, const T* b, T* y, CUstream_st* stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  add_bias_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, cols, dev(b), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void ip_bias_grad(int64_t rows, int cols, const T* dy, T* db, CUstream_st* stream) {
  if (cols == 0) return;
  bias_grad_kernel<<<cuda::blocks_for(cols), cuda::kThreads, 0, stream>>>(rows, cols, dev(dy), dev(db));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_IP_GPU(T)                                                \
  template void ip_add_bias<T>(int64_t, int, const T*, T*, CUstream_st*);           \
  template void ip_bias_grad<T>(int64_t, int, const T*, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_IP_GPU)
#undef CORTADO_INSTANTIATE_IP_GPU

}  // namespace gpu

}  // namespace cortado
