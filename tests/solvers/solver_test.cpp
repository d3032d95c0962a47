// Solver: learning-rate policies, one SGD step by hand, iter_size, snapshot
// and bit-identical resume, signal actions.
#include "cortado/solvers/solver.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "cortado/io/proto_io.hpp"
#include "cortado/util/rng.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

namespace fs = std::filesystem;

// loss = sum(W x + b) with x = (1, 2, 3) for every sample: dL/dW[j][k] = N * x[k].
const char* kLinear = R"(
  layer { name: "x" type: "DummyData" top: "x" dummy_data_param { shape { dim: 2 dim: 3 } data_filler { type: "constant" value: 0 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
    inner_product_param { num_output: 2 weight_filler { type: "constant" value: 0.5 } bias_filler { type: "constant" value: 1 } } }
  layer { name: "l" type: "Flatten" bottom: "y" top: "loss" loss_weight: 1 })";

std::unique_ptr<Solver> make_solver(const std::string& solver_text, const std::string& net_text) {
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto(solver_text, "solver.prototxt", &sp, &info);
  ParseTextProto(net_text, "net.prototxt", sp.mutable_net_param());
  return Solver::Create(sp, info);
}

TEST(Solver, LearningRatePolicies) {
  struct Case {
    std::string text;
    std::function<double(int)> want;
  };
  const double b = 0.1f;  // base_lr is a float field
  const std::vector<Case> cases = {
      {"lr_policy: 'fixed'", [&](int) { return b; }},
      {"lr_policy: 'step' gamma: 0.5 stepsize: 3", [&](int it) { return b * std::pow(0.5, it / 3); }},
      {"lr_policy: 'exp' gamma: 0.9", [&](int it) { return b * std::pow(0.9, it); }},
      {"lr_policy: 'inv' gamma: 0.0001 power: 0.75", [&](int it) { return b * std::pow(1 + 0.0001 * it, -0.75); }},
      {"lr_policy: 'multistep' gamma: 0.1 stepvalue: 2 stepvalue: 5",
       [&](int it) { return b * std::pow(0.1, (it >= 2) + (it >= 5)); }},
      {"lr_policy: 'poly' power: 2", [&](int it) { return b * std::pow(1 - it / 10.0, 2); }},
      {"lr_policy: 'sigmoid' gamma: -0.5 stepsize: 4", [&](int it) { return b / (1 + std::exp(0.5 * (it - 4))); }},
  };
  for (const Case& c : cases) {
    auto s = make_solver("base_lr: 0.1 max_iter: 10 " + c.text, kLinear);
    for (int it = 0; it <= 10; ++it) EXPECT_NEAR(s->GetLearningRate(it), c.want(it), 1e-6 * c.want(it)) << c.text << " at " << it;
  }
}

TEST(Solver, WarmUpAndPolyFloor) {
  auto s = make_solver("base_lr: 0.1 lr_policy: 'poly' power: 1 max_iter: 100 min_lr: 0.01 "
                       "rampup_interval: 10 rampup_lr: 0.02",
                       kLinear);
  EXPECT_NEAR(s->GetLearningRate(0), 0.02, 1e-7);
  // NVCaffe's warm-up is quadratic: rampup_lr + (base - rampup_lr) * (it / rampup_interval)^2.
  EXPECT_NEAR(s->GetLearningRate(5), 0.02 + (0.1 - 0.02) * 0.25, 1e-7);
  // After the warm-up the policy applies: min_lr + (base - min_lr) * (1 - it/max)^power.
  EXPECT_NEAR(s->GetLearningRate(10), 0.01 + 0.09 * 0.9, 1e-7);
  EXPECT_NEAR(s->GetLearningRate(100), 0.01, 1e-7);
}

TEST(Solver, LarcScaleAndClip) {
  // NVCaffe's trust ratio (1 - momentum) * eta * |W| / |g| with momentum 0.
  // Bias: W = (1, 1), g = (2, 2): trust = 0.1 * sqrt(2) / sqrt(8) = 0.05.
  // Weights: g = 0, so trust = 1, and they do not move.
  auto scale = make_solver("base_lr: 0.5 lr_policy: 'fixed' larc: true larc_eta: 0.1 max_iter: 1", kLinear);
  scale->Step(1);
  EXPECT_NEAR(scale->net()->learnable_params()[1]->cpu_data<float>()[0], 1 - 0.5 * 0.05 * 2, 1e-6);
  auto clip = make_solver("base_lr: 0.5 lr_policy: 'fixed' larc: true larc_eta: 0.1 larc_policy: 'clip' max_iter: 1",
                          kLinear);
  clip->Step(1);
  EXPECT_NEAR(clip->net()->learnable_params()[1]->cpu_data<float>()[0], 1 - 0.05 * 2, 1e-6);
  EXPECT_NEAR(clip->net()->learnable_params()[0]->cpu_data<float>()[0], 0.5, 1e-7);
  try {
    make_solver("base_lr: 0.5 lr_policy: 'fixed' larc: true larc_policy: 'squash'", kLinear);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("larc_policy"), std::string::npos) << e.what();
  }
}

