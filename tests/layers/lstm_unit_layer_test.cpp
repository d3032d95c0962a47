#include "cortado/layers/lstm_unit_layer.hpp"

#include <cmath>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class LSTMUnitLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(LSTMUnitLayerTest, test::AllPairs, test::PairNames);

double Sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

TYPED_TEST(LSTMUnitLayerTest, Forward) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'LSTMUnit'");
  test::Blobs bottom, top;
  // N = 2 streams, H = 1: gates [i f o g] per stream; stream 1 restarts.
  bottom.add({1, 2, 1}, type_of<F>(), {0.5, -2});
  bottom.add({1, 2, 4}, type_of<F>(), {1, 2, -1, 0.5, -0.5, 3, 0.25, -1});
  bottom.add({1, 2}, type_of<F>(), {1, 0});
  top.add(type_of<F>());
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  const std::vector<double> c_prev = test::GetData(*bottom[0]), x = test::GetData(*bottom[1]);
  std::vector<double> c(2), h(2);
  for (int n = 0; n < 2; ++n) {
    const double* a = &x[4 * n];
    c[n] = (n == 0 ? 1 : 0) * Sigmoid(a[1]) * c_prev[n] + Sigmoid(a[0]) * std::tanh(a[3]);
    h[n] = Sigmoid(a[2]) * std::tanh(c[n]);
  }
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{1, 2, 1}));
  test::ExpectNear<F>(test::GetData(*top[0]), c, 1, "c");
  test::ExpectNear<F>(test::GetData(*top[1]), h, 1, "h");
}

TYPED_TEST(LSTMUnitLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) {
    if (i == 2) {
      test::SetData(b, {1, 0, 1});
    } else {
      test::FillUniform(b, -1.5, 1.5, 40 + i);
    }
  };
  test::CheckLayer<TypeParam>("type: 'LSTMUnit'", {{1, 3, 2}, {1, 3, 8}, {1, 3}}, fill, test::GradientSettings(),
                              test::ReferenceTolerance{2, 4}, {true, true, false});
}

TYPED_TEST(LSTMUnitLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { std::vector<std::vector<int>> shapes; const char* message; };
  const Case cases[] = {
      {{{2, 3, 2}, {1, 3, 8}, {1, 3}}, "must have shape (1, N, H)"},
      {{{1, 3, 2}, {1, 3, 6}, {1, 3}}, "gate inputs (bottom[1])"},
      {{{1, 3, 2}, {1, 3, 8}, {3}}, "cont (bottom[2])"},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>("name: 'u' type: 'LSTMUnit'");
    test::Blobs bottom, top;
    for (const auto& s : c.shapes) bottom.add(s, type_of<F>());
    top.add(type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << c.message << ": accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "bottom") << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

TYPED_TEST(LSTMUnitLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) {
    if (i == 2) {
      test::SetData(b, {1, 0, 1});
    } else {
      test::FillUniform(b, -1.5, 1.5, 50 + i);
    }
  };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'LSTMUnit'", {{1, 3, 2}, {1, 3, 8}, {1, 3}}, fill,
                                      test::GpuTolerance{4, 8}, {true, true, false});
}

}  // namespace
}  // namespace cortado
