#include "cortado/layers/softmax_with_loss_layer.hpp"

#include <cmath>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class SoftmaxWithLossLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  // x: (2, 3, 2) scores, labels: (2, 1, 2).
  void Build(const std::string& text, const std::vector<double>& labels, int num_top = 1) {
    layer_ = test::NewLayer<P>("name: 'loss' type: 'SoftmaxWithLoss' " + text);
    bottom_.add({2, 3, 2}, type_of<F>(), x_);
    bottom_.add({2, 1, 2}, type_of<F>(), labels);
    for (int k = 0; k < num_top; ++k) top_.add(type_of<F>());
    layer_->SetUp(bottom_.vec, top_.vec);
  }
  // -log p(label) of column (n, i), computed in double from the scores.
  double NegLogP(int n, int i, int label) const {
    double z = 0;
    for (int c = 0; c < 3; ++c) z += std::exp(x_[n * 6 + c * 2 + i]);
    return -(x_[n * 6 + label * 2 + i] - std::log(z));
  }
  double Prob(int n, int c, int i) const {
    double z = 0;
    for (int k = 0; k < 3; ++k) z += std::exp(x_[n * 6 + k * 2 + i]);
    return std::exp(x_[n * 6 + c * 2 + i]) / z;
  }

  const std::vector<double> x_ = {0.5, -1, 1.5, 2, -0.25, 0, 1, 1, 3, -2, 0.75, 0.5};
  std::unique_ptr<LayerBase> layer_;
  test::Blobs bottom_, top_;
};
TYPED_TEST_SUITE(SoftmaxWithLossLayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: the loss is computed in float from the (rounded) inputs
// and stays float; the gradient p - onehot is rounded once to Btype.
const test::ReferenceTolerance kTol{1, 2};

// Finite differences: the loss top is float even in the (double, double)
// run, which bounds the numeric gradient to about 1e-5; 1e-4 still sees a
// wrong scale of a fraction of a percent.
template <typename P>
test::GradientSettings Settings() {
  return test::GradientSettings().threshold(std::is_same_v<typename P::Ftype, double> ? 1e-4 : 1e-3);
}

TYPED_TEST(SoftmaxWithLossLayerTest, ForwardValueAndDefaultLossWeight) {
  this->Build("", {2, 0, 1, 2});
  const double loss = this->layer_->Forward(this->bottom_.vec, this->top_.vec);
  const double want =
      (this->NegLogP(0, 0, 2) + this->NegLogP(0, 1, 0) + this->NegLogP(1, 0, 1) + this->NegLogP(1, 1, 2)) / 4;
  EXPECT_EQ(this->top_[0]->shape(), std::vector<int>{});
  EXPECT_NEAR(test::GetData(*this->top_[0])[0], want, 1e-6 * want);
  EXPECT_EQ(this->layer_->loss(0), 1.0);  // a loss layer weighs 1 by default
  EXPECT_NEAR(loss, want, 1e-6 * want);
}

TYPED_TEST(SoftmaxWithLossLayerTest, Normalization) {
  // Labels with two of the four positions ignored (label 1).
  const std::vector<double> labels = {2, 1, 1, 0};
  const double sum = this->NegLogP(0, 0, 2) + this->NegLogP(1, 1, 0);
  const std::vector<std::pair<std::string, double>> cases = {
      {"normalization: FULL", sum / 4},   {"normalization: VALID", sum / 2},
      {"normalization: BATCH_SIZE", sum / 2}, {"normalization: NONE", sum},
      {"normalize: true", sum / 2},       {"normalize: false", sum / 2},
  };
  for (const auto& [mode, want] : cases) {
    SCOPED_TRACE(mode);
    this->bottom_ = test::Blobs();
    this->top_ = test::Blobs();
    this->Build("loss_param { ignore_label: 1 " + mode + " }", labels);
    this->layer_->Forward(this->bottom_.vec, this->top_.vec);
    EXPECT_NEAR(test::GetData(*this->top_[0])[0], want, 1e-6 * want);
  }
}

TYPED_TEST(SoftmaxWithLossLayerTest, BackwardValuesWithIgnoredLabel) {
  using B = typename TypeParam::Btype;
  this->Build("loss_param { ignore_label: 1 normalization: NONE }", {2, 1, 0, 0});
  this->layer_->Forward(this->bottom_.vec, this->top_.vec);
  test::SetDiff(this->top_[0], {0.5}, type_of<B>());
  this->layer_->Backward(this->top_.vec, {true, false}, this->bottom_.vec);
  const std::vector<int> label = {2, -1, 0, 0};  // per (n, i); -1 ignored
  std::vector<double> want(12);
  for (int n = 0; n < 2; ++n) {
    for (int c = 0; c < 3; ++c) {
      for (int i = 0; i < 2; ++i) {
        const int l = label[n * 2 + i];
        want[n * 6 + c * 2 + i] = l < 0 ? 0.0 : 0.5 * (this->Prob(n, c, i) - (c == l ? 1 : 0));
      }
    }
  }
  test::ExpectNear<test::Coarser<TypeParam>>(test::GetDiff(*this->bottom_[0]), want, 1);
}

// NVCaffe's label_smoothing eps with C = 3 classes: the target is 1 - eps on
// the label and eps / 2 on each other class; an ignored position counts for
// nothing, and VALID normalization divides by the 3 positions left.
TYPED_TEST(SoftmaxWithLossLayerTest, LabelSmoothingByHand) {
  const double eps = 0.25, on = 1 - eps, off = eps / 2;
  this->Build("loss_param { label_smoothing: 0.25 ignore_label: 1 }", {2, 1, 0, 0});
  const std::vector<int> label = {2, -1, 0, 0};  // per (n, i); -1 ignored
  double sum = 0;
  for (int n = 0; n < 2; ++n) {
    for (int i = 0; i < 2; ++i) {
      const int l = label[n * 2 + i];
      if (l < 0) continue;
      for (int c = 0; c < 3; ++c) sum += (c == l ? on : off) * this->NegLogP(n, i, c);
    }
  }
  const double want_loss = sum / 3;
  const double loss = this->layer_->Forward(this->bottom_.vec, this->top_.vec);
  EXPECT_NEAR(test::GetData(*this->top_[0])[0], want_loss, 1e-6 * want_loss);
  EXPECT_NEAR(loss, want_loss, 1e-6 * want_loss);

  using B = typename TypeParam::Btype;
  test::SetDiff(this->top_[0], {0.5}, type_of<B>());
  this->layer_->Backward(this->top_.vec, {true, false}, this->bottom_.vec);
  std::vector<double> want(12);
  for (int n = 0; n < 2; ++n) {
    for (int c = 0; c < 3; ++c) {
      for (int i = 0; i < 2; ++i) {
        const int l = label[n * 2 + i];
        want[n * 6 + c * 2 + i] = l < 0 ? 0.0 : 0.5 / 3 * (this->Prob(n, c, i) - (c == l ? on : off));
      }
    }
  }
  test::ExpectNear<test::Coarser<TypeParam>>(test::GetDiff(*this->bottom_[0]), want, 1);
}

// eps = 0 is the plain loss; the gradient of every position sums to 0 over
// the classes with smoothing too (the targets sum to 1).
TYPED_TEST(SoftmaxWithLossLayerTest, LabelSmoothingTargetsSumToOne) {
  using B = typename TypeParam::Btype;
  this->Build("loss_param { label_smoothing: 0.3 normalization: NONE }", {2, 0, 1, 2});
  this->layer_->Forward(this->bottom_.vec, this->top_.vec);
  test::SetDiff(this->top_[0], {1}, type_of<B>());
  this->layer_->Backward(this->top_.vec, {true, false}, this->bottom_.vec);
  const std::vector<double> dx = test::GetDiff(*this->bottom_[0]);
  for (int n = 0; n < 2; ++n) {
    for (int i = 0; i < 2; ++i) {
      double s = 0;
      for (int c = 0; c < 3; ++c) s += dx[n * 6 + c * 2 + i];
      EXPECT_NEAR(s, 0, 4 * type_epsilon<B>()) << n << "," << i;
    }
  }
}

TYPED_TEST(SoftmaxWithLossLayerTest, BadLabelSmoothing) {
  using F = typename TypeParam::Ftype;
  const std::vector<std::pair<std::string, std::vector<int>>> cases = {
      {"1", {2, 3}}, {"-0.1", {2, 3}}, {"nan", {2, 3}}, {"0.1", {2, 1}}};
  for (const auto& [eps, shape] : cases) {
    SCOPED_TRACE(eps);
    auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'SoftmaxWithLoss' loss_param { label_smoothing: " +
                                           eps + " }");
    test::Blobs bottom, top;
    bottom.add(shape, type_of<F>());
    bottom.add({2}, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << "label_smoothing " << eps << " was accepted for shape " << shape[1];
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "loss_param.label_smoothing");
    }
  }
}

