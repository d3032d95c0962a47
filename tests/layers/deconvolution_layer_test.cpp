#include "cortado/layers/deconvolution_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class DeconvolutionLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(DeconvolutionLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(DeconvolutionLayerTest, ForwardOverlappingTaps) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>(
      "type: 'Deconvolution' convolution_param { num_output: 1 kernel_size: 2 bias_filler { type: 'constant' "
      "value: 0.5 } }");
  test::Blobs bottom, top;
  bottom.add({1, 1, 2, 2}, type_of<F>(), {1, 2, 3, 4});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  ASSERT_EQ(layer->blobs()[0]->shape(), (std::vector<int>{1, 1, 2, 2}));
  test::SetData(layer->blobs()[0].get(), {1, 1, 1, 1});
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{1, 1, 3, 3}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{1.5, 3.5, 2.5, 4.5, 10.5, 6.5, 3.5, 7.5, 4.5}));
}

TYPED_TEST(DeconvolutionLayerTest, ForwardBackwardStride2) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>(
      "type: 'Deconvolution' convolution_param { num_output: 1 kernel_size: 2 stride: 2 bias_term: false }");
  test::Blobs bottom, top;
  bottom.add({1, 1, 2, 2}, type_of<F>(), {1, 2, 3, 4});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  test::SetData(layer->blobs()[0].get(), {1, 2, 3, 4});
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{1, 1, 4, 4}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{1, 2, 2, 4, 3, 4, 6, 8, 3, 6, 4, 8, 9, 12, 12, 16}));
  // dtop = 1 everywhere: dx = sum of the kernel = 10; dW = sum of x = 10 per tap.
  test::SetDiff(top[0], std::vector<double>(16, 1), type_of<B>());
  layer->blobs()[0]->diff().set_zero();
  layer->Backward(top.vec, {true}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), (std::vector<double>{10, 10, 10, 10}));
  EXPECT_EQ(test::GetDiff(*layer->blobs()[0]), (std::vector<double>{10, 10, 10, 10}));
}

TYPED_TEST(DeconvolutionLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { const char* text; const char* field; };
  const Case cases[] = {
      {"convolution_param { kernel_size: 2 }", "convolution_param.num_output"},
      {"convolution_param { num_output: 3 kernel_size: 2 group: 3 }", "convolution_param.group"},
      {"convolution_param { num_output: 2 kernel_size: 1 pad: 2 }", "convolution_param.pad"},
      {"convolution_param { num_output: 2 kernel_size: 2 stride: 0 }", "convolution_param.stride"},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 'd' type: 'Deconvolution' ") + c.text);
    test::Blobs bottom, top;
    bottom.add({1, 4, 2, 2}, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << c.text << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), c.field) << e.what();
    }
  }
}

// float16 pairs: each output sums up to 2x2 taps x 2 channels of rounded
// products in float, stored once: 4 epsilons; gradients sum over the batch and
// the positions in float: 16 epsilons.
TYPED_TEST(DeconvolutionLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 10 + i); };
  test::CheckLayer<TypeParam>(
      "type: 'Deconvolution' convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 group: 2 "
      "weight_filler { type: 'uniform' min: -1 max: 1 } bias_filler { type: 'uniform' min: -1 max: 1 } }",
      {{2, 4, 2, 3}}, fill, test::GradientSettings(), test::ReferenceTolerance{4, 16});
}

TYPED_TEST(DeconvolutionLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 23 + i); };
  test::CheckGpuAgainstCpu<TypeParam>(
      "type: 'Deconvolution' convolution_param { num_output: 3 kernel_size: 3 stride: 2 pad: 1 "
      "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }",
      {{2, 2, 3, 3}}, fill, test::GpuTolerance{8, 16});
}

}  // namespace
}  // namespace cortado
