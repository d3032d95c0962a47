// GPU math: type conversion, cuBLAS GEMM/GEMV, elementwise kernels.
//
// Elementwise kernels: one thread per element in a grid-stride loop with
// 64-bit indexes; values are loaded in the storage type, computed in float
// (double for double) and stored once. Reductions (sum of squares, the
// Inf/NaN flag) accumulate per thread, then with one atomic per block after
// a shared-memory tree.
#include "cortado/storage_types.hpp"
#include "cortado/util/cuda.hpp"
#include "cortado/util/gpu_math.hpp"
#include "device_types.cuh"

namespace cortado {

namespace {

using kernels::dev;
using kernels::dev_t;
using kernels::load;
using kernels::store;

template <typename S, typename D>
__global__ void convert_kernel(int64_t n, const S* src, D* dst) {
  CORTADO_KERNEL_LOOP(i, n) store(dst, i, load(src, i));
}

template <typename T>
__global__ void set_kernel(int64_t n, float v, T* y) {
  CORTADO_KERNEL_LOOP(i, n) store(y, i, v);
}
template <typename T>
__global__ void axpby_kernel(int64_t n, float a, const T* x, float b, T* y) {
  CORTADO_KERNEL_LOOP(i, n) store(y, i, a * load(x, i) + (b == 0.f ? 0.f : b * load(y, i)));
}
template <typename T>
__global__ void scale_kernel(int64_t n, float a, const T* x, T* y) {
  CORTADO_KERNEL_LOOP(i, n) store(y, i, a * load(x, i));
}
template <typename T>
__global__ void add_kernel(int64_t n, const T* a, const T* b, T* y) {
  CORTADO_KERNEL_LOOP(i, n) store(y, i, load(a, i) + load(b, i));
}
template <typename T>
__global__ void mul_kernel(int64_t n, const T* a, const T* b, T* y) {
  CORTADO_KERNEL_LOOP(i, n) store(y, i, load(a, i) * load(b, i));
}
template <typename T>
__global__ void nonfinite_kernel(int64_t n, const T* x, int* flag) {
  bool bad = false;
  CORTADO_KERNEL_LOOP(i, n) bad = bad || !isfinite(load(x, i));
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicExch(flag, 1);
}
template <typename T>
__global__ void sumsq_kernel(int64_t n, const T* x, double* acc) {
  __shared__ double part[cuda::kThreads];
  double s = 0;
  CORTADO_KERNEL_LOOP(i, n) {
    const double v = load(x, i);
    s += v * v;
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(acc, part[0]);
}


}  // namespace

void gpu_convert(Type src_type, const void* src, Type dst_type, void* dst, int64_t n, gpu_stream stream) {
  if (n == 0) return;
  dispatch_type(src_type, [&](auto s) {
    using S = decltype(s);
    dispatch_type(dst_type, [&](auto t) {
      using D = decltype(t);
      convert_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(static_cast<const S*>(src)),
                                                                          dev(static_cast<D*>(dst)));
    });
  });
  CORTADO_KERNEL_CHECK();
}

namespace {
cublasOperation_t op(Trans t) { return t == Trans::No ? CUBLAS_OP_N : CUBLAS_OP_T; }
template <typename T> cudaDataType_t cuda_type();
template <> cudaDataType_t cuda_type<double>() { return CUDA_R_64F; }
template <> cudaDataType_t cuda_type<float>() { return CUDA_R_32F; }
template <> cudaDataType_t cuda_type<float16>() { return CUDA_R_16F; }
template <> cudaDataType_t cuda_type<bfloat16>() { return CUDA_R_16BF; }
}  // namespace

// Row-major C (M x N) = op(A) op(B) is column-major C^T = op(B)^T op(A)^T:
// swap the operands and the dimensions, keep the transposes. bfloat16 always
// accumulates in FP32 (cuBLAS has no bfloat16 compute type).
template <typename T>
void gpu_gemm(cublasContext* handle, Trans ta, Trans tb, int M, int N, int K, float alpha, const T* A, const T* B,
              float beta, T* C, Type math) {
  const int lda = ta == Trans::No ? K : M, ldb = tb == Trans::No ? N : K;
  if constexpr (std::is_same_v<T, double>) {
    const double a = alpha, b = beta;
    CORTADO_CUBLAS_CHECK(cublasDgemm(handle, op(tb), op(ta), N, M, K, &a, B, ldb, A, lda, &b, C, N));
  } else if (std::is_same_v<T, float16> && math == FLOAT16) {
    const __half a = __float2half(alpha), b = __float2half(beta);
    CORTADO_CUBLAS_CHECK(cublasGemmEx(handle, op(tb), op(ta), N, M, K, &a, B, CUDA_R_16F, ldb, A, CUDA_R_16F, lda, &b,
                                      C, CUDA_R_16F, N, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT));
  } else {
    CORTADO_CUBLAS_CHECK(cublasGemmEx(handle, op(tb), op(ta), N, M, K, &alpha, B, cuda_type<T>(), ldb, A,
                                      cuda_type<T>(), lda, &beta, C, cuda_type<T>(), N, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
  }
}

// GEMV as a GEMM with one column, so that FP16 gets FP32 accumulation too.
template <typename T>
void gpu_gemv(cublasContext* handle, Trans ta, int M, int N, float alpha, const T* A, const T* x, float beta, T* y,
              Type math) {
  if (ta == Trans::No) {
    gpu_gemm<T>(handle, Trans::No, Trans::No, M, 1, N, alpha, A, x, beta, y, math);
  } else {
    gpu_gemm<T>(handle, Trans::Yes, Trans::No, N, 1, M, alpha, A, x, beta, y, math);
  }
}

template <typename T> void gpu_set(int64_t n, float v, T* y, gpu_stream s) {
  if (n == 0) return;
  set_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(n, v, dev(y));
  CORTADO_KERNEL_CHECK();
}
template <typename T> void gpu_copy(int64_t n, const T* x, T* y, gpu_stream s) {
  if (n == 0 || x == y) return;
  CORTADO_CUDA_CHECK(cudaMemcpyAsync(y, x, n * sizeof(T), cudaMemcpyDeviceToDevice, s));
}
template <typename T> void gpu_axpy(int64_t n, float a, const T* x, T* y, gpu_stream s) { gpu_axpby(n, a, x, 1.f, y, s); }
template <typename T> void gpu_axpby(int64_t n, float a, const T* x, float b, T* y, gpu_stream s) {
  if (n == 0) return;
  axpby_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(n, a, dev(x), b, dev(y));
  CORTADO_KERNEL_CHECK();
}
template <typename T> void gpu_scale(int64_t n, float a, const T* x, T* y, gpu_stream s) {
  if (n == 0) return;
  scale_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(n, a, dev(x), dev(y));
  CORTADO_KERNEL_CHECK();
}
template <typename T> void gpu_add(int64_t n, const T* a, const T* b, T* y, gpu_stream s) {
  if (n == 0) return;
  add_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(n, dev(a), dev(b), dev(y));
  CORTADO_KERNEL_CHECK();
}
template <typename T> void gpu_mul(int64_t n, const T* a, const T* b, T* y, gpu_stream s) {
  if (n == 0) return;
  mul_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(n, dev(a), dev(b), dev(y));
  CORTADO_KERNEL_CHECK();
}
template <typename T> void gpu_flag_nonfinite(int64_t n, const T* x, int* flag, gpu_stream s) {
  if (n == 0) return;
  nonfinite_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(n, dev(x), flag);
  CORTADO_KERNEL_CHECK();
}
template <typename T> void gpu_accumulate_sumsq(int64_t n, const T* x, double* acc, gpu_stream s) {
  if (n == 0) return;
  sumsq_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(n, dev(x), acc);
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_GPU_MATH(T)                                                                          \
  template void gpu_gemm<T>(cublasContext*, Trans, Trans, int, int, int, float, const T*, const T*, float, T*, Type); \
  template void gpu_gemv<T>(cublasContext*, Trans, int, int, float, const T*, const T*, float, T*, Type);            \
  template void gpu_set<T>(int64_t, float, T*, gpu_stream);                                                     \
  template void gpu_copy<T>(int64_t, const T*, T*, gpu_stream);                                                 \
  template void gpu_axpy<T>(int64_t, float, const T*, T*, gpu_stream);                                          \
  template void gpu_axpby<T>(int64_t, float, const T*, float, T*, gpu_stream);                                  \
  template void gpu_scale<T>(int64_t, float, const T*, T*, gpu_stream);                                         \
  template void gpu_add<T>(int64_t, const T*, const T*, T*, gpu_stream);                                        \
  template void gpu_mul<T>(int64_t, const T*, const T*, T*, gpu_stream);                                        \
  template void gpu_flag_nonfinite<T>(int64_t, const T*, int*, gpu_stream);                                     \
  template void gpu_accumulate_sumsq<T>(int64_t, const T*, double*, gpu_stream);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_GPU_MATH)

}  // namespace cortado
