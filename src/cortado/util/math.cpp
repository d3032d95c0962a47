// CPU math. float and double go straight to OpenBLAS or to plain loops the
// compiler vectorizes; float16 and bfloat16 widen to float (GEMM/GEMV through a
// thread-local float scratch) and rounds once on the store, except bfloat16
// GEMMs on CPUs with AVX-512 BF16 (gemm_bf16.hpp), which read the operands
// as they are.
#include "cortado/util/math.hpp"
#include "cortado/util/cpu_parallel.hpp"
#include "cortado/util/gemm_bf16.hpp"

#include <cblas.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace cortado {

// One thread's conversion of a range; convert_array (below) splits large
// arrays over the cores.
template <typename Src, typename Dst> void convert_run(int64_t n, const Src* src, Dst* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Dst(math_t<Src>(src[i]));
}

// float <-> float16 in bulk: the F16C instructions where the CPU has them
// (8 values per instruction, IEEE round-to-nearest-even like the scalar
// code), the scalar conversion for the tail and elsewhere.
#if defined(__x86_64__) && defined(__GNUC__)
namespace {
bool has_f16c() {
  static const bool yes = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return yes;
}

__attribute__((target("avx,f16c"))) int64_t f16c_to_half(int64_t n, const float* src, float16* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  return i;
}

__attribute__((target("avx,f16c"))) int64_t f16c_to_float(int64_t n, const float16* src, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  return i;
}
}  // namespace

template <> void convert_run<float, float16>(int64_t n, const float* src, float16* dst) {
  const int64_t done = has_f16c() ? f16c_to_half(n, src, dst) : 0;
  for (int64_t i = done; i < n; ++i) dst[i] = float16(src[i]);
}

template <> void convert_run<float16, float>(int64_t n, const float16* src, float* dst) {
  const int64_t done = has_f16c() ? f16c_to_float(n, src, dst) : 0;
  for (int64_t i = done; i < n; ++i) dst[i] = float(src[i]);
}
#endif

// float <-> bfloat16 in bulk: the scalar conversions are branch-free bit
// arithmetic, which the compiler vectorizes in these loops.
template <> void convert_run<float, bfloat16>(int64_t n, const float* src, bfloat16* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i].x = detail::float_to_bfloat_bits(src[i]);
}

template <> void convert_run<bfloat16, float>(int64_t n, const bfloat16* src, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = detail::bfloat_bits_to_float(src[i].x);
}

namespace {
CBLAS_TRANSPOSE cb(Trans t) { return t == Trans::No ? CblasNoTrans : CblasTrans; }

// Three reusable float buffers for float16 GEMM operands.
std::vector<float>& scratch(int i) {
  thread_local std::vector<float> s[3];
  return s[i];
}
}  // namespace

// A GEMM outside a layer's chunks (a fully connected layer's, say) runs as
// fixed blocks of kGemmBlock columns of C (or rows, where C has more rows
// than columns), each one single-threaded BLAS call, spread over the cores
// by cpu_parallel_blocks; inside a chunk it is one call on the chunk's
// thread. Why not OpenBLAS's own threads: the blocking of K and the edge
// kernels it picks depend on how many threads split the product, so the
// bits of C depended on the core count (LeNet's 64 x 500 x 800 product: a
// fifth of the outputs differ between 1 and 2 threads), and its threads wait
// for each other at every call, so one thread that loses its core to another
// process stalls the whole product. The blocks' bounds depend on the shape
// alone: the same bits on any number of threads, busy cores or not.
// The switch cpu_share off keeps one call on OpenBLAS's threads (the bits of
// the builds before the blocks).
namespace {
constexpr int kGemmBlock = 128;

template <typename T, typename Call>
void blocked_gemm(Trans ta, Trans tb, int M, int N, int K, const T* A, const T* B, T* C, const Call& call) {
  const int lda = ta == Trans::No ? K : M, ldb = tb == Trans::No ? N : K;
  if (cpu_in_chunk() || cpu_share_off()) {  // one call: the chunk's thread, or OpenBLAS's threads as before
    call(M, N, A, lda, B, ldb, C);
    return;
  }
  const bool by_rows = M > N;
  const int span = by_rows ? M : N;
  const int blocks = (span + kGemmBlock - 1) / kGemmBlock;
  cpu_parallel_blocks(blocks, [&](int b0, int b1) {
    for (int b = b0; b < b1; ++b) {
      const int i0 = b * kGemmBlock, n = std::min(span, i0 + kGemmBlock) - i0;
      if (by_rows)  // rows i0.. of op(A) and C
        call(n, N, A + (ta == Trans::No ? static_cast<size_t>(i0) * lda : static_cast<size_t>(i0)), lda, B, ldb,
             C + static_cast<size_t>(i0) * N);
      else  // columns i0.. of op(B) and C
        call(M, n, A, lda, B + (tb == Trans::No ? static_cast<size_t>(i0) : static_cast<size_t>(i0) * ldb), ldb,
             C + i0);
    }
  });
}
}  // namespace

