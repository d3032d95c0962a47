// The AVX-512 BF16 GEMM (util/gemm_bf16.hpp): every transpose and block edge
// against a double reference, beta's contract, the split over threads, its
// use by cpu_gemm<bfloat16>, and the bfloat16 Convolution and InnerProduct
// layers on both paths against (double, double). On a CPU without AVX-512
// BF16 the kernel cases say SKIPPED; the layer cases then check the widening
// path only.
#include "cortado/util/gemm_bf16.hpp"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cortado/util/cpu_parallel.hpp"
#include "cortado/util/math.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

#define CORTADO_SKIP_WITHOUT_BF16_DOT() \
  if (!detail::bf16_dot_supported()) GTEST_SKIP() << "this CPU has no AVX-512 BF16"

struct Problem {
  Trans ta, tb;
  int M, N, K;
  std::vector<bfloat16> A, B;

  Problem(Trans ta_, Trans tb_, int m, int n, int k, uint32_t seed) : ta(ta_), tb(tb_), M(m), N(n), K(k) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g;
    A.resize(static_cast<size_t>(M) * K);
    B.resize(static_cast<size_t>(K) * N);
    for (auto& v : A) v = bfloat16(g(rng));
    for (auto& v : B) v = bfloat16(g(rng));
  }
  double a(int i, int k) const { return A[ta == Trans::No ? size_t(i) * K + k : size_t(k) * M + i]; }
  double b(int k, int j) const { return B[tb == Trans::No ? size_t(k) * N + j : size_t(j) * K + k]; }
};