TEST(Solver, UnknownPolicyNamesTheField) {
  try {
    make_solver("base_lr: 0.1\nlr_policy: 'cosine'", kLinear);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("solver.prototxt:2: lr_policy: unknown policy 'cosine'"), std::string::npos)
        << e.what();
  }
}

TEST(Solver, TwoSgdStepsByHand) {
  auto s = make_solver("base_lr: 0.5 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.1 max_iter: 2", kLinear);
  // x = 0 everywhere: dL/dW = 0, dL/db = N = 2 per output; lr_mult 1, decay_mult 1.
  s->Step(1);
  const Blob& w = *s->net()->learnable_params()[0];
  const Blob& bias = *s->net()->learnable_params()[1];
  // H1 = lr * (g + wd * W0); W1 = W0 - H1.
  const double hw1 = 0.5 * (0 + 0.1 * 0.5), w1 = 0.5 - hw1;
  const double hb1 = 0.5 * (2 + 0.1 * 1), b1 = 1 - hb1;
  EXPECT_NEAR(w.cpu_data<float>()[0], w1, 1e-6);
  EXPECT_NEAR(bias.cpu_data<float>()[1], b1, 1e-6);
  s->Step(1);
  // H2 = m * H1 + lr * (g + wd * W1); W2 = W1 - H2.
  const double w2 = w1 - (0.9 * hw1 + 0.5 * (0 + 0.1 * w1));
  const double b2 = b1 - (0.9 * hb1 + 0.5 * (2 + 0.1 * b1));
  EXPECT_NEAR(w.cpu_data<float>()[3], w2, 1e-6);
  EXPECT_NEAR(bias.cpu_data<float>()[0], b2, 1e-6);
}

// An applied update leaves the gradients zero (the next iteration has
// nothing to clear); a skipped one leaves them for inspection.
TEST(Solver, AppliedUpdateZeroesGradientsSkippedOneKeepsThem) {
  auto s = make_solver("base_lr: 0.5 lr_policy: 'fixed' momentum: 0.9 max_iter: 3", kLinear);
  Net& net = *s->net();
  net.ForwardBackward();
  const Blob& bias = *net.learnable_params()[1];
  EXPECT_EQ(bias.cpu_diff<float>()[0], 2.f);  // N = 2
  EXPECT_TRUE(s->ApplyUpdate());
  for (const Blob* p : net.learnable_params())
    for (size_t i = 0; i < p->count(); ++i) EXPECT_EQ(p->cpu_diff<float>()[i], 0.f);
  s->ClearGradients();  // nothing to do, and the next backward starts from zero
  net.ForwardBackward();
  EXPECT_EQ(bias.cpu_diff<float>()[0], 2.f);
  net.learnable_params()[0]->mutable_cpu_diff<float>()[1] = NAN;
  EXPECT_FALSE(s->ApplyUpdate());  // skip_nonfinite_steps is on by default
  EXPECT_EQ(bias.cpu_diff<float>()[0], 2.f);
  EXPECT_TRUE(std::isnan(net.learnable_params()[0]->cpu_diff<float>()[1]));
  s->ClearGradients();  // after a skipped step this clears
  EXPECT_EQ(bias.cpu_diff<float>()[0], 0.f);
  EXPECT_EQ(net.learnable_params()[0]->cpu_diff<float>()[1], 0.f);
}