template <>
void cpu_gemm<float>(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, const float* B,
                     float beta, float* C) {
  blocked_gemm(ta, tb, M, N, K, A, B, C, [&](int m, int n, const float* a, int lda, const float* b, int ldb, float* c) {
    cblas_sgemm(CblasRowMajor, cb(ta), cb(tb), m, n, K, alpha, a, lda, b, ldb, beta, c, N);
  });
}

template <>
void cpu_gemm<double>(Trans ta, Trans tb, int M, int N, int K, double alpha, const double* A, const double* B,
                      double beta, double* C) {
  blocked_gemm(ta, tb, M, N, K, A, B, C,
               [&](int m, int n, const double* a, int lda, const double* b, int ldb, double* c) {
                 cblas_dgemm(CblasRowMajor, cb(ta), cb(tb), m, n, K, alpha, a, lda, b, ldb, beta, c, N);
               });
}

// 16-bit storage: operands widened into float scratch, one float GEMM, one
// rounding of C on the store.
template <typename T>
void half_gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const T* A, const T* B, float beta, T* C) {
  auto& a = scratch(0);
  auto& b = scratch(1);
  auto& c = scratch(2);
  a.resize(static_cast<size_t>(M) * K);
  b.resize(static_cast<size_t>(K) * N);
  c.resize(static_cast<size_t>(M) * N);
  convert_array(static_cast<int64_t>(a.size()), A, a.data());
  convert_array(static_cast<int64_t>(b.size()), B, b.data());
  if (beta != 0.f) convert_array(static_cast<int64_t>(c.size()), C, c.data());
  cpu_gemm<float>(ta, tb, M, N, K, alpha, a.data(), b.data(), beta, c.data());
  convert_array(static_cast<int64_t>(c.size()), c.data(), C);
}

template <typename T>
void half_gemv(Trans ta, int M, int N, float alpha, const T* A, const T* x, float beta, T* y) {
  const int xn = ta == Trans::No ? N : M, yn = ta == Trans::No ? M : N;
  auto& a = scratch(0);
  auto& b = scratch(1);
  auto& c = scratch(2);
  a.resize(static_cast<size_t>(M) * N);
  b.resize(xn);
  c.resize(yn);
  convert_array(static_cast<int64_t>(a.size()), A, a.data());
  convert_array(xn, x, b.data());
  if (beta != 0.f) convert_array(yn, y, c.data());
  cpu_gemv<float>(ta, M, N, alpha, a.data(), b.data(), beta, c.data());
  convert_array(yn, c.data(), y);
}

template <>
void cpu_gemm<float16>(Trans ta, Trans tb, int M, int N, int K, float alpha, const float16* A,
                       const float16* B, float beta, float16* C) {
  half_gemm(ta, tb, M, N, K, alpha, A, B, beta, C);
}

