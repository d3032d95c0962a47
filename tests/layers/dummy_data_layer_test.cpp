// DummyDataLayer: shapes (shape or the legacy num/channels/height/width),
// fillers (none, one, one per top), constant tops filled once and other
// fillers refilled on every Forward, and the parameter errors.

#include "cortado/layers/dummy_data_layer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cortado/util/rng.hpp"
#include "layers/source_layer.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class DummyDataLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  using B = typename P::Btype;

  void SetUp(const std::string& text, int num_top) {
    layer_ = std::make_unique<DummyDataLayer<F, B>>(test::MakeParam<P>("name: 'dummy' type: 'DummyData' " + text));
    top_ = test::Blobs();
    for (int i = 0; i < num_top; ++i) top_.add(type_of<F>());
    layer_->SetUp({}, top_.vec);
  }
  void Forward() { layer_->Forward({}, top_.vec); }

  std::unique_ptr<DummyDataLayer<F, B>> layer_;
  test::Blobs top_;
};

TYPED_TEST_SUITE(DummyDataLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(DummyDataLayerTest, DefaultIsZeroAndOneShapeForEveryTop) {
  this->SetUp("dummy_data_param { shape { dim: 2 dim: 3 dim: 4 } }", 2);
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(this->top_[t]->shape(), (std::vector<int>{2, 3, 4}));
    for (double v : test::GetData(*this->top_[t])) EXPECT_EQ(v, 0.0);
  }
}

TYPED_TEST(DummyDataLayerTest, LegacyDimsOnePerTop) {
  this->SetUp("dummy_data_param { num: 5 num: 2 channels: 3 height: 4 height: 1 width: 6 }", 2);
  EXPECT_EQ(this->top_[0]->shape(), (std::vector<int>{5, 3, 4, 6}));
  EXPECT_EQ(this->top_[1]->shape(), (std::vector<int>{2, 3, 1, 6}));
}

TYPED_TEST(DummyDataLayerTest, ConstantIsFilledOnceOthersEveryForward) {
  using F = typename TypeParam::Ftype;
  set_random_seed(11);
  this->SetUp(
      "dummy_data_param { shape { dim: 3 dim: 5 } shape { dim: 40 } "
      "data_filler { type: 'constant' value: 1.5 } data_filler { type: 'uniform' min: 2 max: 3 } }",
      2);
  for (double v : test::GetData(*this->top_[0])) EXPECT_EQ(v, 1.5);
  const std::vector<double> first = test::GetData(*this->top_[1]);
  for (double v : first) {
    EXPECT_GE(v, 2.0);
    EXPECT_LE(v, 3.0);
  }
  // A constant top is not refilled (as in Caffe): a value written into it survives Forward.
  this->top_[0]->template mutable_cpu_data<F>()[4] = static_cast<F>(7.0f);
  this->Forward();
  EXPECT_EQ(test::GetData(*this->top_[0])[4], 7.0);
  EXPECT_EQ(test::GetData(*this->top_[0])[3], 1.5);
  const std::vector<double> second = test::GetData(*this->top_[1]);
  EXPECT_NE(first, second) << "the uniform top must be refilled";
  for (double v : second) {
    EXPECT_GE(v, 2.0);
    EXPECT_LE(v, 3.0);
  }
}

// redraw: false (Cortado's; `trainer time` sets it): a random top is drawn
// once, at set-up, and keeps its values over forwards.
TYPED_TEST(DummyDataLayerTest, RedrawFalseDrawsRandomTopsOnce) {
  set_random_seed(13);
  this->SetUp("dummy_data_param { shape { dim: 40 } data_filler { type: 'gaussian' std: 2 } redraw: false }", 1);
  const std::vector<double> first = test::GetData(*this->top_[0]);
  EXPECT_NE(first, std::vector<double>(40, 0.0));
  this->Forward();
  this->Forward();
  EXPECT_EQ(test::GetData(*this->top_[0]), first);
}

TYPED_TEST(DummyDataLayerTest, OneFillerForEveryTop) {
  set_random_seed(5);
  this->SetUp("dummy_data_param { shape { dim: 100 } data_filler { type: 'gaussian' mean: 10 std: 0.5 } }", 2);
  for (int t = 0; t < 2; ++t) {
    double sum = 0;
    for (double v : test::GetData(*this->top_[t])) sum += v;
    EXPECT_NEAR(sum / 100, 10.0, 0.3);
  }
  EXPECT_NE(test::GetData(*this->top_[0]), test::GetData(*this->top_[1]));
}


FieldError SetUpError(const std::string& text, int num_top) {
  return test::SourceSetUpError<DummyDataLayer>("name: 'dummy' type: 'DummyData' " + text, num_top);
}

TEST(DummyDataLayerErrorTest, BadParameters) {
  EXPECT_EQ(SetUpError("dummy_data_param { }", 1).field(), "dummy_data_param.shape");
  EXPECT_EQ(SetUpError("dummy_data_param { shape { dim: 1 } shape { dim: 2 } }", 3).field(),
            "dummy_data_param.shape");
  EXPECT_EQ(SetUpError("dummy_data_param { shape { dim: 1 } num: 2 channels: 1 height: 1 width: 1 }", 1).field(),
            "dummy_data_param.shape");
  EXPECT_EQ(SetUpError("dummy_data_param { num: 2 channels: 1 height: 1 }", 1).field(), "dummy_data_param.width");
  EXPECT_EQ(SetUpError("dummy_data_param { shape { dim: -2 } }", 1).field(), "dummy_data_param.shape");
  const FieldError e = SetUpError("dummy_data_param { shape { dim: 2 } data_filler { type: 'nonsense' } }", 1);
  EXPECT_EQ(e.field(), "dummy_data_param.data_filler");
  EXPECT_NE(std::string(e.what()).find("nonsense"), std::string::npos) << e.what();
  EXPECT_EQ(SetUpError("dummy_data_param { shape { dim: 2 } data_filler { type: 'uniform' min: 2 max: 1 } }", 1)
                .field(),
            "dummy_data_param.data_filler");
  EXPECT_EQ(SetUpError("dummy_data_param { shape { dim: 2 } data_filler { } data_filler { } }", 3).field(),
            "dummy_data_param.data_filler");
}

// GPU against CPU: filled on the host from the same RNG draws: identical.
TYPED_TEST(DummyDataLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob*) {};
  test::CheckGpuAgainstCpu<TypeParam>(
      "type: 'DummyData' dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 4 } "
      "data_filler { type: 'gaussian' std: 2 } data_filler { type: 'constant' value: 3 } }",
      {}, fill, test::GpuTolerance{0, 0}, {}, 2);
}

}  // namespace
}  // namespace cortado
