#pragma once
// CPU math on raw pointers, templated on the storage type T (double, float,
// float16, bfloat16). Every function stores in T and computes in math_t<T>:
// 16-bit inputs are widened to float, accumulated in float (dot products and
// sums in double), and rounded once on the store. GEMM/GEMV run on OpenBLAS;
// for the 16-bit types the operands are widened into a float scratch buffer
// first.
// Counts are int64_t; matrix dimensions are int (BLAS's own limit).

#include <cstdint>

#include "cortado/bfloat16.hpp"

namespace cortado {

enum class Trans { No, Yes };

/// C = alpha * op(A) * op(B) + beta * C; A is MxK after op, B is KxN, C MxN, row-major.
template <typename T>
void cpu_gemm(Trans ta, Trans tb, int M, int N, int K, math_t<T> alpha, const T* A, const T* B,
              math_t<T> beta, T* C);
/// y = alpha * op(A) * x + beta * y; A is MxN row-major.
template <typename T>
void cpu_gemv(Trans ta, int M, int N, math_t<T> alpha, const T* A, const T* x, math_t<T> beta, T* y);

template <typename T> void cpu_set(int64_t n, math_t<T> v, T* y);
template <typename T> void cpu_copy(int64_t n, const T* x, T* y);
/// y = a*x + y
template <typename T> void cpu_axpy(int64_t n, math_t<T> a, const T* x, T* y);
/// y = a*x + b*y
template <typename T> void cpu_axpby(int64_t n, math_t<T> a, const T* x, math_t<T> b, T* y);
/// x *= a
template <typename T> void cpu_scal(int64_t n, math_t<T> a, T* x);
/// y = a*x
template <typename T> void cpu_scale(int64_t n, math_t<T> a, const T* x, T* y);
template <typename T> void cpu_add(int64_t n, const T* a, const T* b, T* y);
template <typename T> void cpu_sub(int64_t n, const T* a, const T* b, T* y);
template <typename T> void cpu_mul(int64_t n, const T* a, const T* b, T* y);
template <typename T> void cpu_div(int64_t n, const T* a, const T* b, T* y);
template <typename T> void cpu_add_scalar(int64_t n, math_t<T> a, T* y);
template <typename T> void cpu_exp(int64_t n, const T* x, T* y);
template <typename T> void cpu_sqr(int64_t n, const T* x, T* y);
template <typename T> void cpu_powx(int64_t n, const T* x, math_t<T> p, T* y);
template <typename T> void cpu_abs(int64_t n, const T* x, T* y);
template <typename T> void cpu_sign(int64_t n, const T* x, T* y);
/// Sums in double whatever T is.
template <typename T> double cpu_dot(int64_t n, const T* x, const T* y);
template <typename T> double cpu_asum(int64_t n, const T* x);
template <typename T> double cpu_sumsq(int64_t n, const T* x);
/// Whether any value is Inf or NaN.
template <typename T> bool cpu_has_nonfinite(int64_t n, const T* x);

/// dst[i] = Dst(src[i]) for any pair of storage types.
template <typename Src, typename Dst> void convert_array(int64_t n, const Src* src, Dst* dst);

}  // namespace cortado