template <>
void cpu_gemm<bfloat16>(Trans ta, Trans tb, int M, int N, int K, float alpha, const bfloat16* A,
                        const bfloat16* B, float beta, bfloat16* C) {
  if (detail::bf16_dot_enabled()) {  // the operands as they are, C summed in float and rounded once
    auto& c = scratch(2);
    c.resize(static_cast<size_t>(M) * N);
    if (beta != 0.f) convert_array(static_cast<int64_t>(c.size()), C, c.data());
    detail::gemm_bf16_dot(ta, tb, M, N, K, alpha, A, B, beta, c.data());
    convert_array(static_cast<int64_t>(c.size()), c.data(), C);
    return;
  }
  half_gemm(ta, tb, M, N, K, alpha, A, B, beta, C);
}

template <>
void cpu_gemv<float>(Trans ta, int M, int N, float alpha, const float* A, const float* x, float beta, float* y) {
  cblas_sgemv(CblasRowMajor, cb(ta), M, N, alpha, A, N, x, 1, beta, y, 1);
}

template <>
void cpu_gemv<double>(Trans ta, int M, int N, double alpha, const double* A, const double* x, double beta,
                      double* y) {
  cblas_dgemv(CblasRowMajor, cb(ta), M, N, alpha, A, N, x, 1, beta, y, 1);
}

template <>
void cpu_gemv<float16>(Trans ta, int M, int N, float alpha, const float16* A, const float16* x, float beta,
                       float16* y) {
  half_gemv(ta, M, N, alpha, A, x, beta, y);
}

template <>
void cpu_gemv<bfloat16>(Trans ta, int M, int N, float alpha, const bfloat16* A, const bfloat16* x, float beta,
                        bfloat16* y) {
  half_gemv(ta, M, N, alpha, A, x, beta, y);
}

template <typename T> void cpu_set(int64_t n, math_t<T> v, T* y) {
  const T t(v);
  for (int64_t i = 0; i < n; ++i) y[i] = t;
}
template <typename T> void cpu_copy(int64_t n, const T* x, T* y) {
  if (x != y && n > 0) std::memcpy(y, x, n * sizeof(T));
}
template <typename T> void cpu_axpy(int64_t n, math_t<T> a, const T* x, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = T(a * math_t<T>(x[i]) + math_t<T>(y[i]));
}
template <typename T> void cpu_axpby(int64_t n, math_t<T> a, const T* x, math_t<T> b, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = T(a * math_t<T>(x[i]) + b * math_t<T>(y[i]));
}
template <typename T> void cpu_scal(int64_t n, math_t<T> a, T* x) {
  for (int64_t i = 0; i < n; ++i) x[i] = T(a * math_t<T>(x[i]));
}
template <typename T> void cpu_scale(int64_t n, math_t<T> a, const T* x, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = T(a * math_t<T>(x[i]));
}

#define CORTADO_BINARY(name, expr)                                   \
  template <typename T> void name(int64_t n, const T* a, const T* b, T* y) { \
    using M = math_t<T>;                                             \
    for (int64_t i = 0; i < n; ++i) {                                \
      const M u = M(a[i]), v = M(b[i]);                              \
      y[i] = T(expr);                                                \
    }                                                                \
  }
CORTADO_BINARY(cpu_add, u + v)
CORTADO_BINARY(cpu_sub, u - v)
CORTADO_BINARY(cpu_mul, u * v)
CORTADO_BINARY(cpu_div, u / v)
#undef CORTADO_BINARY

#define CORTADO_UNARY(name, expr)                        \
  template <typename T> void name(int64_t n, const T* x, T* y) { \
    using M = math_t<T>;                                 \
    for (int64_t i = 0; i < n; ++i) {                    \
      const M u = M(x[i]);                               \
      y[i] = T(expr);                                    \
    }                                                    \
  }
