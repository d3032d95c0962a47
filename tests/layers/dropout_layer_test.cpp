#include "cortado/layers/dropout_layer.hpp"

#include "cortado/util/rng.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class DropoutLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(DropoutLayerTest, test::AllPairs, test::PairNames);

// float16 tolerances: x * 1/(1-p) rounded once, both ways.
const test::ReferenceTolerance kTol{1, 1};

TYPED_TEST(DropoutLayerTest, TrainZeroesAndScales) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0.75 }");
  test::Blobs bottom, top;
  const int n = 4000;
  test::FillUniform(bottom.add({n}, type_of<F>()), 0.5, 1.5, 3);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  set_random_seed(17);
  layer->Forward(bottom.vec, top.vec);
  const std::vector<double> x = test::GetData(*bottom[0]), y = test::GetData(*top[0]);
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    if (y[i] == 0) continue;
    ++kept;
    EXPECT_NEAR(y[i], 4 * x[i], 4 * x[i] * type_epsilon<F>()) << i;
  }
  // kept ~ Binomial(4000, 0.25): mean 1000, sd 27.
  EXPECT_NEAR(kept, 1000, 150);

  test::SetDiff(top[0], std::vector<double>(n, 0.5), type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  const std::vector<double> dx = test::GetDiff(*bottom[0]);
  for (int i = 0; i < n; ++i) EXPECT_EQ(dx[i], y[i] == 0 ? 0.0 : 2.0) << i;
}

TYPED_TEST(DropoutLayerTest, TestPhaseIsIdentity) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Dropout' phase: TEST");
  test::Blobs bottom, top;
  test::FillUniform(bottom.add({3, 7}, type_of<F>()), -1, 1, 3);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(test::GetData(*top[0]), test::GetData(*bottom[0]));
  const std::vector<double> d = test::RandomVector(21, 9);
  test::SetDiff(top[0], d, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), test::GetDiff(*top[0]));
}

TYPED_TEST(DropoutLayerTest, SameSeedSameMask) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'Dropout'");
  test::Blobs bottom, top;
  test::FillUniform(bottom.add({100}, type_of<F>()), 1, 2, 3);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  set_random_seed(5);
  layer->Forward(bottom.vec, top.vec);
  const std::vector<double> first = test::GetData(*top[0]);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_NE(test::GetData(*top[0]), first);  // a new mask each iteration
  set_random_seed(5);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(test::GetData(*top[0]), first);
}

// dropout_param.random_seed (NVCaffe's): the layer draws from its own
// generator, so its masks repeat whatever the process RNG did before, and
// the process RNG is left alone.
TYPED_TEST(DropoutLayerTest, OwnRandomSeed) {
  using F = typename TypeParam::Ftype;
  test::Blobs bottom;
  test::FillUniform(bottom.add({200}, type_of<F>()), 1, 2, 3);
  auto run = [&](const std::string& seed, int64_t process_seed, int forwards) {
    auto layer = test::NewLayer<TypeParam>("type: 'Dropout' dropout_param { random_seed: " + seed + " }");
    test::Blobs top;
    top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    set_random_seed(process_seed);
    for (int i = 0; i < forwards; ++i) layer->Forward(bottom.vec, top.vec);
    return test::GetData(*top[0]);
  };
  const std::vector<double> first = run("42", 1, 1);
  EXPECT_EQ(run("42", 2, 1), first);   // another process seed: the same mask
  EXPECT_NE(run("42", 1, 2), first);   // the layer's sequence goes on
  EXPECT_NE(run("43", 1, 1), first);   // another layer seed
  EXPECT_NE(run("-1", 1, 1), run("-1", 2, 1));  // unset: the process RNG
  set_random_seed(9);
  const auto before = rng()();
  set_random_seed(9);
  run("42", 9, 3);
  EXPECT_EQ(rng()(), before);
}

TYPED_TEST(DropoutLayerTest, BadRatio) {
  using F = typename TypeParam::Ftype;
  for (const char* ratio : {"1", "-0.1", "1.5"}) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 'd' type: 'Dropout' dropout_param { dropout_ratio: ") + ratio + " }");
    test::Blobs bottom, top;
    bottom.add({4}, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << "dropout_ratio " << ratio << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "dropout_param.dropout_ratio");
      EXPECT_NE(std::string(e.what()).find("[0, 1)"), std::string::npos) << e.what();
    }
  }
}

TYPED_TEST(DropoutLayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 4); };
  test::CheckLayer<TypeParam>("type: 'Dropout' dropout_param { dropout_ratio: 0.3 }", {{2, 3, 4, 5}}, fill,
                              test::GradientSettings().eltwise(), kTol);
}

// GPU against CPU: the mask is drawn on the host with the same RNG calls, and
// the kernel computes the same product: identical, in TRAIN and TEST.
TYPED_TEST(DropoutLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 14); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Dropout' dropout_param { dropout_ratio: 0.3 }", {{2, 3, 4, 5}}, fill,
                                      test::GpuTolerance{0, 0}, {}, -1, 3);
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Dropout' phase: TEST", {{2, 3, 4, 5}}, fill, test::GpuTolerance{0, 0});
}

TYPED_TEST(DropoutLayerTest, GpuMatchesCpuOwnRandomSeed) {
  auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 15); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Dropout' dropout_param { dropout_ratio: 0.4 random_seed: 7 }",
                                      {{2, 3, 4, 5}}, fill, test::GpuTolerance{0, 0}, {}, -1, 2);
}

}  // namespace
}  // namespace cortado
