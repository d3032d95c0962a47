#include "cortado/layers/multinomial_logistic_loss_layer.hpp"

#include <cmath>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class MultinomialLogisticLossLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(MultinomialLogisticLossLayerTest, test::AllPairs, test::PairNames);

// float16: p is rounded once (relative 2^-11 on -1/p and on log p), the loss
// stays float; the gradient -w / (N p) is rounded once to Btype.
const test::ReferenceTolerance kTol{2, 4};

template <typename P>
test::GradientSettings Settings() {
  return test::GradientSettings().step(1e-3).threshold(std::is_same_v<typename P::Ftype, double> ? 1e-4 : 2e-3);
}

// Probabilities in [0.2, 1] so that the finite differences stay away from the clamp.
void Fill(int i, Blob* b) {
  if (i == 0) test::FillUniform(b, 0.2, 1.0, 5);
  else test::FillLabels(b, 4, 6);
}

TYPED_TEST(MultinomialLogisticLossLayerTest, ForwardBackwardValues) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'MultinomialLogisticLoss'");
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>(), {0.25, 0.5, 0.25, 0.125, 0.125, 0.75});
  bottom.add({2}, type_of<F>(), {1, 2});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  EXPECT_EQ(layer->loss(0), 1.0);
  layer->Forward(bottom.vec, top.vec);
  const double want = -(std::log(0.5) + std::log(0.75)) / 2;
  EXPECT_NEAR(test::GetData(*top[0])[0], want, 1e-6);
  test::SetDiff(top[0], {1}, type_of<B>());
  layer->Backward(top.vec, {true, false}, bottom.vec);
  test::ExpectNear<B>(test::GetDiff(*bottom[0]), {0, -1.0, 0, 0, 0, -1 / 1.5}, 1);
}

TYPED_TEST(MultinomialLogisticLossLayerTest, ZeroProbabilityIsClamped) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'MultinomialLogisticLoss'");
  test::Blobs bottom, top;
  bottom.add({1, 2}, type_of<F>(), {0, 1});
  bottom.add({1}, type_of<F>(), {0});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_NEAR(test::GetData(*top[0])[0], -std::log(1e-20), 1e-4);
}

TYPED_TEST(MultinomialLogisticLossLayerTest, Gradient) {
  test::CheckLayer<TypeParam>("type: 'MultinomialLogisticLoss'", {{5, 4}, {5}}, Fill, Settings<TypeParam>(), kTol,
                              {true, false});
}

TYPED_TEST(MultinomialLogisticLossLayerTest, BadLabelAndCount) {
  using F = typename TypeParam::Ftype;
  {
    auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'MultinomialLogisticLoss'");
    test::Blobs bottom, top;
    bottom.add({2, 3}, type_of<F>(), {0.2, 0.3, 0.5, 0.1, 0.1, 0.8});
    bottom.add({2}, type_of<F>(), {0, 3});
    top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    try {
      layer->Forward(bottom.vec, top.vec);
      ADD_FAILURE() << "label 3 with 3 classes was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "bottom[1]");
      EXPECT_NE(std::string(e.what()).find("[0, 3)"), std::string::npos) << e.what();
    }
  }
  auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'MultinomialLogisticLoss'");
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>());
  bottom.add({3}, type_of<F>());
  top.add(type_of<F>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "3 labels for 2 samples were accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "bottom[1]");
  }
}

// GPU against CPU. The device's logf differs from the host's by an ulp at
// most per sample and the float sum runs in another order: the loss agrees to
// a few ulps. The gradient is one IEEE division on both sides: to the unit.
TYPED_TEST(MultinomialLogisticLossLayerTest, GpuMatchesCpu) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'MultinomialLogisticLoss'", {{5, 4}, {5}}, Fill, test::GpuTolerance{8, 1},
                                      {true, false});
  test::CheckGpuAgainstCpu<TypeParam>("type: 'MultinomialLogisticLoss' loss_weight: 3", {{3, 2, 3}, {3, 1, 1}}, Fill,
                                      test::GpuTolerance{8, 1}, {true, false});
}

// Probabilities of zero hit the 1e-20 clamp in the loss and in the gradient
// (-w / (N 1e-20): beyond float16, so infinite on both sides there).
TYPED_TEST(MultinomialLogisticLossLayerTest, GpuMatchesCpuClamped) {
  auto fill = [](int i, Blob* b) {
    if (i == 1) {
      test::FillLabels(b, 4, 6);
      return;
    }
    test::FillUniform(b, 0.2, 1.0, 5);
    std::vector<double> p = test::GetData(*b);
    for (size_t k = 0; k < p.size(); ++k) {
      if ((k / 4) % 2 == 0) p[k] = 0;  // every even sample: whichever its label
    }
    test::SetData(b, p);
  };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'MultinomialLogisticLoss'", {{6, 4}, {6}}, fill, test::GpuTolerance{8, 1},
                                      {true, false});
}

// Several blocks (four) of the GPU's two-stage sum (1000 samples) and a second forward.
// The CPU's sequential float sum drifts from the exact one by ulps per
// hundred terms; the GPU's tree sum is close to exact.
TYPED_TEST(MultinomialLogisticLossLayerTest, GpuMatchesCpuManyBlocks) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillUniform(b, 0.01, 1.0, 32);
    else test::FillLabels(b, 10, 33);
  };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'MultinomialLogisticLoss'", {{1000, 10}, {1000}}, fill,
                                      test::GpuTolerance{128, 1}, {true, false}, -1, 2);
}

// On the GPU a bad label cannot throw inside the kernel: it is recorded, and
// the Backward after the (synchronizing) loss read raises the CPU's error.
TYPED_TEST(MultinomialLogisticLossLayerTest, GpuBadLabelIsReported) {
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  using F = typename TypeParam::Ftype;
  test::ActiveGpuContext gpu;
  const std::shared_ptr<Context>& ctx = gpu.ctx;
  auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'MultinomialLogisticLoss'");
  layer->set_context(ctx);
  test::Blobs bottom, top;
  bottom.add({3, 3}, type_of<F>(), {0.2, 0.3, 0.5, 0.1, 0.1, 0.8, 0.25, 0.25, 0.5});
  bottom.add({3}, type_of<F>(), {0, 2, 3});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  try {
    layer->Backward(top.vec, {true, false}, bottom.vec);
    ADD_FAILURE() << "a label of 3 with 3 classes was not reported";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "bottom[1]");
    EXPECT_NE(std::string(e.what()).find("label value 3 at position 2"), std::string::npos) << e.what();
  }
  ctx->Synchronize();
#endif
}

}  // namespace
}  // namespace cortado
