#include "cortado/layers/infogain_loss_layer.hpp"

#include <cfloat>
#include <cmath>

#include "cortado/io/proto_io.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class InfogainLossLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(InfogainLossLayerTest, test::AllPairs, test::PairNames);

// float16: scores and H rounded once, softmax and loss in float; the
// gradient p * rowsum - H is rounded once to Btype.
const test::ReferenceTolerance kTol{2, 4};

template <typename P>
test::GradientSettings Settings() {
  return test::GradientSettings().threshold(std::is_same_v<typename P::Ftype, double> ? 1e-4 : 1e-3);
}

// x: (2, 3), labels (2), H: 3 x 3.
const std::vector<double> kX = {0.5, -1, 1.5, 2, 0, -0.5};
const std::vector<double> kH = {1, 0.5, 0, 0.25, 2, 0, 0, 0, 1};

double Prob(int n, int c) {
  double z = 0;
  for (int k = 0; k < 3; ++k) z += std::exp(kX[n * 3 + k]);
  return std::exp(kX[n * 3 + c]) / z;
}

std::string WriteMatrix(const std::string& name, const std::vector<double>& h, int k) {
  BlobProto proto;
  for (int d : {1, 1, k, k}) proto.mutable_shape()->add_dim(d);
  for (double v : h) proto.add_data(static_cast<float>(v));
  const std::string path = ::testing::TempDir() + name;
  WriteBinaryProto(path, proto);
  return path;
}

TYPED_TEST(InfogainLossLayerTest, ForwardBackwardValuesMatrixBottomAndFile) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  const std::string path = WriteMatrix(str_cat("infogain_", type_short(type_of<F>()), "_", type_short(type_of<typename TypeParam::Btype>()), ".binaryproto"), kH, 3);
  for (const bool from_file : {false, true}) {
    SCOPED_TRACE(from_file ? "source" : "bottom[2]");
    auto layer = test::NewLayer<TypeParam>(
        from_file ? "name: 'loss' type: 'InfogainLoss' infogain_loss_param { source: '" + path + "' }"
                  : std::string("name: 'loss' type: 'InfogainLoss'"));
    test::Blobs bottom, top;
    bottom.add({2, 3}, type_of<F>(), kX);
    bottom.add({2}, type_of<F>(), {0, 1});
    if (!from_file) bottom.add({3, 3}, type_of<F>(), kH);
    top.add(type_of<F>());
    top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    EXPECT_EQ(layer->loss(0), 1.0);
    EXPECT_EQ(layer->loss(1), 0.0);
    layer->Forward(bottom.vec, top.vec);
    const std::vector<int> label = {0, 1};
    double want = 0;
    std::vector<double> g(6), p(6);
    for (int n = 0; n < 2; ++n) {
      const int l = label[n];
      double rs = 0;
      for (int c = 0; c < 3; ++c) rs += kH[l * 3 + c];
      for (int c = 0; c < 3; ++c) {
        p[n * 3 + c] = Prob(n, c);
        want -= kH[l * 3 + c] * std::log(Prob(n, c));
        g[n * 3 + c] = 0.5 * (Prob(n, c) * rs - kH[l * 3 + c]);
      }
    }
    want /= 2;
    // 16-bit types round the scores before the softmax: a relative eps or so.
    const double tol = (is_half_v<F> ? 4.1 * type_epsilon<F>() : 1e-6) * want;
    EXPECT_NEAR(test::GetData(*top[0])[0], want, tol);
    test::ExpectNear<test::Coarser<TypeParam>>(test::GetData(*top[1]), p, 4);
    test::SetDiff(top[0], {1}, type_of<B>());
    layer->Backward(top.vec, from_file ? std::vector<bool>{true, false} : std::vector<bool>{true, false, false},
                    bottom.vec);
    test::ExpectNear<test::Coarser<TypeParam>>(test::GetDiff(*bottom[0]), g, 4);
  }
}

TYPED_TEST(InfogainLossLayerTest, IdentityIsSoftmaxLossWithIgnoreLabel) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>(
      "name: 'loss' type: 'InfogainLoss' loss_param { ignore_label: 2 normalization: VALID }");
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>(), kX);
  bottom.add({2}, type_of<F>(), {1, 2});
  bottom.add({3, 3}, type_of<F>(), {1, 0, 0, 0, 1, 0, 0, 0, 1});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  const double want = -std::log(Prob(0, 1));
  const double tol = (is_half_v<F> ? 4.1 * type_epsilon<F>() : 1e-6) * want;
  EXPECT_NEAR(test::GetData(*top[0])[0], want, tol);
}

TYPED_TEST(InfogainLossLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 21);
    else if (i == 1) test::FillLabels(b, 4, 22);
    else test::FillUniform(b, 0, 1, 23);
  };
  test::CheckLayer<TypeParam>("type: 'InfogainLoss'", {{3, 4, 2}, {3, 2}, {4, 4}}, fill, Settings<TypeParam>(), kTol,
                              {true, false, false});
}

TYPED_TEST(InfogainLossLayerTest, GradientAxisIgnoreLabelFull) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 24);
    else if (i == 1) test::FillLabels(b, 3, 25);
    else test::FillUniform(b, 0, 1, 26);
  };
  test::CheckLayer<TypeParam>(
      "type: 'InfogainLoss' infogain_loss_param { axis: 2 } loss_param { ignore_label: 1 normalization: FULL }",
      {{2, 2, 3}, {2, 2}, {3, 3}}, fill, Settings<TypeParam>(), kTol, {true, false, false});
}

