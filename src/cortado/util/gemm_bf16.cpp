// bfloat16 GEMM with AVX-512 BF16 dot products; see gemm_bf16.hpp for the
// scheme. The file is compiled for the baseline x86-64 like the rest: only
// the functions marked CORTADO_BF16_TARGET use AVX-512, and they run only
// after the CPU said it has it.
#include "cortado/util/gemm_bf16.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "cortado/util/cpu_parallel.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && (defined(__clang__) || __GNUC__ >= 10)
#define CORTADO_HAVE_BF16_DOT 1
#include <immintrin.h>
#if !defined(__clang__)
// GCC 12's AVX-512 shuffles start from _mm512_undefined_epi32(), which
// -Wmaybe-uninitialized reports as uninitialized in every caller.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace cortado::detail {

#ifdef CORTADO_HAVE_BF16_DOT
namespace {

#define CORTADO_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

constexpr int kMr = 12;    // rows of a micro-tile: 12 x 2 accumulators, 2 B vectors and 1 broadcast of 32 registers
constexpr int kNr = 32;    // columns of a micro-tile: two vectors of 16 floats
constexpr int kKc = 384;   // k values per block (even): a 32-column panel of B is 24 KiB, within L1
constexpr int kMc = 96;    // rows of A per packed block (a multiple of kMr): 72 KiB, within L2
constexpr int kNc = 1024;  // columns of B per packed block (a multiple of kNr): 768 KiB, within L2

inline uint32_t pair(uint16_t lo, uint16_t hi) { return lo | (static_cast<uint32_t>(hi) << 16); }

// Rows [i0, i0 + mc) and k [k0, k0 + kc) of op(A) into panels of kMr rows:
// panel p holds, for each k-pair q, kMr words (A(i, 2q), A(i, 2q + 1)).
// Rows past mc and the odd k past kc are zeros.
void pack_a(Trans ta, const uint16_t* A, int M, int K, int i0, int mc, int k0, int kc, uint32_t* out) {
  const int kp = (kc + 1) / 2;
  const bool odd = kc % 2 != 0;
  for (int p = 0; p < mc; p += kMr) {
    uint32_t* panel = out + static_cast<size_t>(p) * kp;
    const int rows = std::min(kMr, mc - p);
    if (ta == Trans::No) {  // A(i, k) = A[i * K + k]: a pair is one 32-bit word of a row
      for (int r = 0; r < rows; ++r) {
        const uint16_t* row = A + static_cast<size_t>(i0 + p + r) * K + k0;
        for (int q = 0; q < kc / 2; ++q) panel[q * kMr + r] = pair(row[2 * q], row[2 * q + 1]);
        if (odd) panel[(kp - 1) * kMr + r] = pair(row[kc - 1], 0);
      }
    } else {  // A(i, k) = A[k * M + i]: the rows of a panel are contiguous for each k
      for (int q = 0; q < kp; ++q) {
        const uint16_t* lo = A + static_cast<size_t>(k0 + 2 * q) * M + i0 + p;
        const uint16_t* hi = 2 * q + 1 < kc ? lo + M : nullptr;
        for (int r = 0; r < rows; ++r) panel[q * kMr + r] = pair(lo[r], hi ? hi[r] : 0);
      }
    }
    for (int r = rows; r < kMr; ++r)
      for (int q = 0; q < kp; ++q) panel[q * kMr + r] = 0;
  }
}

// Transposes the 16 x 16 matrix of 32-bit words whose rows are r[0..15]:
// afterwards word i of r[q] is what word q of r[i] was.
CORTADO_BF16_TARGET inline void transpose16x16(__m512i* r) {
  __m512i a[16], b[16];
  for (int i = 0; i < 16; i += 2) {  // pairs of rows, per 128-bit lane: (r0[k], r1[k], r0[k+1], r1[k+1])
    a[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    a[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // b[i + j], lane L: rows i..i+3 of word 4L + j
    b[i] = _mm512_unpacklo_epi64(a[i], a[i + 2]);
    b[i + 1] = _mm512_unpackhi_epi64(a[i], a[i + 2]);
    b[i + 2] = _mm512_unpacklo_epi64(a[i + 1], a[i + 3]);
    b[i + 3] = _mm512_unpackhi_epi64(a[i + 1], a[i + 3]);
  }
  for (int j = 0; j < 4; ++j) {  // word 4L + j: lane L of b[j], b[4 + j], b[8 + j], b[12 + j]
    const __m512i u0 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0x44), u1 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0xee);
    const __m512i v0 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0x44);
    const __m512i v1 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0xee);
    r[j] = _mm512_shuffle_i32x4(u0, v0, 0x88);
    r[4 + j] = _mm512_shuffle_i32x4(u0, v0, 0xdd);
    r[8 + j] = _mm512_shuffle_i32x4(u1, v1, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(u1, v1, 0xdd);
  }
}