// alpha * sum_k a(i, k) b(k, j) + beta * c0 in double, and the bound of a
// float sum of K exact products: (K + 2) float epsilons of sum |terms|.
void ExpectMatchesReference(const Problem& p, float alpha, float beta, const std::vector<float>& c0,
                            const std::vector<float>& got) {
  int failures = 0;
  for (int i = 0; i < p.M; ++i) {
    for (int j = 0; j < p.N; ++j) {
      double dot = 0, mag = 0;
      for (int k = 0; k < p.K; ++k) {
        const double t = p.a(i, k) * p.b(k, j);
        dot += t;
        mag += std::fabs(t);
      }
      const size_t at = static_cast<size_t>(i) * p.N + j;
      const double c = beta == 0.f ? 0.0 : double(beta) * c0[at];
      const double want = alpha * dot + c;
      const double tol = (p.K + 2) * double(FLT_EPSILON) * (std::fabs(alpha) * mag + std::fabs(c)) + 1e-30;
      if (!(std::fabs(got[at] - want) <= tol) && ++failures <= 5) {
        ADD_FAILURE() << "C(" << i << ", " << j << ") = " << got[at] << ", want " << want << " (tolerance " << tol
                      << ")";
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

// Calls check(problem) for every transpose pair and every {M, N, K} of sizes,
// each a new random problem, with the sizes in the failure messages.
template <size_t S, typename F>
void ForEveryProblem(const int (&sizes)[S][3], uint32_t seed, F&& check) {
  for (Trans ta : {Trans::No, Trans::Yes}) {
    for (Trans tb : {Trans::No, Trans::Yes}) {
      for (const auto& s : sizes) {
        SCOPED_TRACE(::testing::Message()
                     << "ta=" << int(ta) << " tb=" << int(tb) << " M=" << s[0] << " N=" << s[1] << " K=" << s[2]);
        check(Problem(ta, tb, s[0], s[1], s[2], seed++));
      }
    }
  }
}

TEST(Bf16Gemm, MatchesDoubleReferenceForEveryTransposeAndBlockEdge) {
  CORTADO_SKIP_WITHOUT_BF16_DOT();
  // Sizes around the micro-tile (12 x 32), the K block (384, odd K) and the
  // M and N blocks (96, 1024).
  const int sizes[][3] = {{1, 1, 1},     {13, 37, 29},  {12, 32, 384}, {25, 65, 385},
                          {97, 33, 770}, {11, 1030, 7}, {96, 64, 2}};
  ForEveryProblem(sizes, 1, [](const Problem& p) {
    std::vector<float> c0(static_cast<size_t>(p.M) * p.N);
    for (size_t i = 0; i < c0.size(); ++i) c0[i] = float(i % 7) - 3.f;
    std::vector<float> c = c0;
    detail::gemm_bf16_dot(p.ta, p.tb, p.M, p.N, p.K, 0.5f, p.A.data(), p.B.data(), 2.f, c.data());
    ExpectMatchesReference(p, 0.5f, 2.f, c0, c);
  });
}

TEST(Bf16Gemm, PackedAGivesTheSameBits) {
  CORTADO_SKIP_WITHOUT_BF16_DOT();
  const int sizes[][3] = {{1, 1, 1}, {13, 37, 29}, {97, 70, 770}, {200, 5, 385}, {5, 0, 3}};
  ForEveryProblem(sizes, 40, [](const Problem& p) {
    detail::Bf16PackedA packed;
    packed.pack(p.ta, p.M, p.K, p.A.data());
    EXPECT_EQ(packed.rows(), p.M);
    EXPECT_EQ(packed.depth(), p.K);
    std::vector<float> c0(static_cast<size_t>(p.M) * p.N, 0.25f), c1 = c0;
    detail::gemm_bf16_dot(p.ta, p.tb, p.M, p.N, p.K, 1.5f, p.A.data(), p.B.data(), -1.f, c0.data());
    detail::gemm_bf16_dot(packed, p.tb, p.N, 1.5f, p.B.data(), -1.f, c1.data());
    for (size_t i = 0; i < c0.size(); ++i) ASSERT_EQ(c0[i], c1[i]) << "index " << i;
  });
}

TEST(Bf16Gemm, BetaZeroDoesNotReadC) {
  CORTADO_SKIP_WITHOUT_BF16_DOT();
  Problem p(Trans::No, Trans::No, 14, 40, 400, 7);  // two K blocks: the second adds to what the first wrote
  std::vector<float> c(static_cast<size_t>(p.M) * p.N, std::numeric_limits<float>::quiet_NaN());
  detail::gemm_bf16_dot(p.ta, p.tb, p.M, p.N, p.K, 1.f, p.A.data(), p.B.data(), 0.f, c.data());
  ExpectMatchesReference(p, 1.f, 0.f, c, c);
}

TEST(Bf16Gemm, EmptyKScalesC) {
  CORTADO_SKIP_WITHOUT_BF16_DOT();
  std::vector<float> c = {1, -2, 3, std::numeric_limits<float>::quiet_NaN()};
  detail::gemm_bf16_dot(Trans::No, Trans::No, 2, 2, 0, 1.f, nullptr, nullptr, 3.f, c.data());
  EXPECT_EQ(c[0], 3.f);
  EXPECT_EQ(c[1], -6.f);
  EXPECT_EQ(c[2], 9.f);
  detail::gemm_bf16_dot(Trans::No, Trans::No, 2, 2, 0, 1.f, nullptr, nullptr, 0.f, c.data());
  for (float v : c) EXPECT_EQ(v, 0.f);
}

TEST(Bf16Gemm, SplitOverThreadsGivesTheSerialBits) {
  CORTADO_SKIP_WITHOUT_BF16_DOT();
  // Large enough to be split into column panels at the top level; inside a
  // cpu_parallel_for chunk the same call runs serially.
  Problem p(Trans::No, Trans::Yes, 70, 300, 500, 11);
  std::vector<float> top(static_cast<size_t>(p.M) * p.N), nested(top.size());
  detail::gemm_bf16_dot(p.ta, p.tb, p.M, p.N, p.K, 1.f, p.A.data(), p.B.data(), 0.f, top.data());
  cpu_parallel_for(2, [&](int chunk, int, int) {
    if (chunk == 0) detail::gemm_bf16_dot(p.ta, p.tb, p.M, p.N, p.K, 1.f, p.A.data(), p.B.data(), 0.f, nested.data());
  });
  for (size_t i = 0; i < top.size(); ++i) ASSERT_EQ(top[i], nested[i]) << "index " << i;
}

TEST(Bf16Gemm, CpuGemmOfBfloat16RoundsTheFloatSumOnce) {
  CORTADO_SKIP_WITHOUT_BF16_DOT();
  const bool was = detail::set_bf16_dot(true);
  Problem p(Trans::Yes, Trans::No, 30, 50, 200, 5);
  std::vector<bfloat16> c(static_cast<size_t>(p.M) * p.N, bfloat16(1.f));
  std::vector<float> cf(c.size(), 1.f);
  cpu_gemm<bfloat16>(p.ta, p.tb, p.M, p.N, p.K, 1.f, p.A.data(), p.B.data(), 1.f, c.data());
  detail::gemm_bf16_dot(p.ta, p.tb, p.M, p.N, p.K, 1.f, p.A.data(), p.B.data(), 1.f, cf.data());
  for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i].x, bfloat16(cf[i]).x) << "index " << i;
  // The widening path sums in another order: within one bfloat16 rounding.
  detail::set_bf16_dot(false);
  std::vector<bfloat16> w(c.size(), bfloat16(1.f));
  cpu_gemm<bfloat16>(p.ta, p.tb, p.M, p.N, p.K, 1.f, p.A.data(), p.B.data(), 1.f, w.data());
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_NEAR(float(w[i]), float(c[i]), std::ldexp(std::fabs(cf[i]), -7) + 1e-6) << "index " << i;
  }
  detail::set_bf16_dot(was);
}

TEST(Bf16Gemm, SetReportsThePreviousSetting) {
  const bool was = detail::set_bf16_dot(false);
  EXPECT_FALSE(detail::bf16_dot_enabled());
  EXPECT_FALSE(detail::set_bf16_dot(true));
  EXPECT_EQ(detail::bf16_dot_enabled(), detail::bf16_dot_supported());
  detail::set_bf16_dot(was);
}

// The layers that keep bfloat16 operands for the kernel, on both paths,
// against (double, double) in bfloat16's tolerance.
class Bf16Layers : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    was_ = detail::bf16_dot_enabled();
    if (GetParam() && !detail::bf16_dot_supported()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
    detail::set_bf16_dot(GetParam());
  }
  void TearDown() override { detail::set_bf16_dot(was_); }
  bool was_ = false;
};

