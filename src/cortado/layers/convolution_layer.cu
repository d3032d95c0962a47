// Convolution kernels beside im2col and cuBLAS: the FP32-accumulated weight
// gradient for float16 diffs and the depthwise path. The bias add and bias
// gradient are Bias's kernels (bias_layer.hpp: gpu::bias_forward,
// gpu::bias_backward over (images, channels, positions)).
//
// gemm_accumulate_f32: cublasGemmEx with T inputs, an FP32 output and FP32
//   compute (Tensor Cores for float16), beta = 1.
// add_f32: one thread per element, dst = T(dst + src) in float.
// depthwise_*: direct kernels for group == channels (see the header): the
//   forward and the data gradient gather (one thread per output / input
//   element, no atomics); the weight gradient is one block per weight element
//   reducing over (image, output position) in a shared-memory tree.
#include <cuda_fp16.h>

#include "cortado/layers/convolution_layer.hpp"
#include "device_values.cuh"
#include "cortado/util/cuda.hpp"

namespace cortado {

namespace {

using namespace kernels;

template <typename T>
__global__ void add_f32_kernel(int64_t n, const float* src, T* dst) {
  CORTADO_KERNEL_LOOP(i, n) store(dst, i, load(dst, i) + src[i]);
}

template <typename T>
__global__ void depthwise_forward_kernel(DepthwiseGeometry g, const T* x, const T* w, T* y) {
  using A = dmath_t<T>;
  const int oc = g.channels * g.mult;
  const int64_t n_out = static_cast<int64_t>(g.num) * oc * g.out_h * g.out_w;
  CORTADO_KERNEL_LOOP(i, n_out) {
    const int ox = static_cast<int>(i % g.out_w);
    const int oy = static_cast<int>((i / g.out_w) % g.out_h);
    const int o = static_cast<int>((i / (static_cast<int64_t>(g.out_w) * g.out_h)) % oc);
    const int64_t n = i / (static_cast<int64_t>(g.out_w) * g.out_h * oc);
    const int c = o / g.mult;
    const int64_t xbase = (n * g.channels + c) * static_cast<int64_t>(g.height) * g.width;
    const int64_t wbase = static_cast<int64_t>(o) * g.kh * g.kw;
    A sum = 0;
    for (int ky = 0; ky < g.kh; ++ky) {
      const int iy = oy * g.sh - g.ph + ky * g.dh;
      if (iy < 0 || iy >= g.height) continue;
      for (int kx = 0; kx < g.kw; ++kx) {
        const int ix = ox * g.sw - g.pw + kx * g.dw;
        if (ix >= 0 && ix < g.width)
          sum += static_cast<A>(load(w, wbase + ky * g.kw + kx)) * static_cast<A>(load(x, xbase + iy * g.width + ix));
      }
    }
    store(y, i, sum);
  }
}

template <typename T>
__global__ void depthwise_backward_data_kernel(DepthwiseGeometry g, const T* w, const T* dy, T* dx) {
  using A = dmath_t<T>;
  const int oc = g.channels * g.mult;
  const int64_t n_in = static_cast<int64_t>(g.num) * g.channels * g.height * g.width;
  CORTADO_KERNEL_LOOP(i, n_in) {
    const int ix = static_cast<int>(i % g.width);
    const int iy = static_cast<int>((i / g.width) % g.height);
    const int c = static_cast<int>((i / (static_cast<int64_t>(g.width) * g.height)) % g.channels);
    const int64_t n = i / (static_cast<int64_t>(g.width) * g.height * g.channels);
    A sum = 0;
    for (int m = 0; m < g.mult; ++m) {
      const int o = c * g.mult + m;
      const int64_t ybase = (n * oc + o) * static_cast<int64_t>(g.out_h) * g.out_w;
      const int64_t wbase = static_cast<int64_t>(o) * g.kh * g.kw;
      for (int ky = 0; ky < g.kh; ++ky) {
        const int ty = iy + g.ph - ky * g.dh;  // = oy * sh when this tap reaches (iy, ix)
        if (ty < 0 || ty % g.sh != 0) continue;
        const int oy = ty / g.sh;
        if (oy >= g.out_h) continue;
        for (int kx = 0; kx < g.kw; ++kx) {
          const int tx = ix + g.pw - kx * g.dw;
          if (tx < 0 || tx % g.sw != 0) continue;
          const int ox = tx / g.sw;
          if (ox >= g.out_w) continue;
          sum += static_cast<A>(load(w, wbase + ky * g.kw + kx)) * static_cast<A>(load(dy, ybase + oy * g.out_w + ox));
        }
      }
    }
    store(dx, i, sum);
  }
}

template <typename T>
__global__ void depthwise_backward_weight_kernel(DepthwiseGeometry g, const T* x, const T* dy, T* dw) {
  using A = dmath_t<T>;
  __shared__ A part[cuda::kThreads];
  const int kk = g.kh * g.kw;
  const int o = blockIdx.x / kk, k = blockIdx.x % kk;
  const int ky = k / g.kw, kx = k % g.kw;
  const int c = o / g.mult, oc = g.channels * g.mult;
  const int64_t ohw = static_cast<int64_t>(g.out_h) * g.out_w, hw = static_cast<int64_t>(g.height) * g.width;
  const int64_t total = g.num * ohw;
  A sum = 0;
  for (int64_t j = threadIdx.x; j < total; j += blockDim.x) {
    const int64_t n = j / ohw, s = j - n * ohw;
    const int oy = static_cast<int>(s / g.out_w), ox = static_cast<int>(s % g.out_w);
    const int iy = oy * g.sh - g.ph + ky * g.dh, ix = ox * g.sw - g.pw + kx * g.dw;
    if (iy < 0 || iy >= g.height || ix < 0 || ix >= g.width) continue;
    sum += static_cast<A>(load(dy, (n * oc + o) * ohw + s)) * static_cast<A>(load(x, (n * g.channels + c) * hw + iy * g.width + ix));
  }
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) store(dw, blockIdx.x, load(dw, blockIdx.x) + part[0]);
}

cublasOperation_t op(Trans t) { return t == Trans::No ? CUBLAS_OP_N : CUBLAS_OP_T; }
template <typename T> cudaDataType_t cuda_type();
template <> cudaDataType_t cuda_type<float>() { return CUDA_R_32F; }
template <> cudaDataType_t cuda_type<float16>() { return CUDA_R_16F; }
template <> cudaDataType_t cuda_type<bfloat16>() { return CUDA_R_16BF; }

}  // namespace

