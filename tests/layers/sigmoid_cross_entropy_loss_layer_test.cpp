#include "cortado/layers/sigmoid_cross_entropy_loss_layer.hpp"

#include <cmath>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class SigmoidCrossEntropyLossLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  void Build(const std::string& text) {
    layer_ = test::NewLayer<P>("name: 'loss' type: 'SigmoidCrossEntropyLoss' " + text);
    bottom_ = test::Blobs();
    top_ = test::Blobs();
    bottom_.add({2, 3}, type_of<F>(), x_);
    bottom_.add({2, 3}, type_of<F>(), t_);
    top_.add(type_of<F>());
    layer_->SetUp(bottom_.vec, top_.vec);
  }
  static double L(double x, double t) { return -(t * std::log(1 / (1 + std::exp(-x))) + (1 - t) * std::log(1 - 1 / (1 + std::exp(-x)))); }
  const std::vector<double> x_ = {0.5, -1, 2, -3, 0, 1.5};
  std::vector<double> t_ = {1, 0, 0.5, -1, 1, -1};  // -1 is ignored when ignore_label is -1
  std::unique_ptr<LayerBase> layer_;
  test::Blobs bottom_, top_;
};
TYPED_TEST_SUITE(SigmoidCrossEntropyLossLayerTest, test::AllPairs, test::PairNames);

// float16: inputs rounded once; the loss stays float; the gradient is
// rounded once to Btype.
const test::ReferenceTolerance kTol{2, 2};

template <typename P>
test::GradientSettings Settings() {
  return test::GradientSettings().threshold(std::is_same_v<typename P::Ftype, double> ? 1e-4 : 1e-3);
}

TYPED_TEST(SigmoidCrossEntropyLossLayerTest, ForwardValuesAndNormalization) {
  double valid_sum = 0;
  for (int i : {0, 1, 2, 4}) valid_sum += this->L(this->x_[i], this->t_[i]);
  const std::vector<std::pair<std::string, double>> cases = {
      {"", valid_sum / 4},
      {"normalization: FULL", valid_sum / 6},
      {"normalization: BATCH_SIZE", valid_sum / 2},
      {"normalization: NONE", valid_sum},
      {"normalize: false", valid_sum / 2},
  };
  for (const auto& [mode, want] : cases) {
    SCOPED_TRACE(mode);
    this->Build("loss_param { ignore_label: -1 " + mode + " }");
    EXPECT_EQ(this->layer_->loss(0), 1.0);
    this->layer_->Forward(this->bottom_.vec, this->top_.vec);
    EXPECT_NEAR(test::GetData(*this->top_[0])[0], want, 1e-6 * std::max(1.0, want));
  }
  // Without ignore_label, the -1 targets count (as ordinary targets).
  this->t_ = {1, 0, 0.5, 0, 1, 1};
  this->Build("");
  double all = 0;
  for (int i = 0; i < 6; ++i) all += this->L(this->x_[i], this->t_[i]);
  this->layer_->Forward(this->bottom_.vec, this->top_.vec);
  EXPECT_NEAR(test::GetData(*this->top_[0])[0], all / 6, 1e-6);
}

TYPED_TEST(SigmoidCrossEntropyLossLayerTest, StableForLargeScores) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'SigmoidCrossEntropyLoss' loss_param { normalization: NONE }");
  test::Blobs bottom, top;
  bottom.add({2}, type_of<F>(), {-200, 200});
  bottom.add({2}, type_of<F>(), {1, 0});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  const double want = is_half_v<F> ? 2 * static_cast<double>(static_cast<float>(static_cast<F>(200.0))) : 400;
  EXPECT_NEAR(test::GetData(*top[0])[0], want, 1e-3);
}