TYPED_TEST(SoftmaxWithLossLayerTest, ProbabilityTop) {
  using F = typename TypeParam::Ftype;
  this->Build("", {0, 0, 0, 0}, 2);
  EXPECT_EQ(this->layer_->loss(0), 1.0);
  EXPECT_EQ(this->layer_->loss(1), 0.0);
  this->layer_->Forward(this->bottom_.vec, this->top_.vec);
  ASSERT_EQ(this->top_[1]->shape(), (std::vector<int>{2, 3, 2}));
  std::vector<double> want(12);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 2; ++i) want[n * 6 + c * 2 + i] = this->Prob(n, c, i);
  test::ExpectNear<F>(test::GetData(*this->top_[1]), want, 1);
}

TYPED_TEST(SoftmaxWithLossLayerTest, BadLabel) {
  for (double bad : {3.0, -1.0, 0.5}) {
    this->bottom_ = test::Blobs();
    this->top_ = test::Blobs();
    this->Build("", {0, 1, bad, 2});
    try {
      this->layer_->Forward(this->bottom_.vec, this->top_.vec);
      ADD_FAILURE() << "label " << bad << " was accepted";
    } catch (const FieldError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.field(), "bottom[1]");
      EXPECT_NE(msg.find("label value " + str_cat(static_cast<float>(bad))), std::string::npos) << msg;
      EXPECT_NE(msg.find("[0, 3)"), std::string::npos) << msg;
      EXPECT_NE(msg.find("'loss'"), std::string::npos) << msg;
    }
  }
}