TEST(Solver, IterSizeAveragesGradients) {
  auto one = make_solver("base_lr: 0.5 lr_policy: 'fixed' max_iter: 1", kLinear);
  auto two = make_solver("base_lr: 0.5 lr_policy: 'fixed' max_iter: 1 iter_size: 2", kLinear);
  one->Step(1);
  two->Step(1);
  EXPECT_FLOAT_EQ(one->net()->learnable_params()[1]->cpu_data<float>()[0],
                  two->net()->learnable_params()[1]->cpu_data<float>()[0]);
  EXPECT_FLOAT_EQ(two->net()->learnable_params()[1]->cpu_data<float>()[0], 0.0f);  // 1 - 0.5 * 2
}

TEST(Solver, L1Regularization) {
  auto s = make_solver("base_lr: 0.5 lr_policy: 'fixed' weight_decay: 0.2 regularization_type: 'L1' max_iter: 1",
                       kLinear);
  s->Step(1);
  EXPECT_NEAR(s->net()->learnable_params()[0]->cpu_data<float>()[0], 0.5 - 0.5 * 0.2, 1e-7);
}

// A small classifier with random data refilled every forward pass (drawn
// from the solver's generator) and dropout: resume must restore the
// generator too.
std::string classifier(const char* type) {
  return str_cat("default_forward_type: ", type, " default_backward_type: ", type, R"(
  layer { name: "x" type: "DummyData" top: "x" top: "label"
    dummy_data_param { shape { dim: 8 dim: 6 } shape { dim: 8 } data_filler { type: "gaussian" } data_filler { type: "constant" value: 2 } } }
  layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h" inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
  layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
  layer { name: "drop" type: "Dropout" bottom: "h" top: "h" dropout_param { dropout_ratio: 0.3 } }
  layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y" inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "y" bottom: "label" top: "loss" })");
}

// The learnable parameters of two solvers' nets, bit for bit.
void ExpectSameWeights(Solver& x, Solver& y) {
  const auto& a = x.net()->learnable_params();
  const auto& b = y.net()->learnable_params();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t k = 0; k < a[i]->count(); ++k)
      ASSERT_EQ(a[i]->cpu_data<float>()[k], b[i]->cpu_data<float>()[k]) << "param " << i << " index " << k;
}

class SolverResume : public ::testing::TestWithParam<const char*> {};

TEST_P(SolverResume, SnapshotThenResumeIsBitIdentical) {
  const fs::path dir = fs::temp_directory_path() / str_cat("cortado_resume_", getpid(), "_", GetParam());
  fs::create_directories(dir);
  const std::string solver = str_cat("base_lr: 0.05 lr_policy: 'inv' gamma: 0.01 power: 0.75 momentum: 0.9 ",
                                     "weight_decay: 0.001 random_seed: 7 max_iter: 20 snapshot: 10 snapshot_prefix: '",
                                     (dir / "run").string(), "'");
  auto full = make_solver(solver, classifier(GetParam()));
  full->Solve();
  ASSERT_TRUE(fs::exists(dir / "run_iter_10.caffemodel"));
  ASSERT_TRUE(fs::exists(dir / "run_iter_10.solverstate"));
  ASSERT_FALSE(fs::exists(dir / "run_iter_10.caffemodel.tmp"));
  set_random_seed(12345);  // disturb the generator: the state file must restore it
  auto resumed = make_solver(solver, classifier(GetParam()));
  resumed->Solve((dir / "run_iter_10.solverstate").string());
  EXPECT_EQ(resumed->iter(), 20);
  ExpectSameWeights(*full, *resumed);
  const auto& a = full->net()->learnable_params();
  // And the run actually trained: the weights moved away from the snapshot.
  NetParameter w10;
  ReadBinaryProto((dir / "run_iter_10.caffemodel").string(), &w10);
  EXPECT_NE(w10.layer(1).blobs(0).data(0), a[0]->cpu_data<float>()[0]);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Types, SolverResume, ::testing::Values("FLOAT", "FLOAT16", "BFLOAT16"));

