#pragma once
// bfloat16 GEMM on CPUs with AVX-512 BF16 (VDPBF16PS: 16 lanes, each adding
// the products of two bfloat16 pairs to a float accumulator).
//
// Why: without it, cpu_gemm<bfloat16> widens both operands into float
// scratch, runs sgemm and narrows C again: three extra passes over memory,
// and float math at float's speed. Here the operands are packed as bfloat16
// pairs (the packing is the only pass over them), the products are exact in
// float, the sums are float, and C is rounded once on the store: the result
// matches the widening path up to the order of the float additions. C is
// float: the layers keep their sums in the math type (MathBuffer) and round
// to bfloat16 once, after every GEMM of the pass.
//
// Layout (the BLIS/GotoBLAS scheme): K is cut into blocks of kKc, N into
// blocks of kNc; a block of B is packed into panels of 32 columns
// (k-pairs interleaved, one 32-bit lane per column), a block of A into
// panels of 12 rows (one k-pair per 32-bit word, broadcast); a 12 x 32
// micro-kernel keeps 24 accumulators in registers and adds them to C (the
// first K block applies beta). N is split over cpu_parallel_for's
// chunks (serial inside another parallel loop, as in a convolution's
// per-image chunks).
//
// Caveat of the instruction: it treats subnormal inputs as zero and
// flushes subnormal results (below 2^-126, far under any gradient a loss
// scale would keep), and always rounds to nearest even.

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "cortado/bfloat16.hpp"
#include "cortado/util/math.hpp"

namespace cortado::detail {

/// Whether bfloat16 layers use the kernel: where this CPU has AVX-512 BF16
/// and the build compiled it, unless set_cpu_bf16_dot(false) keeps them on
/// the widening path (for side-by-side benchmarks).
bool bf16_dot_enabled();

/// set_cpu_bf16_dot (below); returns the previous setting. For tests that
/// compare both paths.
bool set_bf16_dot(bool on);

/// Whether the CPU and the build could run the kernel at all (ignores the
/// switch): tests call gemm_bf16_dot only where this holds.
bool bf16_dot_supported();

/// C = alpha * op(A) * op(B) + beta * C with bfloat16 A and B and float C, in
/// the layout of cpu_gemm (row-major, A is M x K after op, B is K x N, C is
/// M x N). beta == 0 does not read C. Requires bf16_dot_supported().
void gemm_bf16_dot(Trans ta, Trans tb, int M, int N, int K, float alpha, const bfloat16* A, const bfloat16* B,
                   float beta, float* C);

/// op(A) packed once for several products with the same A: a convolution's
/// weights, which every image of the batch multiplies (for small images,
/// packing the weights again per image cost as much as the products).
class Bf16PackedA {
 public:
  /// Packs op(A) (M x K after op, row-major before it). Requires bf16_dot_supported().
  void pack(Trans ta, int M, int K, const bfloat16* A);
  int rows() const { return M_; }
  int depth() const { return K_; }
  /// The packed block of k-block k_block and row block m_block (internal).
  const uint32_t* block(int k_block, int m_block) const;

 private:
  int M_ = 0, K_ = 0, m_blocks_ = 0;
  std::vector<uint32_t> data_;
  std::vector<size_t> offsets_;
};

/// C = alpha * op(A) * op(B) + beta * C with A packed beforehand (rows() x
/// depth()); the same bits as the call that packs A itself.
void gemm_bf16_dot(const Bf16PackedA& A, Trans tb, int N, float alpha, const bfloat16* B, float beta, float* C);

}  // namespace cortado::detail

namespace cortado {

/// For logs: "bfloat16 GEMMs: AVX-512 BF16", or why they are widened to float.
std::string cpu_bf16_summary();

/// The process's switch cpu_bf16_dot (switches.hpp; trainer --cpu_bf16_dot,
/// Python's cortado.set_cpu_bf16_dot): true (the default) runs BF16
/// Convolution and InnerProduct on the AVX-512 BF16 kernel where the CPU has
/// it; false widens their operands to float for OpenBLAS, for the layers
/// from now on.
void set_cpu_bf16_dot(bool on);

/// C = alpha * op(A) * op(B) + beta * C with C in O's math type: cpu_gemm for
/// float and double operands, gemm_bf16_dot for bfloat16 ones. A CPU layer
/// keeps its operands in bfloat16 only where detail::bf16_dot_enabled().
template <typename O>
inline void cpu_gemm_to_math(Trans ta, Trans tb, int M, int N, int K, math_t<O> alpha, const O* A, const O* B,
                             math_t<O> beta, math_t<O>* C) {
  if constexpr (std::is_same_v<O, bfloat16>) {
    detail::gemm_bf16_dot(ta, tb, M, N, K, alpha, A, B, beta, C);
  } else {
    static_assert(std::is_same_v<O, math_t<O>>, "float16 operands are widened by the caller");
    cpu_gemm<O>(ta, tb, M, N, K, alpha, A, B, beta, C);
  }
}

/// Runs run(O()) with O the type a CPU layer of storage type S keeps its GEMM
/// operands in: bfloat16 where S is bfloat16, `allowed` holds and the kernel
/// is enabled; math_t<S> otherwise.
template <typename S, typename Run>
void with_gemm_operands(Run&& run, bool allowed = true) {
  if constexpr (std::is_same_v<S, bfloat16>) {
    if (allowed && detail::bf16_dot_enabled()) return run(bfloat16());
  }
  run(math_t<S>());
}

}  // namespace cortado
