#include "cortado/layers/infogain_loss_layer.hpp"

#include <cfloat>
#include <cmath>

#include "cortado/util/io.hpp"
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
    // float16 rounds the scores before the softmax: a relative 2^-10 or so.
    const double tol = std::is_same_v<F, float16> ? 4e-3 * want : 1e-6 * want;
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
  const double tol = std::is_same_v<F, float16> ? 4e-3 * want : 1e-6 * want;
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

TYPED_TEST(InfogainLossLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillGaussian(b, 0, 2, 27);
    else if (i == 1) test::FillLabels(b, 4, 28);
    else test::FillUniform(b, 0, 1, 29);
  };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'InfogainLoss'", {{3, 4}, {3}, {4, 4}}, fill, test::GpuTolerance{4, 4},
                                      {true, false, false});
}

}  // namespace
}  // namespace cortado