// Columns [j0, j0 + nc) and k [k0, k0 + kc) of op(B) into panels of kNr
// columns: panel p holds, for each k-pair q, kNr words (B(2q, j), B(2q + 1, j)).
CORTADO_BF16_TARGET void pack_b(Trans tb, const uint16_t* B, int N, int K, int j0, int nc, int k0, int kc,
                                uint32_t* out) {
  const int kp = (kc + 1) / 2;
  for (int p = 0; p < nc; p += kNr) {
    uint32_t* panel = out + static_cast<size_t>(p) * kp;
    const int cols = std::min(kNr, nc - p);
    if (tb == Trans::No) {
      // B(k, j) = B[k * N + j]: two rows of 32 values are interleaved with
      // two word permutes (lanes 0-15 of the pair from the low halves).
      alignas(64) static constexpr uint16_t kLo[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                       8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
      alignas(64) static constexpr uint16_t kHi[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                                       24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
      const __m512i lo_idx = _mm512_load_si512(kLo), hi_idx = _mm512_load_si512(kHi);
      const __mmask32 m = cols == kNr ? ~__mmask32{0} : (__mmask32{1} << cols) - 1;
      for (int q = 0; q < kp; ++q) {
        const uint16_t* r0 = B + static_cast<size_t>(k0 + 2 * q) * N + j0 + p;
        const __m512i a = _mm512_maskz_loadu_epi16(m, r0);
        const __m512i b = 2 * q + 1 < kc ? _mm512_maskz_loadu_epi16(m, r0 + N) : _mm512_setzero_si512();
        _mm512_storeu_si512(panel + q * kNr, _mm512_permutex2var_epi16(a, lo_idx, b));
        _mm512_storeu_si512(panel + q * kNr + 16, _mm512_permutex2var_epi16(a, hi_idx, b));
      }
    } else {
      // B(k, j) = B[j * K + k]: a pair is one 32-bit word of a row of B, and
      // the panel is the transpose of those words, 16 x 16 at a time.
      for (int c0 = 0; c0 < kNr; c0 += 16) {
        for (int q0 = 0; q0 < kp; q0 += 16) {
          const int nq = std::min(16, kp - q0);
          // 16-bit mask: an odd kc leaves the last word's upper half unread (zero).
          const int halves = std::min(2 * nq, kc - 2 * q0);
          const __mmask32 m = halves == 32 ? ~__mmask32{0} : (__mmask32{1} << halves) - 1;
          __m512i r[16];
          for (int i = 0; i < 16; ++i) {
            r[i] = c0 + i < cols
                       ? _mm512_maskz_loadu_epi16(m, B + static_cast<size_t>(j0 + p + c0 + i) * K + k0 + 2 * q0)
                       : _mm512_setzero_si512();
          }
          transpose16x16(r);
          for (int q = 0; q < nq; ++q) _mm512_storeu_si512(panel + (q0 + q) * kNr + c0, r[q]);
        }
      }
    }
  }
}

// The kMr x kNr tile: C (rows x cols of it, leading dimension ldc) =
// alpha * A_panel B_panel + (first ? beta * C : C).
CORTADO_BF16_TARGET void micro_kernel(int kp, const uint32_t* a, const uint32_t* b, float alpha, float beta, bool first,
                                      float* c, int ldc, int rows, int cols) {
  __m512 acc0[kMr], acc1[kMr];
#pragma GCC unroll 12
  for (int r = 0; r < kMr; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int q = 0; q < kp; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 16);
#pragma GCC unroll 12
    for (int r = 0; r < kMr; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r]));
      acc0[r] = _mm512_dpbf16_ps(acc0[r], av, b0);
      acc1[r] = _mm512_dpbf16_ps(acc1[r], av, b1);
    }
    a += kMr;
    b += kNr;
  }
  const __mmask16 m0 = cols >= 16 ? 0xffff : static_cast<__mmask16>((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32 ? 0xffff : cols <= 16 ? 0 : static_cast<__mmask16>((1u << (cols - 16)) - 1);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(first ? beta : 1.f);
  const bool read_c = !first || beta != 0.f;  // beta == 0 must not read C (it may hold NaN)
#pragma GCC unroll 12
  for (int r = 0; r < kMr; ++r) {
    if (r >= rows) break;
    float* row = c + static_cast<size_t>(r) * ldc;
    __m512 v0 = _mm512_mul_ps(va, acc0[r]), v1 = _mm512_mul_ps(va, acc1[r]);
    if (read_c) {
      v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), v0);
      v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), v1);
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

