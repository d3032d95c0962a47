#include "cortado/layers/tile_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class TileLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(TileLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(TileLayerTest, ForwardBackward) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Tile' tile_param { axis: 1 tiles: 3 }");
  test::Blobs bottom, top;
  bottom.add({2, 2}, type_of<F>(), {1, 2, 3, 4});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 6}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  test::SetDiff(top[0], {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), (std::vector<double>{9, 12, 27, 30}));
}

TYPED_TEST(TileLayerTest, Axis0) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'Tile' tile_param { axis: -2 tiles: 2 }");
  test::Blobs bottom, top;
  bottom.add({1, 3}, type_of<F>(), {1, 2, 3});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{1, 2, 3, 1, 2, 3}));
}

TYPED_TEST(TileLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { const char* text; const char* field; const char* message; };
  const Case cases[] = {
      {"tile_param { axis: 1 }", "tile_param.tiles", "must be set"},
      {"tile_param { tiles: 0 }", "tile_param.tiles", "got 0"},
      {"tile_param { axis: 3 tiles: 2 }", "tile_param.axis", "got 3"},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 't' type: 'Tile' ") + c.text);
    test::Blobs bottom, top;
    bottom.add({2, 3, 4}, type_of<F>());
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

// Forward copies (exact); backward sums 3 tiles of float16 diffs in float and
// rounds once: 1 float16 epsilon.
TYPED_TEST(TileLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 10 + i); };
  test::CheckLayer<TypeParam>("type: 'Tile' tile_param { axis: 1 tiles: 3 }", {{2, 2, 3}}, fill,
                              test::GradientSettings(), test::ReferenceTolerance{0, 1});
}

TYPED_TEST(TileLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 23 + i); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Tile' tile_param { axis: 2 tiles: 3 }", {{2, 3, 2, 2}}, fill,
                                      test::GpuTolerance{0, 1});
}

}  // namespace
}  // namespace cortado
