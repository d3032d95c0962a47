#include "cortado/layers/rnn_layer.hpp"

#include <cmath>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class RNNLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(RNNLayerTest, test::AllPairs, test::PairNames);

const char* kRnn =
    "type: 'RNN' recurrent_param { num_output: 3 weight_filler { type: 'uniform' min: -0.6 max: 0.6 }"
    " bias_filler { type: 'uniform' min: -0.3 max: 0.3 } }";
const char* kRnnExposed =
    "type: 'RNN' recurrent_param { num_output: 3 expose_hidden: true"
    " weight_filler { type: 'uniform' min: -0.6 max: 0.6 } bias_filler { type: 'uniform' min: -0.3 max: 0.3 } }";

// T = 3 steps of N = 2 streams; stream 1 starts a new sequence at t = 1.
const std::vector<double> kCont{0, 0, 1, 0, 1, 1};

std::function<void(int, Blob*)> SequenceFill(uint32_t seed) {
  return [seed](int i, Blob* b) {
    if (i == 1) {
      test::SetData(b, kCont);
    } else {
      test::FillUniform(b, -1, 1, seed + i);
    }
  };
}

// The RNN written out step by step in double from the formulas of rnn_layer.hpp.
std::vector<double> ReferenceRnn(const std::vector<double>& x, const std::vector<double>& cont, int T, int N, int I,
                                 int H, const std::vector<std::vector<double>>& p) {
  const std::vector<double>&w_xh = p[0], &b_h = p[1], &w_hh = p[2], &w_ho = p[3], &b_o = p[4];
  std::vector<double> h(N * H, 0), out;
  for (int t = 0; t < T; ++t) {
    std::vector<double> hn(N * H);
    for (int n = 0; n < N; ++n) {
      for (int j = 0; j < H; ++j) {
        double s = b_h[j];
        for (int i = 0; i < I; ++i) s += w_xh[j * I + i] * x[(t * N + n) * I + i];
        for (int m = 0; m < H; ++m) s += w_hh[j * H + m] * cont[t * N + n] * h[n * H + m];
        hn[n * H + j] = std::tanh(s);
      }
    }
    h = hn;
    for (int n = 0; n < N; ++n) {
      for (int j = 0; j < H; ++j) {
        double s = b_o[j];
        for (int m = 0; m < H; ++m) s += w_ho[j * H + m] * h[n * H + m];
        out.push_back(std::tanh(s));
      }
    }
  }
  return out;
}

TEST(RNNLayerReference, ForwardMatchesStepByStep) {
  using P = test::TypePair<double, double>;
  auto layer = test::NewLayer<P>(kRnn);
  test::Blobs bottom, top;
  test::FillUniform(bottom.add({3, 2, 4}, DOUBLE), -1, 1, 8);
  bottom.add({3, 2}, DOUBLE, kCont);
  top.add(DOUBLE);
  layer->SetUp(bottom.vec, top.vec);
  // Caffe's blobs: W_xh, b_h, W_hh, W_ho, b_o.
  const std::vector<std::vector<int>> shapes{{3, 4}, {3}, {3, 3}, {3, 3}, {3}};
  ASSERT_EQ(layer->blobs().size(), shapes.size());
  std::vector<std::vector<double>> params;
  for (size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_EQ(layer->blobs()[i]->shape(), shapes[i]) << "blob " << i;
    params.push_back(test::GetData(*layer->blobs()[i]));
  }
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{3, 2, 3}));
  test::ExpectNear<double>(test::GetData(*top[0]), ReferenceRnn(test::GetData(*bottom[0]), kCont, 3, 2, 4, 3, params),
                           16);
}

TYPED_TEST(RNNLayerTest, Gradient) {
  test::CheckLayer<TypeParam>(kRnn, {{3, 2, 4}, {3, 2}}, SequenceFill(13), test::GradientSettings(),
                              test::ReferenceTolerance{4, 16}, {true, false});
}

TYPED_TEST(RNNLayerTest, GradientStaticAndExposedState) {
  test::CheckLayer<TypeParam>(kRnnExposed, {{3, 2, 2}, {3, 2}, {2, 5}, {1, 2, 3}}, SequenceFill(19),
                              test::GradientSettings(), test::ReferenceTolerance{4, 16}, {true, false, true, true});
}

TYPED_TEST(RNNLayerTest, StaticInputBlobs) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>(kRnnExposed);
  test::Blobs bottom, top;
  bottom.add({3, 2, 4}, type_of<F>());
  bottom.add({3, 2}, type_of<F>(), kCont);
  bottom.add({2, 5}, type_of<F>());
  bottom.add({1, 2, 3}, type_of<F>());
  top.add(type_of<F>());
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  const std::vector<std::vector<int>> shapes{{3, 4}, {3}, {3, 5}, {3, 3}, {3, 3}, {3}};
  ASSERT_EQ(layer->blobs().size(), shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) EXPECT_EQ(layer->blobs()[i]->shape(), shapes[i]) << "blob " << i;
  EXPECT_EQ(top[1]->shape(), (std::vector<int>{1, 2, 3}));
}

TYPED_TEST(RNNLayerTest, GpuMatchesCpu) {
  test::CheckGpuAgainstCpu<TypeParam>(kRnnExposed, {{3, 2, 2}, {3, 2}, {2, 5}, {1, 2, 3}}, SequenceFill(29),
                                      test::GpuTolerance{16, 64}, {true, false, true, true});
}

}  // namespace
}  // namespace cortado