// Where the packed blocks of op(A) come from: packed here, block by block,
// from A (ta, A), or taken from a Bf16PackedA.
struct ASource {
  Trans ta;
  const uint16_t* A;
  const Bf16PackedA* packed;
};

// Columns [j_begin, j_end) of C, on the calling thread.
void gemm_columns(const ASource& src, Trans tb, int M, int N, int K, float alpha, const uint16_t* B, float beta,
                  float* C, int j_begin, int j_end) {
  thread_local std::vector<uint32_t> a_pack, b_pack;
  for (int jc = j_begin; jc < j_end; jc += kNc) {
    const int nc = std::min(kNc, j_end - jc);
    for (int pc = 0; pc < K; pc += kKc) {
      const int kc = std::min(kKc, K - pc), kp = (kc + 1) / 2;
      b_pack.resize(static_cast<size_t>(kp) * ((nc + kNr - 1) / kNr * kNr));
      pack_b(tb, B, N, K, jc, nc, pc, kc, b_pack.data());
      for (int ic = 0; ic < M; ic += kMc) {
        const int mc = std::min(kMc, M - ic);
        const uint32_t* ap = nullptr;
        if (src.packed) {
          ap = src.packed->block(pc / kKc, ic / kMc);
        } else {
          a_pack.resize(static_cast<size_t>(kp) * ((mc + kMr - 1) / kMr * kMr));
          pack_a(src.ta, src.A, M, K, ic, mc, pc, kc, a_pack.data());
          ap = a_pack.data();
        }
        for (int jr = 0; jr < nc; jr += kNr) {
          for (int ir = 0; ir < mc; ir += kMr) {
            micro_kernel(kp, ap + static_cast<size_t>(ir) * kp, b_pack.data() + static_cast<size_t>(jr) * kp, alpha,
                         beta, pc == 0, C + static_cast<size_t>(ic + ir) * N + jc + jr, N, std::min(kMr, mc - ir),
                         std::min(kNr, nc - jr));
          }
        }
      }
    }
  }
}

void gemm(const ASource& src, Trans tb, int M, int N, int K, float alpha, const bfloat16* B, float beta, float* C) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // no products: C = beta * C
    const size_t n = static_cast<size_t>(M) * N;
    for (size_t i = 0; i < n; ++i) C[i] = beta == 0.f ? 0.f : beta * C[i];
    return;
  }
  const auto* b = reinterpret_cast<const uint16_t*>(B);
  // Small products are not worth a fork-join; the split is in whole panels.
  constexpr int64_t kSerialFlops = int64_t{1} << 20;
  const int panels = (N + kNr - 1) / kNr;
  if (2 * int64_t{M} * N * K < kSerialFlops || panels == 1) {
    gemm_columns(src, tb, M, N, K, alpha, b, beta, C, 0, N);
    return;
  }
  cpu_parallel_for(panels, [&](int, int p0, int p1) {
    gemm_columns(src, tb, M, N, K, alpha, b, beta, C, p0 * kNr, std::min(N, p1 * kNr));
  });
}

}  // namespace

