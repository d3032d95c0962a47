#include "cortado/layers/mvn_layer.hpp"

#include <cmath>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class MVNLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(MVNLayerTest, test::AllPairs, test::PairNames);

template <typename P>
std::unique_ptr<LayerBase> RunMVN(const std::string& param, test::Blobs* bottom, test::Blobs* top) {
  auto layer = test::NewLayer<P>("type: 'MVN' mvn_param { " + param + " }");
  bottom->add({1, 2, 2}, type_of<typename P::Ftype>(), {1, 3, 2, 6});
  top->add(type_of<typename P::Ftype>());
  layer->SetUp(bottom->vec, top->vec);
  layer->Forward(bottom->vec, top->vec);
  return layer;
}

TYPED_TEST(MVNLayerTest, ForwardPerChannel) {
  using F = typename TypeParam::Ftype;
  test::Blobs bottom, top;
  RunMVN<TypeParam>("", &bottom, &top);
  // channel 0: {1, 3} has mean 2, sigma 1; channel 1: {2, 6} mean 4, sigma 2;
  // eps (default 1e-9, as float) is added to sigma.
  const double e = static_cast<float>(1e-9);
  test::ExpectNear<F>(test::GetData(*top[0]), {-1 / (1 + e), 1 / (1 + e), -2 / (2 + e), 2 / (2 + e)}, 1);
}

TYPED_TEST(MVNLayerTest, ForwardAcrossChannels) {
  using F = typename TypeParam::Ftype;
  test::Blobs bottom, top;
  RunMVN<TypeParam>("across_channels: true", &bottom, &top);
  const double s = std::sqrt(3.5) + static_cast<float>(1e-9);  // mean 3, squared deviations 4 + 0 + 1 + 9
  test::ExpectNear<F>(test::GetData(*top[0]), {-2 / s, 0, -1 / s, 3 / s}, 1);
}

TYPED_TEST(MVNLayerTest, MeanOnlyForwardBackward) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  test::Blobs bottom, top;
  auto layer = RunMVN<TypeParam>("normalize_variance: false", &bottom, &top);
  test::ExpectNear<F>(test::GetData(*top[0]), {-1, 1, -2, 2}, 0);
  test::SetDiff(top[0], {1, 2, 3, 5}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  test::ExpectNear<B>(test::GetDiff(*bottom[0]), {-0.5, 0.5, -1, 1}, 0);
}

// In place: the top is the bottom blob; forward and backward match the
// hand-computed mean-only values.
TYPED_TEST(MVNLayerTest, InPlace) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'MVN' mvn_param { normalize_variance: false }");
  test::Blobs bottom;
  bottom.add({1, 2, 2}, type_of<F>(), {1, 3, 2, 6});
  layer->SetUp(bottom.vec, bottom.vec);
  layer->Forward(bottom.vec, bottom.vec);
  test::ExpectNear<F>(test::GetData(*bottom[0]), {-1, 1, -2, 2}, 0);
  test::SetDiff(bottom[0], {1, 2, 3, 5}, type_of<B>());
  layer->Backward(bottom.vec, {true}, bottom.vec);
  test::ExpectNear<B>(test::GetDiff(*bottom[0]), {-0.5, 0.5, -1, 1}, 0);
}

TYPED_TEST(MVNLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { const char* text; std::vector<int> shape; const char* field; const char* message; };
  const Case cases[] = {
      {"mvn_param { eps: -1 }", {2, 3}, "mvn_param.eps", "got -1"},
      {"mvn_param { }", {6}, "bottom[0]", "at least 2 axes"},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 'm' type: 'MVN' ") + c.text);
    test::Blobs bottom, top;
    bottom.add(c.shape, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << c.text << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), c.field) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

// float16 pairs: outputs of order 1-2 computed in float from the same rounded
// inputs, stored once: 2 epsilons. Backward reads the rounded top (one
// epsilon off the double run's) and rounded top diffs, sums 4-12 products and
// divides by sigma: 8 epsilons.
TYPED_TEST(MVNLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 10 + i); };
  for (const char* p : {"", "normalize_variance: false", "across_channels: true"}) {
    SCOPED_TRACE(p);
    test::CheckLayer<TypeParam>(std::string("type: 'MVN' mvn_param { ") + p + " }", {{2, 3, 4}}, fill,
                                test::GradientSettings(), test::ReferenceTolerance{2, 8});
  }
}

TYPED_TEST(MVNLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 23 + i); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'MVN'", {{2, 3, 2, 3}}, fill, test::GpuTolerance{4, 8});
}

}  // namespace
}  // namespace cortado
