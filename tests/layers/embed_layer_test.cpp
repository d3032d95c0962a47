#include "cortado/layers/embed_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class EmbedLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(EmbedLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(EmbedLayerTest, ForwardBackward) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Embed' embed_param { num_output: 2 input_dim: 3 }");
  test::Blobs bottom, top;
  bottom.add({2, 2}, type_of<F>(), {2, 0, 2, 1});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  ASSERT_EQ(layer->blobs().size(), 2u);
  test::SetData(layer->blobs()[0].get(), {1, 2, 3, 4, 5, 6});  // W (3, 2)
  test::SetData(layer->blobs()[1].get(), {0.5, -1});
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{5.5, 5, 1.5, 1, 5.5, 5, 3.5, 3}));
  for (auto& p : layer->blobs()) p->diff().set_zero();
  test::SetDiff(top[0], {1, 2, 3, 4, 5, 6, 7, 8}, type_of<B>());
  layer->Backward(top.vec, {false}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*layer->blobs()[0]), (std::vector<double>{3, 4, 7, 8, 6, 8}));
  EXPECT_EQ(test::GetDiff(*layer->blobs()[1]), (std::vector<double>{16, 20}));
}

TYPED_TEST(EmbedLayerTest, NoBias) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'Embed' embed_param { num_output: 1 input_dim: 2 bias_term: false }");
  test::Blobs bottom, top;
  bottom.add({3}, type_of<F>(), {1, 1, 0});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  ASSERT_EQ(layer->blobs().size(), 1u);
  test::SetData(layer->blobs()[0].get(), {-2, 7});
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{3, 1}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{7, 7, -2}));
}

TYPED_TEST(EmbedLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { const char* text; std::vector<double> x; const char* field; const char* message; };
  const Case cases[] = {
      {"embed_param { input_dim: 3 }", {0, 1}, "embed_param.num_output", "got 0"},
      {"embed_param { num_output: 2 }", {0, 1}, "embed_param.input_dim", "got 0"},
      {"embed_param { num_output: 2 input_dim: 3 }", {0, 3}, "bottom[0]", "value 3 at position 1"},
      {"embed_param { num_output: 2 input_dim: 3 }", {0.5, 1}, "bottom[0]", "value 0.5 at position 0"},
      {"embed_param { num_output: 2 input_dim: 3 }", {-1, 1}, "bottom[0]", "value -1"},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 'e' type: 'Embed' ") + c.text);
    test::Blobs bottom, top;
    bottom.add({2}, type_of<F>(), c.x);
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      layer->Forward(bottom.vec, top.vec);
      ADD_FAILURE() << c.text << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), c.field) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

// Finite differences on W and b only: the kink range covers every index, so
// the indexes are never perturbed. float16 pairs: forward adds the bias in
// float and rounds once (1 epsilon); backward sums a few rounded diffs in
// float and rounds once (2 epsilons).
TYPED_TEST(EmbedLayerTest, Gradient) {
  auto fill = [](int, Blob* b) { test::FillLabels(b, 4, 5); };
  const char* text =
      "type: 'Embed' embed_param { num_output: 3 input_dim: 4 "
      "weight_filler { type: 'uniform' min: -1 max: 1 } bias_filler { type: 'uniform' min: -1 max: 1 } }";
  test::CheckLayer<TypeParam>(text, {{2, 3}}, fill, test::GradientSettings().kink(0, 1e9),
                              test::ReferenceTolerance{1, 2});
}

TYPED_TEST(EmbedLayerTest, GpuMatchesCpu) {
  auto fill = [](int, Blob* b) { test::FillLabels(b, 5, 9); };
  test::CheckGpuAgainstCpu<TypeParam>(
      "type: 'Embed' embed_param { num_output: 4 input_dim: 5 weight_filler { type: 'gaussian' std: 1 } "
      "bias_filler { type: 'gaussian' std: 1 } }",
      {{3, 4}}, fill, test::GpuTolerance{1, 2}, {false});
}

}  // namespace
}  // namespace cortado
