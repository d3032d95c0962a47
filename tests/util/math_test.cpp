#include "cortado/util/math.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace cortado {
namespace {

// A naive reference GEMM in double.
std::vector<double> ref_gemm(bool ta, bool tb, int M, int N, int K, const std::vector<double>& A,
                             const std::vector<double>& B) {
  std::vector<double> C(M * N, 0);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      for (int k = 0; k < K; ++k)
        C[i * N + j] += (ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
  return C;
}

template <typename T> class MathTest : public ::testing::Test {};
using Types = ::testing::Types<double, float, float16, bfloat16>;
TYPED_TEST_SUITE(MathTest, Types);

TYPED_TEST(MathTest, GemmAllTransposes) {
  using T = TypeParam;
  const int M = 3, N = 4, K = 5;
  std::vector<double> A(M * K), B(K * N);
  for (int i = 0; i < M * K; ++i) A[i] = (i % 7) * 0.25 - 0.5;  // exact in half
  for (int i = 0; i < K * N; ++i) B[i] = (i % 5) * 0.5 - 1.0;
  std::vector<T> a(A.begin(), A.end()), b(B.begin(), B.end());
  for (auto& v : a) v = T(math_t<T>(v));
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      const auto want = ref_gemm(ta, tb, M, N, K, A, B);
      std::vector<T> c(M * N, T(1.0f));
      cpu_gemm<T>(ta ? Trans::Yes : Trans::No, tb ? Trans::Yes : Trans::No, M, N, K, 2, a.data(), b.data(), 0.5,
                  c.data());
      // One rounding of the result to T (bfloat16: 2^-8 relative).
      for (int i = 0; i < M * N; ++i) {
        const double v = 2 * want[i] + 0.5;
        EXPECT_NEAR(double(c[i]), v, std::max(1e-2, type_epsilon<T>() * std::fabs(v))) << ta << tb << i;
      }
    }
  }
}

TYPED_TEST(MathTest, GemvAndElementwise) {
  using T = TypeParam;
  std::vector<T> A = {T(1.0f), T(2.0f), T(3.0f), T(4.0f), T(5.0f), T(6.0f)};  // 2x3
  std::vector<T> x = {T(1.0f), T(0.0f), T(-1.0f)}, y(2);
  cpu_gemv<T>(Trans::No, 2, 3, 1, A.data(), x.data(), 0, y.data());
  EXPECT_EQ(double(y[0]), -2.0);
  EXPECT_EQ(double(y[1]), -2.0);
  std::vector<T> xt = {T(1.0f), T(1.0f)}, yt(3);
  cpu_gemv<T>(Trans::Yes, 2, 3, 1, A.data(), xt.data(), 0, yt.data());
  EXPECT_EQ(double(yt[2]), 9.0);
  cpu_axpy<T>(3, 2, x.data(), yt.data());
  EXPECT_EQ(double(yt[0]), 7.0);
  EXPECT_EQ(double(yt[2]), 7.0);
  EXPECT_EQ(cpu_dot<T>(3, x.data(), x.data()), 2.0);
  EXPECT_EQ(cpu_asum<T>(3, x.data()), 2.0);
  EXPECT_FALSE(cpu_has_nonfinite<T>(3, x.data()));
  x[1] = T(std::numeric_limits<float>::infinity());
  EXPECT_TRUE(cpu_has_nonfinite<T>(3, x.data()));
}

TEST(Math, HalfAccumulatesInFloat) {
  // 4096 additions of 1 in half arithmetic would stall at 2048; the float
  // accumulation inside a half GEMM does not.
  const int K = 4096;
  std::vector<float16> a(K, float16(1.f)), b(K, float16(1.f));
  float16 c;
  cpu_gemm<float16>(Trans::No, Trans::No, 1, 1, K, 1, a.data(), b.data(), 0, &c);
  EXPECT_EQ(float(c), 4096.f);
  // bfloat16 likewise (half arithmetic would stall at 256).
  std::vector<bfloat16> ab(K, bfloat16(1.f)), bb(K, bfloat16(1.f));
  bfloat16 cb;
  cpu_gemm<bfloat16>(Trans::No, Trans::No, 1, 1, K, 1, ab.data(), bb.data(), 0, &cb);
  EXPECT_EQ(float(cb), 4096.f);
}

}  // namespace
}  // namespace cortado
