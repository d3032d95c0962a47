#pragma once
// GPU math launchers (CUDA builds only), the device twins of util/math.hpp.
// Pointers are device pointers; every launcher enqueues on `stream` and
// returns without waiting. Storage type T (double, float, float16 and
// bfloat16 as __half / __nv_bfloat16-compatible bits); arithmetic in
// math_t<T>; 64-bit counts.

#include "cortado/config.hpp"

#ifdef CORTADO_USE_CUDA
#include <cstdint>

#include "cortado/bfloat16.hpp"
#include "cortado/types.hpp"
#include "cortado/util/math.hpp"

struct CUstream_st;
struct cublasContext;

namespace cortado {

using gpu_stream = CUstream_st*;

/// dst[i] = DstType(src[i]) between any two storage types.
void gpu_convert(Type src_type, const void* src, Type dst_type, void* dst, int64_t n, gpu_stream stream);

/// Row-major C = alpha * op(A) op(B) + beta * C through cuBLAS. `math` is the
/// compute type: FLOAT accumulates in FP32 (Tensor Cores for FP16 and BF16
/// inputs), FLOAT16 in FP16 (float16 storage only: bfloat16 always
/// accumulates in FP32); DOUBLE for double.
template <typename T>
void gpu_gemm(cublasContext* handle, Trans ta, Trans tb, int M, int N, int K, float alpha, const T* A, const T* B,
              float beta, T* C, Type math = FLOAT);
/// y = alpha * op(A) x + beta * y, A row-major M x N.
template <typename T>
void gpu_gemv(cublasContext* handle, Trans ta, int M, int N, float alpha, const T* A, const T* x, float beta, T* y,
              Type math = FLOAT);

template <typename T> void gpu_set(int64_t n, float v, T* y, gpu_stream s);
template <typename T> void gpu_copy(int64_t n, const T* x, T* y, gpu_stream s);
/// y = a*x + y
template <typename T> void gpu_axpy(int64_t n, float a, const T* x, T* y, gpu_stream s);
/// y = a*x + b*y
template <typename T> void gpu_axpby(int64_t n, float a, const T* x, float b, T* y, gpu_stream s);
/// y = a*x
template <typename T> void gpu_scale(int64_t n, float a, const T* x, T* y, gpu_stream s);
template <typename T> void gpu_add(int64_t n, const T* a, const T* b, T* y, gpu_stream s);
template <typename T> void gpu_mul(int64_t n, const T* a, const T* b, T* y, gpu_stream s);
/// Sets *flag (device int) to 1 if any value is Inf or NaN; never clears it.
template <typename T> void gpu_flag_nonfinite(int64_t n, const T* x, int* flag, gpu_stream s);
/// Adds sum(x^2) (in double) into *acc (a device double).
template <typename T> void gpu_accumulate_sumsq(int64_t n, const T* x, double* acc, gpu_stream s);

}  // namespace cortado
#endif  // CORTADO_USE_CUDA
