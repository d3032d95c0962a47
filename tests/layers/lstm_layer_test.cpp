#include "cortado/layers/lstm_layer.hpp"

#include <cmath>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class LSTMLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(LSTMLayerTest, test::AllPairs, test::PairNames);

const char* kLstm =
    "type: 'LSTM' recurrent_param { num_output: 3 weight_filler { type: 'uniform' min: -0.6 max: 0.6 }"
    " bias_filler { type: 'uniform' min: -0.3 max: 0.3 } }";
const char* kLstmExposed =
    "type: 'LSTM' recurrent_param { num_output: 3 expose_hidden: true"
    " weight_filler { type: 'uniform' min: -0.6 max: 0.6 } bias_filler { type: 'uniform' min: -0.3 max: 0.3 } }";

// T = 3 steps of N = 2 streams; stream 0 starts a new sequence at t = 2.
const std::vector<double> kCont{0, 0, 1, 1, 0, 1};

std::function<void(int, Blob*)> SequenceFill(uint32_t seed) {
  return [seed](int i, Blob* b) {
    if (i == 1) {
      test::SetData(b, kCont);
    } else {
      test::FillUniform(b, -1, 1, seed + i);
    }
  };
}

double Sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// The LSTM written out step by step in double, from the formulas of
// lstm_layer.hpp, with the weights read from the layer's blobs.
std::vector<double> ReferenceLstm(const std::vector<double>& x, const std::vector<double>& cont, int T, int N, int I,
                                  int H, const std::vector<double>& w_x, const std::vector<double>& b,
                                  const std::vector<double>& w_h) {
  std::vector<double> h(N * H, 0), c(N * H, 0), out;
  for (int t = 0; t < T; ++t) {
    std::vector<double> hn(N * H), cn(N * H);
    for (int n = 0; n < N; ++n) {
      const double k = cont[t * N + n];
      for (int j = 0; j < H; ++j) {
        double a[4];
        for (int q = 0; q < 4; ++q) {
          const int row = q * H + j;
          double s = b[row];
          for (int i = 0; i < I; ++i) s += w_x[row * I + i] * x[(t * N + n) * I + i];
          for (int m = 0; m < H; ++m) s += w_h[row * H + m] * k * h[n * H + m];
          a[q] = s;
        }
        const double ig = Sigmoid(a[0]), fg = Sigmoid(a[1]), og = Sigmoid(a[2]), gg = std::tanh(a[3]);
        cn[n * H + j] = k * fg * c[n * H + j] + ig * gg;
        hn[n * H + j] = og * std::tanh(cn[n * H + j]);
      }
    }
    h = hn;
    c = cn;
    out.insert(out.end(), h.begin(), h.end());
  }
  return out;
}

TEST(LSTMLayerReference, ForwardMatchesStepByStep) {
  using P = test::TypePair<double, double>;
  auto layer = test::NewLayer<P>(kLstm);
  test::Blobs bottom, top;
  test::FillUniform(bottom.add({3, 2, 4}, DOUBLE), -1, 1, 5);
  bottom.add({3, 2}, DOUBLE, kCont);
  top.add(DOUBLE);
  layer->SetUp(bottom.vec, top.vec);
  ASSERT_EQ(layer->blobs().size(), 3u);
  EXPECT_EQ(layer->blobs()[0]->shape(), (std::vector<int>{12, 4}));
  EXPECT_EQ(layer->blobs()[1]->shape(), (std::vector<int>{12}));
  EXPECT_EQ(layer->blobs()[2]->shape(), (std::vector<int>{12, 3}));
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{3, 2, 3}));
  const std::vector<double> want =
      ReferenceLstm(test::GetData(*bottom[0]), kCont, 3, 2, 4, 3, test::GetData(*layer->blobs()[0]),
                    test::GetData(*layer->blobs()[1]), test::GetData(*layer->blobs()[2]));
  test::ExpectNear<double>(test::GetData(*top[0]), want, 16);
  // cont = 0 at t = 2 for stream 0: its output there depends on x_2 only,
  // so it equals the first step of a fresh sequence with the same input.
  auto fresh = test::NewLayer<P>(kLstm);
  test::Blobs b1, t1;
  std::vector<double> x = test::GetData(*bottom[0]);
  b1.add({1, 1, 4}, DOUBLE, std::vector<double>(x.begin() + 16, x.begin() + 20));
  b1.add({1, 1}, DOUBLE, {0});
  t1.add(DOUBLE);
  fresh->SetUp(b1.vec, t1.vec);
  for (int i = 0; i < 3; ++i) test::SetData(fresh->blobs()[i].get(), test::GetData(*layer->blobs()[i]));
  fresh->Forward(b1.vec, t1.vec);
  const std::vector<double> got = test::GetData(*top[0]);
  test::ExpectNear<double>(test::GetData(*t1[0]), std::vector<double>(got.begin() + 12, got.begin() + 15), 4);
}

TYPED_TEST(LSTMLayerTest, Gradient) {
  test::CheckLayer<TypeParam>(kLstm, {{3, 2, 4}, {3, 2}}, SequenceFill(11), test::GradientSettings(),
                              test::ReferenceTolerance{4, 16}, {true, false});
}

// Static input and the exposed initial and final states, all with gradients.
TYPED_TEST(LSTMLayerTest, GradientStaticAndExposedState) {
  test::CheckLayer<TypeParam>(kLstmExposed, {{3, 2, 2}, {3, 2}, {2, 5}, {1, 2, 3}, {1, 2, 3}}, SequenceFill(17),
                              test::GradientSettings(), test::ReferenceTolerance{4, 16},
                              {true, false, true, true, true});
}