TYPED_TEST(InfogainLossLayerTest, FieldErrors) {
  using F = typename TypeParam::Ftype;
  auto expect_error = [](const std::string& text, int num_bottom, const std::string& field,
                         const std::string& needle) {
    auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'InfogainLoss' " + text);
    test::Blobs bottom, top;
    bottom.add({2, 3}, type_of<F>());
    bottom.add({2}, type_of<F>(), {0, 1});
    if (num_bottom > 2) bottom.add({2, 2}, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("", 2, "infogain_loss_param.source", "required");
  expect_error("infogain_loss_param { source: '/nonexistent/h.binaryproto' }", 2, "infogain_loss_param.source",
               "/nonexistent/h.binaryproto");
  expect_error("", 3, "bottom[2]", "3 x 3");
  expect_error("infogain_loss_param { axis: 2 }", 3, "infogain_loss_param.axis", "got 2");
  const std::string path = WriteMatrix(str_cat("infogain_small_", type_short(type_of<F>()), "_", type_short(type_of<typename TypeParam::Btype>()), ".binaryproto"), {1, 0, 0, 1}, 2);
  expect_error("infogain_loss_param { source: '" + path + "' }", 2, "infogain_loss_param.source", "holds 4 values");
}

// GPU against CPU. The softmax uses the device's expf and its own summation
// order, and the loss sums in another order: a few ulps on the loss, the
// probabilities and the gradient p * rowsum - H.
const test::GpuTolerance kGpuTol{16, 32};

// H from a bottom, the probability top, and a loss weight other than 1.
TYPED_TEST(InfogainLossLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 27);
    else if (i == 1) test::FillLabels(b, 4, 28);
    else test::FillUniform(b, 0, 1, 29);
  };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'InfogainLoss'", {{3, 4}, {3}, {4, 4}}, fill, kGpuTol,
                                      {true, false, false});
  test::CheckGpuAgainstCpu<TypeParam>("type: 'InfogainLoss' loss_weight: 2 loss_weight: 0", {{5, 4}, {5}, {4, 4}},
                                      fill, kGpuTol, {true, false, false}, 2);
}

// H read from the source file (uploaded once: two forwards), with the
// probabilities kept per position over a spatial axis (inner > 1).
TYPED_TEST(InfogainLossLayerTest, GpuMatchesCpuMatrixFromFile) {
  using F = typename TypeParam::Ftype;
  std::vector<double> h(25);
  for (size_t k = 0; k < h.size(); ++k) h[k] = k % 6 == 0 ? 1.0 : 0.05 * static_cast<double>(k % 7);
  const std::string path = WriteMatrix(
      str_cat("infogain_gpu_", type_short(type_of<F>()), "_", type_short(type_of<typename TypeParam::Btype>()),
              ".binaryproto"),
      h, 5);
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 37);
    else test::FillLabels(b, 5, 38);
  };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'InfogainLoss' infogain_loss_param { source: '" + path + "' }",
                                      {{2, 5, 3, 2}, {2, 1, 3, 2}}, fill, kGpuTol, {true, false}, 2, 2);
}

// ignore_label with every normalization (VALID divides by a count the GPU
// knows only on the device), and another softmax axis.
TYPED_TEST(InfogainLossLayerTest, GpuMatchesCpuIgnoreLabel) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 39);
    else if (i == 1) test::FillLabels(b, 3, 40);
    else test::FillUniform(b, 0, 1, 41);
  };
  for (const char* norm : {"FULL", "VALID", "BATCH_SIZE", "NONE"}) {
    SCOPED_TRACE(norm);
    test::CheckGpuAgainstCpu<TypeParam>(
        str_cat("type: 'InfogainLoss' infogain_loss_param { axis: 2 } loss_param { ignore_label: 1 normalization: ",
                norm, " }"),
        {{2, 4, 3}, {2, 4}, {3, 3}}, fill, kGpuTol, {true, false, false});
  }
}

// Several blocks of the GPU's two-stage sum (2048 positions) and a second
// forward. The CPU adds every H-weighted term one after the other in float,
// which drifts from the exact sum by tens of ulps; the GPU's sum is close to
// exact.
TYPED_TEST(InfogainLossLayerTest, GpuMatchesCpuManyBlocks) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 42);
    else if (i == 1) test::FillLabels(b, 6, 43);
    else test::FillUniform(b, 0, 1, 44);
  };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'InfogainLoss' loss_param { ignore_label: 5 }",
                                      {{8, 6, 16, 16}, {8, 1, 16, 16}, {6, 6}}, fill, test::GpuTolerance{256, 32},
                                      {true, false, false}, -1, 2);
}

// On the GPU a bad label cannot throw inside the kernel: it is recorded, and
// the Backward after the (synchronizing) loss read raises the CPU's error.
TYPED_TEST(InfogainLossLayerTest, GpuBadLabelIsReported) {
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  using F = typename TypeParam::Ftype;
  test::ActiveGpuContext gpu;
  const std::shared_ptr<Context>& ctx = gpu.ctx;
  auto layer = test::NewLayer<TypeParam>("name: 'loss' type: 'InfogainLoss' loss_param { ignore_label: 0 }");
  layer->set_context(ctx);
  test::Blobs bottom, top;
  bottom.add({2, 3}, type_of<F>(), kX);
  bottom.add({2}, type_of<F>(), {0, 2.5});
  bottom.add({3, 3}, type_of<F>(), kH);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  try {
    layer->Backward(top.vec, {true, false, false}, bottom.vec);
    ADD_FAILURE() << "a label of 2.5 was not reported";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "bottom[1]");
    EXPECT_NE(std::string(e.what()).find("label value 2.5 at position 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("or ignore_label 0"), std::string::npos) << e.what();
  }
  ctx->Synchronize();
#endif
}

}  // namespace
}  // namespace cortado
