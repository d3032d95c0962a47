#include "cortado/layers/hinge_loss_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class HingeLossLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(HingeLossLayerTest, test::AllPairs, test::PairNames);

// float16: scores rounded once; the sum stays float; each gradient is a
// rounded +-w/N (L1) or 2 m w / N (L2).
const test::ReferenceTolerance kTol{2, 4};

// Scores in [-3, 3]; the kinks at |x| = 1 (the margin) are not within a step
// of any score drawn by these seeds.
template <typename P>
test::GradientSettings Settings() {
  return test::GradientSettings().step(1e-3).threshold(std::is_same_v<typename P::Ftype, double> ? 1e-4 : 2e-3);
}

void Fill(int i, Blob* b) {
  if (i == 0) test::FillUniform(b, -3, 3, 13);
  else test::FillLabels(b, 5, 14);
}

TYPED_TEST(HingeLossLayerTest, ForwardBackwardValues) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  for (const bool l2 : {false, true}) {
    SCOPED_TRACE(l2 ? "L2" : "L1");
    auto layer = test::NewLayer<TypeParam>(std::string("name: 'loss' type: 'HingeLoss'") +
                                           (l2 ? " hinge_loss_param { norm: L2 }" : ""));
    test::Blobs bottom, top;
    bottom.add({2, 3}, type_of<F>(), {0.5, -2, 0.25, 1.5, 2, -0.5});
    bottom.add({2}, type_of<F>(), {0, 1});
    top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    EXPECT_EQ(layer->loss(0), 1.0);
    layer->Forward(bottom.vec, top.vec);
    // margins: n0 (label 0): 1-0.5=0.5, 1-2<0 -> 0, 1+0.25=1.25;
    //          n1 (label 1): 1+1.5=2.5, 1-2<0 -> 0, 1-0.5=0.5
    const double want = l2 ? (0.25 + 1.5625 + 6.25 + 0.25) / 2 : (0.5 + 1.25 + 2.5 + 0.5) / 2;
    EXPECT_NEAR(test::GetData(*top[0])[0], want, 1e-6);
    test::SetDiff(top[0], {1}, type_of<B>());
    layer->Backward(top.vec, {true, false}, bottom.vec);
    const std::vector<double> m = {0.5, 0, 1.25, 2.5, 0, 0.5};
    const std::vector<double> s = {-1, 1, 1, 1, -1, 1};  // -1 at the label
    std::vector<double> g(6);
    for (int k = 0; k < 6; ++k) g[k] = s[k] * 0.5 * (l2 ? 2 * m[k] : (m[k] > 0 ? 1 : 0));
    test::ExpectNear<B>(test::GetDiff(*bottom[0]), g, 1);
  }
}

TYPED_TEST(HingeLossLayerTest, GradientL1) {
  test::CheckLayer<TypeParam>("type: 'HingeLoss'", {{4, 5}, {4}}, Fill, Settings<TypeParam>(), kTol, {true, false});
}

TYPED_TEST(HingeLossLayerTest, GradientL2) {
  // L2 is smooth at the margin: a larger step keeps the float loss top's rounding small.
  test::CheckLayer<TypeParam>("type: 'HingeLoss' hinge_loss_param { norm: L2 }", {{4, 5}, {4}}, Fill,
                              Settings<TypeParam>().step(1e-2), kTol, {true, false});
}

TYPED_TEST(HingeLossLayerTest, BadLabel) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'HingeLoss'");
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>());
  bottom.add({2}, type_of<F>(), {1, 5});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  try {
    layer->Forward(bottom.vec, top.vec);
    ADD_FAILURE() << "label 5 with 3 classes was accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "bottom[1]");
    EXPECT_NE(std::string(e.what()).find("label value 5"), std::string::npos) << e.what();
  }
}

// GPU against CPU: the margins are the same on both sides and each gradient
// is one rounded product, so the diffs agree to the unit; the loss differs
// by the order of the float sum only.
TYPED_TEST(HingeLossLayerTest, GpuMatchesCpu) {
  for (const char* norm : {"L1", "L2"}) {
    SCOPED_TRACE(norm);
    test::CheckGpuAgainstCpu<TypeParam>(str_cat("type: 'HingeLoss' hinge_loss_param { norm: ", norm, " }"),
                                        {{4, 5}, {4}}, Fill, test::GpuTolerance{4, 1}, {true, false});
    test::CheckGpuAgainstCpu<TypeParam>(
        str_cat("type: 'HingeLoss' loss_weight: 0.25 hinge_loss_param { norm: ", norm, " }"), {{3, 2, 2, 2}, {3, 1}},
        Fill, test::GpuTolerance{4, 1}, {true, false});
  }
}

// Many blocks of the GPU's two-stage sum (6400 scores) and a second forward
// into the same buffers. The CPU's sequential float sum drifts from the exact
// one by tens of ulps; the GPU's tree sum is close to exact.
TYPED_TEST(HingeLossLayerTest, GpuMatchesCpuManyBlocks) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillUniform(b, -3, 3, 30);
    else test::FillLabels(b, 100, 31);
  };
  for (const char* norm : {"L1", "L2"}) {
    SCOPED_TRACE(norm);
    test::CheckGpuAgainstCpu<TypeParam>(str_cat("type: 'HingeLoss' hinge_loss_param { norm: ", norm, " }"),
                                        {{64, 100}, {64}}, fill, test::GpuTolerance{256, 1}, {true, false}, -1, 2);
  }
}

// On the GPU a bad label cannot throw inside the kernel: it is recorded, and
// the Backward after the (synchronizing) loss read raises the CPU's error.
TYPED_TEST(HingeLossLayerTest, GpuBadLabelIsReported) {
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  using F = typename TypeParam::Ftype;
  test::ActiveGpuContext gpu;
  const std::shared_ptr<Context>& ctx = gpu.ctx;
  auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'HingeLoss'");
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
    EXPECT_EQ(e.field(), "bottom[1]");
    EXPECT_NE(std::string(e.what()).find("label value 7 at position 2"), std::string::npos) << e.what();
  }
  ctx->Synchronize();
#endif
}

}  // namespace
}  // namespace cortado