CORTADO_UNARY(cpu_exp, std::exp(u))
CORTADO_UNARY(cpu_sqr, u * u)
CORTADO_UNARY(cpu_abs, std::abs(u))
CORTADO_UNARY(cpu_sign, M((M(0) < u) - (u < M(0))))
#undef CORTADO_UNARY

template <typename T> void cpu_add_scalar(int64_t n, math_t<T> a, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = T(math_t<T>(y[i]) + a);
}
template <typename T> void cpu_powx(int64_t n, const T* x, math_t<T> p, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = T(std::pow(math_t<T>(x[i]), p));
}
template <typename T> double cpu_dot(int64_t n, const T* x, const T* y) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(x[i]) * double(y[i]);
  return s;
}
template <typename T> double cpu_asum(int64_t n, const T* x) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::abs(double(x[i]));
  return s;
}
template <typename T> double cpu_sumsq(int64_t n, const T* x) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(x[i]) * double(x[i]);
  return s;
}
template <typename T> bool cpu_has_nonfinite(int64_t n, const T* x) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(double(x[i]))) return true;
  return false;
}

// A conversion streams memory at a few bytes per value: arrays of 2^17
// values and more (an activation of a batch, not a bias) are split into
// ranges of at least 2^16 over the cores. Every value is converted on its
// own, so the split cannot change a bit.
template <typename Src, typename Dst> void convert_array(int64_t n, const Src* src, Dst* dst) {
  constexpr int64_t kGrain = int64_t{1} << 16;
  if (n < 2 * kGrain) return convert_run(n, src, dst);  // most calls: no std::function on the way
  cpu_parallel_range(n, kGrain, [&](int64_t lo, int64_t hi) { convert_run(hi - lo, src + lo, dst + lo); });
}


#define CORTADO_INSTANTIATE_MATH(T)                                               \
  template void cpu_set<T>(int64_t, math_t<T>, T*);                                \
  template void cpu_copy<T>(int64_t, const T*, T*);                                \
  template void cpu_axpy<T>(int64_t, math_t<T>, const T*, T*);                     \
  template void cpu_axpby<T>(int64_t, math_t<T>, const T*, math_t<T>, T*);         \
  template void cpu_scal<T>(int64_t, math_t<T>, T*);                               \
  template void cpu_scale<T>(int64_t, math_t<T>, const T*, T*);                    \
  template void cpu_add<T>(int64_t, const T*, const T*, T*);                       \
  template void cpu_sub<T>(int64_t, const T*, const T*, T*);                       \
  template void cpu_mul<T>(int64_t, const T*, const T*, T*);                       \
  template void cpu_div<T>(int64_t, const T*, const T*, T*);                       \
  template void cpu_add_scalar<T>(int64_t, math_t<T>, T*);                         \
  template void cpu_exp<T>(int64_t, const T*, T*);                                 \
  template void cpu_sqr<T>(int64_t, const T*, T*);                                 \
  template void cpu_powx<T>(int64_t, const T*, math_t<T>, T*);                     \
  template void cpu_abs<T>(int64_t, const T*, T*);                                 \
  template void cpu_sign<T>(int64_t, const T*, T*);                                \
  template double cpu_dot<T>(int64_t, const T*, const T*);                         \
  template double cpu_asum<T>(int64_t, const T*);                                  \
  template double cpu_sumsq<T>(int64_t, const T*);                                 \
  template bool cpu_has_nonfinite<T>(int64_t, const T*);                           \
  template void convert_array<T, double>(int64_t, const T*, double*);              \
  template void convert_array<T, float>(int64_t, const T*, float*);                \
  template void convert_array<T, float16>(int64_t, const T*, float16*);          \
  template void convert_array<T, bfloat16>(int64_t, const T*, bfloat16*);
CORTADO_INSTANTIATE_MATH(double)
CORTADO_INSTANTIATE_MATH(float)
CORTADO_INSTANTIATE_MATH(float16)
CORTADO_INSTANTIATE_MATH(bfloat16)

}  // namespace cortado
