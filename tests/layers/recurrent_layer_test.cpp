// What RNN and LSTM share, seen from a net: they learn a task that needs
// memory (echo the previous step's input) in FP32, FP16 with dynamic loss
// scaling and BF16, and loaded weights of the wrong shape are refused.
#include "cortado/layers/recurrent_layer.hpp"

#include "cortado/io/proto_io.hpp"
#include "cortado/solvers/solver.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

std::unique_ptr<Solver> MakeSolver(const std::string& solver_text, const std::string& net_text) {
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto(solver_text, "solver.prototxt", &sp, &info);
  ParseTextProto(net_text, "net.prototxt", sp.mutable_net_param());
  return Solver::Create(sp, info);
}

// x: 6 steps of 16 streams of one Gaussian value; the loss asks output t to
// be x_{t-1}, which needs the state of the previous step.
std::string EchoNet(const std::string& types, const std::string& recurrent_type) {
  return types + R"(
  layer { name: "data" type: "DummyData" top: "x" top: "cont"
    dummy_data_param { shape { dim: 6 dim: 16 dim: 1 } shape { dim: 6 dim: 16 }
      data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
  layer { name: "rec" type: ")" + recurrent_type + R"(" bottom: "x" bottom: "cont" top: "h"
    recurrent_param { num_output: 16 weight_filler { type: "uniform" min: -0.3 max: 0.3 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "h" top: "y"
    inner_product_param { num_output: 1 axis: 2 weight_filler { type: "xavier" } } }
  layer { name: "slice_y" type: "Slice" bottom: "y" top: "y_first" top: "y_rest" slice_param { axis: 0 slice_point: 1 } }
  layer { name: "slice_x" type: "Slice" bottom: "x" top: "x_head" top: "x_last" slice_param { axis: 0 slice_point: 5 } }
  layer { name: "unused" type: "Silence" bottom: "y_first" bottom: "x_last" }
  layer { name: "loss" type: "EuclideanLoss" bottom: "y_rest" bottom: "x_head" top: "loss" })";
}

struct EchoCase { const char* recurrent; const char* types; const char* solver_extra; };

class RecurrentEchoTest : public ::testing::TestWithParam<EchoCase> {};

TEST_P(RecurrentEchoTest, LearnsToEchoThePreviousStep) {
  const EchoCase& c = GetParam();
  auto solver = MakeSolver(std::string("type: 'Adam' base_lr: 0.01 momentum: 0.9 momentum2: 0.999 "
                                       "lr_policy: 'fixed' random_seed: 5 max_iter: 400 average_loss: 20 ") +
                               c.solver_extra,
                           EchoNet(c.types, c.recurrent));
  solver->Step(1);
  const double start = solver->smoothed_loss();
  solver->Step(399);
  const double end = solver->smoothed_loss();
  // Predicting 0 costs about 16 * E[x^2] / 2 = 8; without memory nothing
  // does better; the nets here reach about 0.015 (RNN) and 0.006 (LSTM).
  EXPECT_GT(start, 4.0);
  EXPECT_LT(end, 0.05 * start) << c.recurrent << " " << c.types << ": smoothed loss " << start << " -> " << end;
}

INSTANTIATE_TEST_SUITE_P(
    Nets, RecurrentEchoTest,
    ::testing::Values(EchoCase{"LSTM", "", ""}, EchoCase{"RNN", "", ""},
                      EchoCase{"LSTM", "default_forward_type: FLOAT16 default_backward_type: FLOAT16",
                               "dynamic_loss_scale: true"},
                      EchoCase{"RNN", "default_forward_type: FLOAT16 default_backward_type: FLOAT16",
                               "dynamic_loss_scale: true"},
                      EchoCase{"LSTM", "default_forward_type: BFLOAT16 default_backward_type: BFLOAT16", ""}),
    [](const ::testing::TestParamInfo<EchoCase>& info) {
      std::string types = std::string(info.param.types).find("BFLOAT16") != std::string::npos ? "BF16"
                          : std::string(info.param.types).empty()                              ? "FP32"
                                                                                               : "FP16";
      return std::string(info.param.recurrent) + "_" + types;
    });

template <typename P>
class RecurrentLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(RecurrentLayerTest, test::AllPairs, test::PairNames);

// Weights loaded from a file (here: set before SetUp) must have Caffe's shapes.
TYPED_TEST(RecurrentLayerTest, LoadedBlobsOfTheWrongShape) {
  using F = typename TypeParam::Ftype;
  for (const char* type : {"LSTM", "RNN"}) {
    LayerParameter p = test::MakeParam<TypeParam>(std::string("name: 'r' type: '") + type +
                                                  "' recurrent_param { num_output: 2 }");
    for (int i = 0; i < (std::string(type) == "LSTM" ? 3 : 5); ++i) {
      BlobProto* b = p.add_blobs();
      const int n = i == 0 ? 7 : 2;
      b->mutable_shape()->add_dim(n);
      for (int k = 0; k < n; ++k) b->add_data(0.5f);
    }
    auto layer = test::NewLayer(p);
    test::Blobs bottom, top;
    bottom.add({2, 1, 3}, type_of<F>());
    bottom.add({2, 1}, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << type << ": wrong blob shapes were accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "blobs") << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string(type) == "LSTM" ? "W_xc" : "W_xh"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace cortado