namespace gpu {

// Row-major C = A B is column-major C^T = B^T A^T: swap operands and sizes.
template <typename T>
void gemm_accumulate_f32(cublasContext* handle, Trans ta, Trans tb, int M, int N, int K, const T* A, const T* B,
                         float* C) {
  const int lda = ta == Trans::No ? K : M, ldb = tb == Trans::No ? N : K;
  const float one = 1.f;
  CORTADO_CUBLAS_CHECK(cublasGemmEx(handle, op(tb), op(ta), N, M, K, &one, B, cuda_type<T>(), ldb, A, cuda_type<T>(),
                                    lda, &one, C, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

template <typename T>
void add_f32(int64_t n, const float* src, T* dst, CUstream_st* stream) {
  if (n == 0) return;
  add_f32_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, src, dev(dst));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void depthwise_forward(const DepthwiseGeometry& g, const T* x, const T* w, T* y, CUstream_st* stream) {
  const int64_t n = static_cast<int64_t>(g.num) * g.channels * g.mult * g.out_h * g.out_w;
  if (n == 0) return;
  depthwise_forward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(g, dev(x), dev(w), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void depthwise_backward_data(const DepthwiseGeometry& g, const T* w, const T* dy, T* dx, CUstream_st* stream) {
  const int64_t n = static_cast<int64_t>(g.num) * g.channels * g.height * g.width;
  if (n == 0) return;
  depthwise_backward_data_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(g, dev(w), dev(dy), dev(dx));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void depthwise_backward_weight(const DepthwiseGeometry& g, const T* x, const T* dy, T* dw, CUstream_st* stream) {
  const int blocks = g.channels * g.mult * g.kh * g.kw;
  if (blocks == 0) return;
  depthwise_backward_weight_kernel<<<blocks, cuda::kThreads, 0, stream>>>(g, dev(x), dev(dy), dev(dw));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_CONV_GPU(T)                                                                  \
  template void add_f32<T>(int64_t, const float*, T*, CUstream_st*);                                    \
  template void depthwise_forward<T>(const DepthwiseGeometry&, const T*, const T*, T*, CUstream_st*);   \
  template void depthwise_backward_data<T>(const DepthwiseGeometry&, const T*, const T*, T*, CUstream_st*); \
  template void depthwise_backward_weight<T>(const DepthwiseGeometry&, const T*, const T*, T*, CUstream_st*)
CORTADO_INSTANTIATE_CONV_GPU(double);
CORTADO_INSTANTIATE_CONV_GPU(float);
CORTADO_INSTANTIATE_CONV_GPU(float16);
CORTADO_INSTANTIATE_CONV_GPU(bfloat16);
#undef CORTADO_INSTANTIATE_CONV_GPU
template void gemm_accumulate_f32<float>(cublasContext*, Trans, Trans, int, int, int, const float*, const float*,
                                         float*);
template void gemm_accumulate_f32<float16>(cublasContext*, Trans, Trans, int, int, int, const float16*,
                                           const float16*, float*);
template void gemm_accumulate_f32<bfloat16>(cublasContext*, Trans, Trans, int, int, int, const bfloat16*,
                                           const bfloat16*, float*);

}  // namespace gpu

}  // namespace cortado