bool bf16_dot_supported() {
  static const bool yes =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16");
  return yes;
}

void gemm_bf16_dot(Trans ta, Trans tb, int M, int N, int K, float alpha, const bfloat16* A, const bfloat16* B,
                   float beta, float* C) {
  gemm(ASource{ta, reinterpret_cast<const uint16_t*>(A), nullptr}, tb, M, N, K, alpha, B, beta, C);
}

void Bf16PackedA::pack(Trans ta, int M, int K, const bfloat16* A) {
  M_ = std::max(M, 0);
  K_ = std::max(K, 0);
  m_blocks_ = (M_ + kMc - 1) / kMc;
  offsets_.clear();
  size_t total = 0;
  for (int pc = 0; pc < K_; pc += kKc) {
    const int kp = (std::min(kKc, K_ - pc) + 1) / 2;
    for (int ic = 0; ic < M_; ic += kMc) {
      offsets_.push_back(total);
      total += static_cast<size_t>(kp) * ((std::min(kMc, M_ - ic) + kMr - 1) / kMr * kMr);
    }
  }
  data_.resize(total);
  const auto* a = reinterpret_cast<const uint16_t*>(A);
  size_t block = 0;
  for (int pc = 0; pc < K_; pc += kKc) {
    for (int ic = 0; ic < M_; ic += kMc) {
      pack_a(ta, a, M_, K_, ic, std::min(kMc, M_ - ic), pc, std::min(kKc, K_ - pc), data_.data() + offsets_[block++]);
    }
  }
}

const uint32_t* Bf16PackedA::block(int k_block, int m_block) const {
  return data_.data() + offsets_[static_cast<size_t>(k_block) * m_blocks_ + m_block];
}

void gemm_bf16_dot(const Bf16PackedA& A, Trans tb, int N, float alpha, const bfloat16* B, float beta, float* C) {
  gemm(ASource{Trans::No, nullptr, &A}, tb, A.rows(), N, A.depth(), alpha, B, beta, C);
}

#else  // no x86-64 AVX-512 BF16 in this build

bool bf16_dot_supported() { return false; }

// Callers check bf16_dot_supported() first.
void gemm_bf16_dot(Trans, Trans, int, int, int, float, const bfloat16*, const bfloat16*, float, float*) {
  std::abort();
}
void Bf16PackedA::pack(Trans, int, int, const bfloat16*) { std::abort(); }
const uint32_t* Bf16PackedA::block(int, int) const { std::abort(); }
void gemm_bf16_dot(const Bf16PackedA&, Trans, int, float, const bfloat16*, float, float*) { std::abort(); }

#endif

namespace {
// 1 or 0 once decided: the CPU's support at the first call, or the last
// set_bf16_dot.
std::atomic<int> g_dot{-1};
}  // namespace

bool bf16_dot_enabled() {
  int v = g_dot.load(std::memory_order_relaxed);
  if (v < 0) {
    v = bf16_dot_supported() ? 1 : 0;
    int expected = -1;
    if (!g_dot.compare_exchange_strong(expected, v)) v = expected;
  }
  return v == 1;
}

bool set_bf16_dot(bool on) {
  const bool before = bf16_dot_enabled();
  g_dot.store(on && bf16_dot_supported() ? 1 : 0);
  return before;
}

}  // namespace cortado::detail

namespace cortado {

void set_cpu_bf16_dot(bool on) { detail::set_bf16_dot(on); }

std::string cpu_bf16_summary() {
  if (detail::bf16_dot_enabled()) return "bfloat16 GEMMs: AVX-512 BF16";
  return detail::bf16_dot_supported() ? "bfloat16 GEMMs: widened to float (switched off)"
                                      : "bfloat16 GEMMs: widened to float (no AVX-512 BF16)";
}

}  // namespace cortado