TYPED_TEST(SigmoidCrossEntropyLossLayerTest, BackwardValues) {
  using B = typename TypeParam::Btype;
  this->Build("loss_param { ignore_label: -1 normalization: NONE }");
  this->layer_->Forward(this->bottom_.vec, this->top_.vec);
  test::SetDiff(this->top_[0], {0.5}, type_of<B>());
  this->layer_->Backward(this->top_.vec, {true, false}, this->bottom_.vec);
  std::vector<double> want(6);
  for (int i = 0; i < 6; ++i) {
    want[i] = this->t_[i] == -1 ? 0.0 : 0.5 * (1 / (1 + std::exp(-this->x_[i])) - this->t_[i]);
  }
  test::ExpectNear<test::Coarser<TypeParam>>(test::GetDiff(*this->bottom_[0]), want, 2);
}

TYPED_TEST(SigmoidCrossEntropyLossLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 7);
    else test::FillUniform(b, 0, 1, 8);
  };
  test::CheckLayer<TypeParam>("type: 'SigmoidCrossEntropyLoss'", {{4, 5}, {4, 5}}, fill, Settings<TypeParam>(), kTol,
                              {true, false});
}

TYPED_TEST(SigmoidCrossEntropyLossLayerTest, GradientIgnoreLabel) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 9);
    else test::FillLabels(b, 3, 10);  // 0, 1 targets and 2 ignored
  };
  test::CheckLayer<TypeParam>("type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: 2 }", {{3, 4}, {3, 4}}, fill,
                              Settings<TypeParam>(), kTol, {true, false});
}

TYPED_TEST(SigmoidCrossEntropyLossLayerTest, CountMismatch) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'SigmoidCrossEntropyLoss'");
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>());
  bottom.add({2, 2}, type_of<F>());
  top.add(type_of<F>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "6 predictions with 4 targets were accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "bottom[1]");
  }
}

// GPU against CPU. The device's expf / log1pf differ from the host's by an
// ulp or two per term and the float sum runs in another order: the loss
// agrees to a few ulps; the gradient (sigmoid - t, one rounded product)
// to a few ulps of its storage type.
const test::GpuTolerance kGpuTol{16, 4};

TYPED_TEST(SigmoidCrossEntropyLossLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 11);
    else test::FillUniform(b, 0, 1, 12);
  };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'SigmoidCrossEntropyLoss'", {{4, 5}, {4, 5}}, fill, kGpuTol,
                                      {true, false});
  test::CheckGpuAgainstCpu<TypeParam>("type: 'SigmoidCrossEntropyLoss' loss_weight: 2 loss_param { normalize: false }",
                                      {{4, 5}, {4, 5}}, fill, kGpuTol, {true, false});
}

// ignore_label with every normalization: VALID divides by a count the GPU
// knows only on the device. Scores up to |x| ~ 8 exercise the stable form.
TYPED_TEST(SigmoidCrossEntropyLossLayerTest, GpuMatchesCpuIgnoreLabel) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 3, 13);
    else test::FillLabels(b, 3, 14);  // targets 0 and 1; 2 is ignored
  };
  for (const char* norm : {"FULL", "VALID", "BATCH_SIZE", "NONE"}) {
    SCOPED_TRACE(norm);
    test::CheckGpuAgainstCpu<TypeParam>(
        str_cat("type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: 2 normalization: ", norm, " }"),
        {{3, 2, 4}, {3, 8}}, fill, kGpuTol, {true, false});
  }
}

// Many blocks of the GPU's two-stage sum (6144 elements, a third ignored)
// and a second forward into the same buffers. The CPU's sequential float
// sum drifts from the exact one by tens of ulps; the GPU's tree sum is close
// to exact.
TYPED_TEST(SigmoidCrossEntropyLossLayerTest, GpuMatchesCpuManyBlocks) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 15);
    else test::FillLabels(b, 3, 16);
  };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: 2 }",
                                      {{8, 3, 16, 16}, {8, 768}}, fill, test::GpuTolerance{256, 4}, {true, false}, -1,
                                      2);
}

}  // namespace
}  // namespace cortado