// Running 4 steps at once equals running 2 + 2 with the final state of the
// first chunk fed back as the initial state of the second (truncated BPTT).
TYPED_TEST(LSTMLayerTest, ChunksEqualWholeSequence) {
  using F = typename TypeParam::Ftype;
  const std::vector<double> cont{0, 0, 1, 1, 1, 0, 1, 1};
  auto whole = test::NewLayer<TypeParam>(kLstmExposed);
  test::Blobs bw, tw;
  test::FillUniform(bw.add({4, 2, 3}, type_of<F>()), -1, 1, 3);
  bw.add({4, 2}, type_of<F>(), cont);
  bw.add({1, 2, 3}, type_of<F>());
  bw.add({1, 2, 3}, type_of<F>());
  for (int k = 0; k < 3; ++k) tw.add(type_of<F>());
  whole->SetUp(bw.vec, tw.vec);
  whole->Forward(bw.vec, tw.vec);
  const std::vector<double> x = test::GetData(*bw[0]), all = test::GetData(*tw[0]);

  auto chunk = test::NewLayer<TypeParam>(kLstmExposed);
  test::Blobs bc, tc;
  bc.add({2, 2, 3}, type_of<F>(), std::vector<double>(x.begin(), x.begin() + 12));
  bc.add({2, 2}, type_of<F>(), std::vector<double>(cont.begin(), cont.begin() + 4));
  bc.add({1, 2, 3}, type_of<F>());
  bc.add({1, 2, 3}, type_of<F>());
  for (int k = 0; k < 3; ++k) tc.add(type_of<F>());
  chunk->SetUp(bc.vec, tc.vec);
  for (int i = 0; i < 3; ++i) test::SetData(chunk->blobs()[i].get(), test::GetData(*whole->blobs()[i]));
  chunk->Forward(bc.vec, tc.vec);
  std::vector<double> got = test::GetData(*tc[0]);
  test::SetData(bc[0], std::vector<double>(x.begin() + 12, x.end()));
  test::SetData(bc[1], std::vector<double>(cont.begin() + 4, cont.end()));
  test::SetData(bc[2], test::GetData(*tc[1]));
  test::SetData(bc[3], test::GetData(*tc[2]));
  chunk->Forward(bc.vec, tc.vec);
  const std::vector<double> second = test::GetData(*tc[0]);
  got.insert(got.end(), second.begin(), second.end());
  // Exact for 32- and 64-bit types; the 16-bit chunked run rounds the carried
  // state (and its cell) to Ftype once.
  const double ulps = test::is_half_pair<TypeParam>() ? 4 : 0;
  test::ExpectNear<F>(got, all, ulps);
  test::ExpectNear<F>(test::GetData(*tc[1]), std::vector<double>(all.end() - 6, all.end()), ulps, "final h");
}

TYPED_TEST(LSTMLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { const char* param; std::vector<std::vector<int>> shapes; const char* field; const char* message; };
  const Case cases[] = {
      {"recurrent_param { }", {{3, 2, 4}, {3, 2}}, "recurrent_param.num_output", "must be set"},
      {"recurrent_param { num_output: 2 }", {{3, 2, 4}, {2, 3}}, "bottom", "cont (bottom[1]) has shape"},
      {"recurrent_param { num_output: 2 }", {{3}, {3, 1}}, "bottom", "at least 2 axes"},
      {"recurrent_param { num_output: 2 }", {{0, 2, 4}, {0, 2}}, "bottom", "at least one time step"},
      {"recurrent_param { num_output: 2 }", {{3, 2, 4}, {3, 2}, {3, 5}}, "bottom", "static input"},
      {"recurrent_param { num_output: 2 expose_hidden: true }", {{3, 2, 4}, {3, 2}, {1, 2, 2}}, "bottom",
       "initial state"},
      {"recurrent_param { num_output: 2 expose_hidden: true }", {{3, 2, 4}, {3, 2}, {1, 2, 2}, {1, 2, 3}}, "bottom",
       "initial state bottom[3] has shape"},
      {"recurrent_param { num_output: 2 weight_filler { type: 'nope' } }", {{3, 2, 4}, {3, 2}},
       "recurrent_param.weight_filler.type", ""},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 'lstm' type: 'LSTM' ") + c.param);
    test::Blobs bottom, top;
    for (const auto& s : c.shapes) bottom.add(s, type_of<F>());
    const int tops = layer->ExactNumTopBlobs();
    for (int k = 0; k < tops; ++k) top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << c.param << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), c.field) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

TYPED_TEST(LSTMLayerTest, NoGradientToCont) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>(std::string("name: 'lstm' ") + kLstm);
  test::Blobs bottom, top;
  test::FillUniform(bottom.add({3, 2, 4}, type_of<F>()), -1, 1, 2);
  bottom.add({3, 2}, type_of<F>(), kCont);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_FALSE(layer->AllowForceBackward(1));
  EXPECT_TRUE(layer->AllowForceBackward(0));
  try {
    layer->Backward(top.vec, {true, true}, bottom.vec);
    ADD_FAILURE() << "back-propagation to cont was accepted";
  } catch (const FieldError& e) {
    EXPECT_NE(std::string(e.what()).find("cont"), std::string::npos) << e.what();
  }
}

// Recurrence over several steps: the state feeds back through float GEMMs
// whose summation order differs between cuBLAS and OpenBLAS.
TYPED_TEST(LSTMLayerTest, GpuMatchesCpu) {
  test::CheckGpuAgainstCpu<TypeParam>(kLstmExposed, {{3, 2, 2}, {3, 2}, {2, 5}, {1, 2, 3}, {1, 2, 3}},
                                      SequenceFill(23), test::GpuTolerance{16, 64}, {true, false, true, true, true});
}

}  // namespace
}  // namespace cortado
