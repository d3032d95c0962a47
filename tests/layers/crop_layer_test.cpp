#include "cortado/layers/crop_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class CropLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(CropLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(CropLayerTest, ForwardBackwardPerAxisOffsets) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Crop' crop_param { axis: 1 offset: 1 offset: 2 }");
  test::Blobs bottom, top;
  // bottom0 (1, 3, 4): values 0..11; bottom1 (1, 2, 2) only gives the shape.
  std::vector<double> v(12);
  for (int i = 0; i < 12; ++i) v[i] = i;
  bottom.add({1, 3, 4}, type_of<F>(), v);
  bottom.add({1, 2, 2}, type_of<F>());
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{1, 2, 2}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{6, 7, 10, 11}));
  test::SetDiff(top[0], {1, 2, 3, 4}, type_of<B>());
  layer->Backward(top.vec, {true, false}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), (std::vector<double>{0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4}));
}

TYPED_TEST(CropLayerTest, DefaultAxisOneOffset) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'Crop' crop_param { offset: 1 }");
  test::Blobs bottom, top;
  std::vector<double> v(2 * 1 * 3 * 3);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  bottom.add({2, 1, 3, 3}, type_of<F>(), v);
  bottom.add({5, 7, 1, 2}, type_of<F>());
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 1, 1, 2}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{4, 5, 13, 14}));
}

TYPED_TEST(CropLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { const char* text; std::vector<int> second; const char* field; const char* message; };
  const Case cases[] = {
      {"crop_param { axis: 4 }", {2, 3, 4, 4}, "crop_param.axis", "got 4"},
      {"crop_param { axis: 1 offset: 0 offset: 0 }", {2, 3, 4, 4}, "crop_param.offset", "got 2"},
      {"crop_param { offset: 2 }", {2, 3, 4, 4}, "crop_param.offset", "exceeds"},
      {"crop_param { }", {2, 3, 4}, "bottom[1]", "has 3 axes"},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 'c' type: 'Crop' ") + c.text);
    test::Blobs bottom, top;
    bottom.add({2, 3, 5, 5}, type_of<F>());
    bottom.add(c.second, type_of<F>());
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

// Pure copies: float16 pairs match the double run exactly.
TYPED_TEST(CropLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 10 + i); };
  test::CheckLayer<TypeParam>("type: 'Crop' crop_param { axis: 1 offset: 1 offset: 0 offset: 2 }",
                              {{2, 3, 3, 4}, {1, 2, 2, 2}}, fill, test::GradientSettings(),
                              test::ReferenceTolerance{0, 0}, {true, false});
}

TYPED_TEST(CropLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 23 + i); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Crop' crop_param { offset: 1 }", {{2, 3, 5, 4}, {1, 1, 3, 2}}, fill,
                                      test::GpuTolerance{0, 0}, {true, false});
}

}  // namespace
}  // namespace cortado