using Bf16Pair = test::TypePair<bfloat16, bfloat16>;
const auto kFill = [](int i, Blob* b) { test::FillGaussian(b, 0, 1, 23 + i); };
const char* kFillers = " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'uniform' min: -1 max: 1 }";

TEST_P(Bf16Layers, Convolution) {
  ASSERT_EQ(detail::bf16_dot_enabled(), GetParam());
  // Grouped, strided, padded; then 1x1 with two bottoms.
  test::CheckAgainstDouble<Bf16Pair>(std::string("type: 'Convolution' convolution_param { num_output: 6 group: 2 "
                                                 "kernel_size: 3 pad: 1 stride: 2") +
                                         kFillers + " }",
                                     {{3, 4, 9, 7}}, kFill, test::ReferenceTolerance{2, 4});
  test::CheckAgainstDouble<Bf16Pair>(std::string("type: 'Convolution' convolution_param { num_output: 5 "
                                                 "kernel_size: 1") +
                                         kFillers + " }",
                                     {{2, 3, 4, 4}, {2, 3, 4, 4}}, kFill, test::ReferenceTolerance{2, 4}, {}, 2);
}

TEST_P(Bf16Layers, InnerProduct) {
  ASSERT_EQ(detail::bf16_dot_enabled(), GetParam());
  test::CheckAgainstDouble<Bf16Pair>(
      std::string("type: 'InnerProduct' inner_product_param { num_output: 37") + kFillers + " }", {{5, 3, 2, 7}}, kFill,
      test::ReferenceTolerance{2, 4});
  test::CheckAgainstDouble<Bf16Pair>(std::string("type: 'InnerProduct' inner_product_param { num_output: 9 "
                                                 "transpose: true") +
                                         kFillers + " }",
                                     {{4, 33}}, kFill, test::ReferenceTolerance{2, 4});
}

INSTANTIATE_TEST_SUITE_P(BothPaths, Bf16Layers, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "Dot" : "Widening");
                         });

}  // namespace
}  // namespace cortado