TEST(Solver, ActionSnapshotThenStop) {
  const fs::path dir = fs::temp_directory_path() / str_cat("cortado_action_", getpid());
  fs::create_directories(dir);
  auto s = make_solver(str_cat("base_lr: 0.01 lr_policy: 'fixed' max_iter: 100 snapshot_prefix: '", (dir / "a").string(),
                               "'"),
                       kLinear);
  int calls = 0;
  s->set_action_function([&] {
    ++calls;
    return calls == 3 ? SolverAction::SNAPSHOT : calls == 5 ? SolverAction::STOP : SolverAction::NONE;
  });
  s->Solve();
  EXPECT_TRUE(s->requested_early_exit());
  EXPECT_EQ(s->iter(), 5);
  EXPECT_TRUE(fs::exists(dir / "a_iter_3.caffemodel"));
  EXPECT_TRUE(fs::exists(dir / "a_iter_3.solverstate"));
  // The stop itself snapshots (Caffe's snapshot_after_train at an early stop).
  EXPECT_TRUE(fs::exists(dir / "a_iter_5.caffemodel"));
  EXPECT_TRUE(fs::exists(dir / "a_iter_5.solverstate"));
  fs::remove_all(dir);
}

// An interrupted run (SIGINT's default action, stop) loses nothing: the stop
// snapshots, and resuming from it ends with the bits of a run that never
// stopped, dropout's generator included.
TEST(Solver, StopSnapshotsAndResumesToTheBitsOfAnUninterruptedRun) {
  const fs::path dir = fs::temp_directory_path() / str_cat("cortado_stop_", getpid());
  fs::create_directories(dir);
  const std::string solver = str_cat("base_lr: 0.05 lr_policy: 'inv' gamma: 0.01 power: 0.75 momentum: 0.9 ",
                                     "random_seed: 3 max_iter: 12 display: 4 snapshot_prefix: '", (dir / "s").string(),
                                     "'");
  auto full = make_solver(solver, classifier("FLOAT16"));
  full->Solve();
  set_random_seed(999);
  auto stopped = make_solver(solver, classifier("FLOAT16"));
  int calls = 0;
  stopped->set_action_function([&] { return ++calls == 7 ? SolverAction::STOP : SolverAction::NONE; });
  stopped->Solve();
  ASSERT_EQ(stopped->iter(), 7);
  ASSERT_TRUE(fs::exists(dir / "s_iter_7.solverstate"));
  set_random_seed(12345);
  auto resumed = make_solver(solver, classifier("FLOAT16"));
  resumed->Solve((dir / "s_iter_7.solverstate").string());
  EXPECT_EQ(resumed->iter(), 12);
  ExpectSameWeights(*full, *resumed);
  fs::remove_all(dir);
}

TEST(Solver, SignalHandlerMapsSignals) {
  SignalHandler h(SolverAction::SNAPSHOT, SolverAction::STOP);
  EXPECT_EQ(h.CheckForSignals(), SolverAction::NONE);
  std::raise(SIGINT);
  EXPECT_EQ(h.CheckForSignals(), SolverAction::SNAPSHOT);
  EXPECT_EQ(h.CheckForSignals(), SolverAction::NONE);
  std::raise(SIGHUP);
  EXPECT_EQ(h.CheckForSignals(), SolverAction::STOP);
  EXPECT_THROW(ParseSolverAction("sigint_effect", "explode"), Error);
}

}  // namespace
}  // namespace cortado
