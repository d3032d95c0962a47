#include "cortado/layers/filler.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "cortado/util/rng.hpp"

namespace cortado {
namespace {

FillerParameter filler(const std::string& type) {
  FillerParameter p;
  p.set_type(type);
  return p;
}

double mean(const Blob& b) { return b.asum_data() ? [&] {
  double s = 0;
  for (size_t i = 0; i < b.count(); ++i) s += b.cpu_data<double>()[i];
  return s / b.count();
}() : 0.0; }

TEST(Filler, Constant) {
  Blob b({2, 3}, FLOAT16);
  FillerParameter p = filler("constant");
  p.set_value(1.5f);
  Fill(p, &b);
  for (size_t i = 0; i < b.count(); ++i) EXPECT_EQ(float(b.cpu_data<float16>()[i]), 1.5f);
}

TEST(Filler, UniformWithinBounds) {
  set_random_seed(3);
  Blob b({1000});
  FillerParameter p = filler("uniform");
  p.set_min(-2);
  p.set_max(3);
  Fill(p, &b);
  for (size_t i = 0; i < b.count(); ++i) {
    ASSERT_GE(b.cpu_data<float>()[i], -2.f);
    ASSERT_LE(b.cpu_data<float>()[i], 3.f);
  }
  EXPECT_NEAR(mean(b), 0.5, 0.2);
}

TEST(Filler, GaussianMoments) {
  set_random_seed(4);
  Blob b({20000}, DOUBLE);
  FillerParameter p = filler("gaussian");
  p.set_mean(1);
  p.set_std(2);
  Fill(p, &b);
  EXPECT_NEAR(mean(b), 1.0, 0.06);
  const double var = b.sumsq_data() / b.count() - mean(b) * mean(b);
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.06);
}

TEST(Filler, XavierAndMsraScaleWithFanIn) {
  set_random_seed(5);
  Blob b({50, 20, 5, 5});  // fan_in 500
  Fill(filler("xavier"), &b);
  const double bound = std::sqrt(3.0 / 500);
  for (size_t i = 0; i < b.count(); ++i) ASSERT_LE(std::abs(b.cpu_data<float>()[i]), bound + 1e-7);
  EXPECT_NEAR(b.sumsq_data() / b.count(), 1.0 / 500, 0.1 / 500);  // var of U(-a,a) = a^2/3
  Fill(filler("msra"), &b);
  EXPECT_NEAR(b.sumsq_data() / b.count(), 2.0 / 500, 0.15 / 500);
  FillerParameter avg = filler("msra");
  avg.set_variance_norm(FillerParameter::AVERAGE);  // fan_out = count / 20 = 1250
  Fill(avg, &b);
  EXPECT_NEAR(b.sumsq_data() / b.count(), 2.0 / 875, 0.15 / 875);
}

TEST(Filler, PositiveUnitball) {
  set_random_seed(6);
  Blob b({4, 10});
  Fill(filler("positive_unitball"), &b);
  for (int r = 0; r < 4; ++r) {
    double s = 0;
    for (int j = 0; j < 10; ++j) {
      EXPECT_GE(b.cpu_data<float>()[r * 10 + j], 0.f);
      s += b.cpu_data<float>()[r * 10 + j];
    }
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
}

TEST(Filler, UnknownTypeNamesTheKnownOnes) {
  Blob b({2});
  try {
    Fill(filler("glorot"), &b, "layer 'ip' inner_product_param.weight_filler");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown filler 'glorot'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("xavier"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("layer 'ip'"), std::string::npos);
  }
}

}  // namespace
}  // namespace cortado
