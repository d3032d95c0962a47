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

// On the GPU the host never reads the indexes: the kernels check them, give
// a bad index's top row zeros (the weight backward skips it), and record the
// first one; the layer's next Forward or Backward throws the CPU's error for
// it, before launching anything. Reported once; good indexes afterwards give
// the CPU's result.
TYPED_TEST(EmbedLayerTest, GpuBadIndexIsReported) {
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  const std::string text = "name: 'e' type: 'Embed' embed_param { num_output: 2 input_dim: 3 }";
  const std::vector<double> weights{1, 2, 3, 4, 5, 6}, bias{0.5, -1};  // W (3, 2), b (2)
  const std::vector<double> bad{2, 0, 3, 1, -1};  // the first bad index: 3 at position 2
  const std::vector<double> good{2, 0, 2, 1, 0};
  const std::vector<double> dy{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

  auto cpu = test::NewLayer<TypeParam>(text);
  test::Blobs cpu_bottom, cpu_top;
  cpu_bottom.add({5}, type_of<F>(), bad);
  cpu_top.add(type_of<F>());
  cpu->SetUp(cpu_bottom.vec, cpu_top.vec);
  test::SetData(cpu->blobs()[0].get(), weights);
  test::SetData(cpu->blobs()[1].get(), bias);
  std::string cpu_message;
  try {
    cpu->Forward(cpu_bottom.vec, cpu_top.vec);
  } catch (const FieldError& e) {
    cpu_message = e.what();
  }
  ASSERT_NE(cpu_message.find("value 3 at position 2"), std::string::npos) << cpu_message;
  test::SetData(cpu_bottom[0], good);
  cpu->Forward(cpu_bottom.vec, cpu_top.vec);
  for (auto& p : cpu->blobs()) p->diff().set_zero();
  test::SetDiff(cpu_top[0], dy, type_of<B>());
  cpu->Backward(cpu_top.vec, {false}, cpu_bottom.vec);
  const std::vector<double> cpu_y = test::GetData(*cpu_top[0]);
  const std::vector<double> cpu_dw = test::GetDiff(*cpu->blobs()[0]), cpu_db = test::GetDiff(*cpu->blobs()[1]);

  test::ActiveGpuContext gpu;
  const std::shared_ptr<Context>& ctx = gpu.ctx;
  auto layer = test::NewLayer<TypeParam>(text);
  layer->set_context(ctx);
  test::Blobs bottom, top;
  bottom.add({5}, type_of<F>(), bad);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  test::SetData(layer->blobs()[0].get(), weights);
  test::SetData(layer->blobs()[1].get(), bias);
  auto expect_reported = [&](const char* when, const std::function<void()>& call) {
    try {
      call();
      ADD_FAILURE() << when << ": index 3 with input_dim 3 was not reported";
    } catch (const FieldError& e) {
      EXPECT_EQ(std::string(e.what()), cpu_message) << when;
    }
  };
  auto zero_diffs = [&] {
    for (auto& p : layer->blobs()) p->diff().set_zero();
    test::SetDiff(top[0], dy, type_of<B>());
  };

  // The kernel records; the host learns of it on the next call.
  layer->Forward(bottom.vec, top.vec);
  ctx->Synchronize();
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{5.5, 5, 1.5, 1, 0, 0, 3.5, 3, 0, 0}));
  zero_diffs();
  expect_reported("backward after the forward", [&] { layer->Backward(top.vec, {false}, bottom.vec); });
  ctx->Synchronize();
  EXPECT_EQ(test::GetDiff(*layer->blobs()[0]), std::vector<double>(6, 0.0)) << "backward ran";
  EXPECT_EQ(test::GetDiff(*layer->blobs()[1]), std::vector<double>(2, 0.0)) << "backward ran";

  // Reported once; a forward records it again for the forward after it.
  layer->Forward(bottom.vec, top.vec);
  ctx->Synchronize();
  expect_reported("forward after a forward", [&] { layer->Forward(bottom.vec, top.vec); });
  ctx->Synchronize();

  // Indexes that turn bad after a good forward: the weight backward skips
  // them, adding only the good rows' gradients, and records the first.
  test::SetData(bottom[0], good);
  layer->Forward(bottom.vec, top.vec);
  ctx->Synchronize();
  test::SetData(bottom[0], bad);
  zero_diffs();
  layer->Backward(top.vec, {false}, bottom.vec);
  ctx->Synchronize();
  EXPECT_EQ(test::GetDiff(*layer->blobs()[0]), (std::vector<double>{3, 4, 7, 8, 1, 2}));
  expect_reported("forward after a backward", [&] { layer->Forward(bottom.vec, top.vec); });
  ctx->Synchronize();

  // Good indexes: the CPU's top and gradients.
  test::SetData(bottom[0], good);
  layer->Forward(bottom.vec, top.vec);
  ctx->Synchronize();
  EXPECT_EQ(test::GetData(*top[0]), cpu_y);
  zero_diffs();
  layer->Backward(top.vec, {false}, bottom.vec);
  ctx->Synchronize();
  EXPECT_EQ(test::GetDiff(*layer->blobs()[0]), cpu_dw);
  EXPECT_EQ(test::GetDiff(*layer->blobs()[1]), cpu_db);
#endif
}

}  // namespace
}  // namespace cortado