TYPED_TEST(SoftmaxWithLossLayerTest, LabelCountMismatch) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'SoftmaxWithLoss'");
  test::Blobs bottom, top;
  bottom.add({2, 3, 2}, type_of<F>());
  bottom.add({2}, type_of<F>());
  top.add(type_of<F>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "2 labels for 4 predictions were accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "bottom[1]");
    EXPECT_NE(std::string(e.what()).find("needs 4"), std::string::npos) << e.what();
  }
}

TYPED_TEST(SoftmaxWithLossLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 8);
    else test::FillLabels(b, 5, 9);
  };
  test::CheckLayer<TypeParam>("type: 'SoftmaxWithLoss'", {{3, 5, 2, 2}, {3, 1, 2, 2}}, fill,
                              Settings<TypeParam>(), kTol, {true, false});
}

TYPED_TEST(SoftmaxWithLossLayerTest, GradientIgnoreLabelFullNormalization) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 10);
    else test::FillLabels(b, 4, 11);
  };
  test::CheckLayer<TypeParam>(
      "type: 'SoftmaxWithLoss' softmax_param { axis: 2 } loss_param { ignore_label: 3 normalization: FULL }",
      {{2, 3, 4}, {2, 3}}, fill, Settings<TypeParam>(), kTol, {true, false});
}

TYPED_TEST(SoftmaxWithLossLayerTest, GradientLabelSmoothing) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 12);
    else test::FillLabels(b, 5, 13);
  };
  test::CheckLayer<TypeParam>("type: 'SoftmaxWithLoss' loss_param { label_smoothing: 0.1 }",
                              {{3, 5, 2, 2}, {3, 1, 2, 2}}, fill, Settings<TypeParam>(), kTol, {true, false});
}

TYPED_TEST(SoftmaxWithLossLayerTest, GradientLabelSmoothingIgnoreLabelBatchNormalization) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 14);
    else test::FillLabels(b, 4, 15);
  };
  test::CheckLayer<TypeParam>("type: 'SoftmaxWithLoss' softmax_param { axis: 2 } "
                              "loss_param { label_smoothing: 0.25 ignore_label: 3 normalization: BATCH_SIZE }",
                              {{2, 3, 4}, {2, 3}}, fill, Settings<TypeParam>(), kTol, {true, false});
}

// GPU against CPU: loss (float), probability top and gradient, for both
// softmax kernels, every normalization and an ignored label. The loss is a
// double sum on both sides; expf and the summation orders differ: a few ulps.
TYPED_TEST(SoftmaxWithLossLayerTest, GpuMatchesCpu) {
  auto rows = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 16); else test::FillLabels(b, 40, 17);
  };
  auto columns = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 18); else test::FillLabels(b, 5, 19);
  };
  const test::GpuTolerance tol{16, 32};
  test::CheckGpuAgainstCpu<TypeParam>("type: 'SoftmaxWithLoss'", {{6, 40}, {6}}, rows, tol, {true, false}, 2);
  for (const char* norm : {"FULL", "VALID", "BATCH_SIZE", "NONE"}) {
    SCOPED_TRACE(norm);
    test::CheckGpuAgainstCpu<TypeParam>(
        str_cat("type: 'SoftmaxWithLoss' loss_param { ignore_label: 1 normalization: ", norm, " }"),
        {{3, 5, 2, 4}, {3, 1, 2, 4}}, columns, tol, {true, false}, 2);
    test::CheckGpuAgainstCpu<TypeParam>(
        str_cat("type: 'SoftmaxWithLoss' loss_param { label_smoothing: 0.1 ignore_label: 1 normalization: ", norm,
                " }"),
        {{3, 5, 2, 4}, {3, 1, 2, 4}}, columns, tol, {true, false}, 2);
  }
}

// On the GPU a bad label cannot throw inside the kernel: it is recorded, and
// the Backward after the (synchronizing) loss read raises the CPU's error.
TYPED_TEST(SoftmaxWithLossLayerTest, GpuBadLabelIsReported) {
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  using F = typename TypeParam::Ftype;
  test::ActiveGpuContext gpu;
  const std::shared_ptr<Context>& ctx = gpu.ctx;
  auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'SoftmaxWithLoss'");
  layer->set_context(ctx);
  test::Blobs bottom, top;
  bottom.add({3, 4}, type_of<F>(), {0, 1, 2, 3, 1, 1, 1, 1, -1, 0, 1, 2});
  bottom.add({3}, type_of<F>(), {1, 3, 7});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  try {
    layer->Backward(top.vec, {true, false}, bottom.vec);
    ADD_FAILURE() << "a label of 7 with 4 classes was not reported";
  } catch (const FieldError& e) {
    EXPECT_NE(std::string(e.what()).find("label value 7 at position 2"), std::string::npos) << e.what();
  }
  ctx->Synchronize();
#endif
}

}  // namespace
}  // namespace cortado
