// SPPLayer: hand-computed MAX and AVE pyramids (Caffe's padded level
// geometry and AVE divisor), the pyramid_height 1 shape, rebuilding the
// levels for a new input size, the field checks, finite differences for
// (double, double) and (float, float), 16-bit pairs against (double, double),
// GPU against CPU.

#include "cortado/layers/spp_layer.hpp"

#include <algorithm>
#include <random>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class SPPLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(SPPLayerTest, test::AllPairs, test::PairNames);

// 4x4, every value distinct.
const std::vector<double> kX{1, 16, 2, 3,  //
                             4, 5, 15, 6,  //
                             14, 7, 8, 9,  //
                             10, 11, 12, 13};

TYPED_TEST(SPPLayerTest, MaxTwoLevels) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'SPP' spp_param { pyramid_height: 2 }");
  std::vector<double> x = kX;
  for (double v : kX) x.push_back(-v);  // channel 1
  test::Blobs bottom, top;
  bottom.add({1, 2, 4, 4}, type_of<F>(), x);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{1, 10}));
  // Level 0: one bin per channel; level 1: 2x2 bins of 2x2, channel by channel.
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{16, -1, 16, 15, 14, 13, -1, -2, -7, -8}));
  test::SetDiff(top[0], {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  // 16 at (0, 1) is the maximum of level 0 and of level 1's first bin: 1 + 3.
  EXPECT_EQ(test::GetDiff(*bottom[0]), (std::vector<double>{0, 4, 0, 0, 0, 0, 4, 0, 5, 0, 0, 0, 0, 0, 0, 6,  //
                                                            9, 0, 8, 0, 0, 0, 0, 0, 0, 9, 10, 0, 0, 0, 0, 0}));
}

// 3x3 in two levels: level 1 has kernel 2, pad 1, stride 2, so its bins cover
// rows {0}, {1, 2} (likewise columns), and AVE divides by the 2x2 window
// counted in the padded image (Caffe's divisor).
TYPED_TEST(SPPLayerTest, AvePadded) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'SPP' spp_param { pyramid_height: 2 pool: AVE }");
  test::Blobs bottom, top;
  bottom.add({1, 1, 3, 3}, type_of<F>(), {1, 2, 3, 4, 5, 6, 7, 8, 9});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{1, 5}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{5, 0.25, 1.25, 2.75, 7}));
  test::SetDiff(bottom[0], std::vector<double>(9, 3), type_of<B>());  // overwritten
  test::SetDiff(top[0], {9, 4, 8, 4, 4}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  // Level 0 gives 9/9 everywhere; level 1 gives 4/4, 8/4, 4/4, 4/4 over its bins.
  EXPECT_EQ(test::GetDiff(*bottom[0]), (std::vector<double>{2, 3, 3, 2, 2, 2, 2, 2, 2}));
}

TYPED_TEST(SPPLayerTest, HeightOneIsGlobalPooling) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'SPP' spp_param { pyramid_height: 1 }");
  test::Blobs bottom, top;
  bottom.add({2, 1, 2, 3}, type_of<F>(), {1, 4, 2, 3, 0, -1, -5, -2, -3, -4, -6, -7});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 1, 1, 1}));  // Caffe's shape for one level
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{4, -2}));
  test::SetDiff(top[0], {3, 5}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), (std::vector<double>{0, 3, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0}));
}

TYPED_TEST(SPPLayerTest, NewInputSizeRebuildsLevels) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'SPP' spp_param { pyramid_height: 2 }");
  test::Blobs bottom, top;
  bottom.add({1, 1, 4, 4}, type_of<F>(), kX);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{16, 16, 15, 14, 13}));
  bottom[0]->Reshape({2, 1, 2, 2});
  test::SetData(bottom[0], {1, 2, 3, 4, -4, -3, -2, -1});
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 5}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{4, 1, 2, 3, 4, -1, -4, -3, -2, -1}));
}

TYPED_TEST(SPPLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { const char* text; std::vector<int> shape; const char* field; const char* message; };
  const Case cases[] = {
      {"spp_param { pool: MAX }", {1, 1, 4, 4}, "spp_param.pyramid_height", "must be set"},
      {"spp_param { pyramid_height: 0 }", {1, 1, 4, 4}, "spp_param.pyramid_height", "got 0"},
      {"spp_param { pyramid_height: 32 }", {1, 1, 4, 4}, "spp_param.pyramid_height", "got 32"},
      {"spp_param { pyramid_height: 2 pool: STOCHASTIC }", {1, 1, 4, 4}, "spp_param.pool", "STOCHASTIC"},
      {"spp_param { pyramid_height: 3 }", {1, 1, 3, 3}, "spp_param.pyramid_height", "level 2 (4x4 bins)"},
      {"spp_param { pyramid_height: 3 }", {1, 1, 8, 5}, "spp_param.pyramid_height", "8x5 input"},
      {"spp_param { pyramid_height: 2 }", {1, 4, 4}, "bottom", "4 axes"},
      {"spp_param { pyramid_height: 1 }", {1, 1, 0, 4}, "bottom", "at least 1"},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 's' type: 'SPP' ") + c.text);
    test::Blobs bottom, top;
    bottom.add(c.shape, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << c.text << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), c.field) << c.text << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

// Distinct values 1/16 apart (exact in the 16-bit types), shuffled: a
// perturbation of 1e-2 never changes which element of a bin is the maximum.
void FillDistinct(int i, Blob* b) {
  std::vector<double> v(b->count());
  for (size_t j = 0; j < v.size(); ++j) v[j] = (static_cast<double>(j) - v.size() / 2.0) / 16;
  std::shuffle(v.begin(), v.end(), std::mt19937(7 + i));
  test::SetData(b, v);
}

// 6x7 in three levels (1, 2x2 and 4x4 bins; the last two padded). MAX is
// exact; AVE sums in float. Each level's gradient is stored in Btype and the
// levels are summed in float and rounded once.
const test::ReferenceTolerance kTol{2, 4};

TYPED_TEST(SPPLayerTest, GradientMax) {
  test::CheckLayer<TypeParam>("type: 'SPP' spp_param { pyramid_height: 3 pool: MAX }", {{2, 2, 6, 7}},
                              FillDistinct, test::GradientSettings(), kTol);
}

TYPED_TEST(SPPLayerTest, GradientAve) {
  test::CheckLayer<TypeParam>("type: 'SPP' spp_param { pyramid_height: 3 pool: AVE }", {{1, 2, 6, 7}},
                              FillDistinct, test::GradientSettings(), kTol);
}

// MAX routes exactly; each level's AVE backward and the level sum run the
// same additions in both paths, the pooling kernels' own orders aside.
TYPED_TEST(SPPLayerTest, GpuMatchesCpuMax) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'SPP' spp_param { pyramid_height: 3 pool: MAX }", {{2, 3, 9, 7}},
                                      FillDistinct, test::GpuTolerance{0, 1});
}

TYPED_TEST(SPPLayerTest, GpuMatchesCpuAve) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'SPP' spp_param { pyramid_height: 3 pool: AVE }", {{2, 3, 9, 7}},
                                      FillDistinct, test::GpuTolerance{1, 2});
}

TYPED_TEST(SPPLayerTest, GpuMatchesCpuOneLevel) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'SPP' spp_param { pyramid_height: 1 pool: AVE }", {{2, 3, 5, 4}},
                                      FillDistinct, test::GpuTolerance{1, 2});
}

}  // namespace
}  // namespace cortado
