// NVCaffe's schedules under NVCaffe's names: the quadratic warm-up, min_lr
// under every policy, Cortado's linear warm-up under its own field, the
// plateau policy (and its state across a snapshot), the momentum and
// weight-decay policies, and LARC (scale, clip, turbo). Every expected value
// is computed here from NVCaffe's formulas (its sgd_solver.cpp), never by
// calling Cortado's code.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cortado/io/proto_io.hpp"
#include "cortado/solvers/solver.hpp"
#include "temp_dir.hpp"

namespace cortado {
namespace {

// loss = sum(W x + b) over a batch of 2 with x = 1 everywhere: dL/dW = 2 and
// dL/db = 2 for every value. W (2, 3) starts at `w0`, b (2) at `b0`; the
// bias has lr_mult 2.
std::string LinearNet(double w0, double b0, const std::string& extra = "") {
  return str_cat(extra, R"(
  layer { name: "x" type: "DummyData" top: "x" dummy_data_param { shape { dim: 2 dim: 3 } data_filler { type: "constant" value: 1 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" param { lr_mult: 1 } param { lr_mult: 2 }
    inner_product_param { num_output: 2 weight_filler { type: "constant" value: )",
                 w0, R"( } bias_filler { type: "constant" value: )", b0, R"( } } }
  layer { name: "l" type: "Flatten" bottom: "y" top: "loss" loss_weight: 1 })");
}

// loss = 2 * (relu(b0) + relu(b1)) with x = 0 and b starting at 1: each SGD
// step at rate r lowers b by 2r while b > 0, then the loss stays 0.
const char* kReluNet = R"(
  layer { name: "x" type: "DummyData" top: "x" dummy_data_param { shape { dim: 2 dim: 3 } data_filler { type: "constant" value: 0 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
    inner_product_param { num_output: 2 weight_filler { type: "constant" value: 0.5 } bias_filler { type: "constant" value: 1 } } }
  layer { name: "relu" type: "ReLU" bottom: "y" top: "y" }
  layer { name: "l" type: "Flatten" bottom: "y" top: "loss" loss_weight: 1 })";

std::unique_ptr<Solver> MakeSolver(const std::string& solver_text, const std::string& net_text) {
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto(solver_text, "solver.prototxt", &sp, &info);
  ParseTextProto(net_text, "net.prototxt", sp.mutable_net_param());
  return Solver::Create(sp, info);
}

// The solver text must fail validation with a message containing `want`.
void ExpectRejected(const std::string& solver_text, const std::string& want) {
  try {
    MakeSolver(solver_text, LinearNet(0.5, 1));
    ADD_FAILURE() << "accepted: " << solver_text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

// Relative tolerance for rates that NVCaffe computes in float and Cortado in
// double from the same float fields.
void ExpectRate(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-6 * std::fabs(want) + 1e-12) << what;
}

const double kBase = 0.1f;  // base_lr 0.1 as the float field holds it

TEST(SolverSchedules, QuadraticWarmUp) {
  // NVCaffe: rampup_lr + (base_lr - rampup_lr) * (iter / rampup_interval)^2.
  auto s = MakeSolver("base_lr: 0.1 lr_policy: 'fixed' rampup_interval: 10 rampup_lr: 0.02 max_iter: 20",
                      LinearNet(0.5, 1));
  const double r0 = 0.02f;
  for (int it : {0, 1, 3, 5, 9}) {
    const double a = it / 10.0;
    ExpectRate(s->GetLearningRate(it), r0 + (kBase - r0) * a * a, str_cat("iter ", it));
  }
  ExpectRate(s->GetLearningRate(5), 0.04, "iter 5, by hand: 0.02 + 0.08 / 4");
  ExpectRate(s->GetLearningRate(10), kBase, "after the warm-up");
  // rampup_lr unset: from 0.
  auto z = MakeSolver("base_lr: 0.1 lr_policy: 'fixed' rampup_interval: 4 max_iter: 20", LinearNet(0.5, 1));
  ExpectRate(z->GetLearningRate(0), 0, "iter 0");
  ExpectRate(z->GetLearningRate(2), kBase * 0.25, "iter 2");
  // The policy starts after the warm-up at the iteration's own value.
  auto st = MakeSolver("base_lr: 0.1 lr_policy: 'step' gamma: 0.5 stepsize: 3 rampup_interval: 4 max_iter: 20",
                       LinearNet(0.5, 1));
  ExpectRate(st->GetLearningRate(3), kBase * 9 / 16, "in the warm-up");
  ExpectRate(st->GetLearningRate(4), kBase * 0.5, "step policy at iter 4");
  // The rate the step actually used: b1 = b0 - lr_mult * rate(0) * dL/db.
  auto trained = MakeSolver("base_lr: 0.1 lr_policy: 'fixed' rampup_interval: 2 rampup_lr: 0.04 max_iter: 5",
                            LinearNet(0.5, 1));
  trained->Step(2);
  const double rate0 = 0.04f, rate1 = 0.04f + (kBase - 0.04f) * 0.25;
  EXPECT_NEAR(trained->net()->learnable_params()[1]->cpu_data<float>()[0], 1 - 2 * 2 * (rate0 + rate1), 1e-6);
}

TEST(SolverSchedules, MinLrClampsEveryPolicy) {
  struct Case {
    std::string text;
    std::function<double(int)> want;
  };
  const double lo = 0.005f;
  const std::vector<Case> cases = {
      // 0.1, 0.1, 0.01, 0.01, 0.001 -> 0.005
      {"lr_policy: 'step' gamma: 0.1 stepsize: 2", [&](int it) { return std::max(kBase * std::pow(0.1, it / 2), lo); }},
      {"lr_policy: 'exp' gamma: 0.5", [&](int it) { return std::max(kBase * std::pow(0.5, it), lo); }},
      {"lr_policy: 'multistep' gamma: 0.01 stepvalue: 3",
       [&](int it) { return std::max(kBase * std::pow(0.01, it >= 3), lo); }},
      {"lr_policy: 'inv' gamma: 1 power: 2", [&](int it) { return std::max(kBase / ((1.0 + it) * (1.0 + it)), lo); }},
      // poly decays to min_lr: (base - min_lr) * (1 - it/max_iter)^power + min_lr.
      {"lr_policy: 'poly' power: 2", [&](int it) { return (kBase - lo) * std::pow(1 - it / 10.0, 2) + lo; }},
  };
  for (const Case& c : cases) {
    auto s = MakeSolver("base_lr: 0.1 min_lr: 0.005 max_iter: 10 " + c.text, LinearNet(0.5, 1));
    for (int it = 0; it <= 10; ++it) ExpectRate(s->GetLearningRate(it), c.want(it), str_cat(c.text, " at ", it));
  }
  // By hand: step at iteration 4 would be 0.001; poly at 5 is 0.095/4 + 0.005.
  auto step = MakeSolver("base_lr: 0.1 min_lr: 0.005 max_iter: 10 lr_policy: 'step' gamma: 0.1 stepsize: 2",
                         LinearNet(0.5, 1));
  ExpectRate(step->GetLearningRate(4), lo, "step, iter 4");
  auto poly = MakeSolver("base_lr: 0.1 min_lr: 0.005 max_iter: 10 lr_policy: 'poly' power: 2", LinearNet(0.5, 1));
  ExpectRate(poly->GetLearningRate(5), (kBase - lo) / 4 + lo, "poly, iter 5");
  ExpectRate(poly->GetLearningRate(10), lo, "poly, iter 10");
  // The warm-up is clamped too: rampup_lr 0 starts at min_lr.
  auto warm = MakeSolver("base_lr: 0.1 min_lr: 0.005 lr_policy: 'fixed' rampup_interval: 10 max_iter: 20",
                         LinearNet(0.5, 1));
  ExpectRate(warm->GetLearningRate(0), lo, "warm-up, iter 0");
  ExpectRate(warm->GetLearningRate(1), lo, "warm-up, iter 1 (0.001 < min_lr)");
  ExpectRate(warm->GetLearningRate(5), kBase * 0.25, "warm-up, iter 5");
}

TEST(SolverSchedules, LinearRampUpKeepsCortadosFormula) {
  // rampup_lr + (base_lr - rampup_lr) * iter / linear_rampup_interval, then the policy.
  auto s = MakeSolver("base_lr: 0.1 lr_policy: 'step' gamma: 0.5 stepsize: 6 linear_rampup_interval: 4 "
                      "rampup_lr: 0.02 max_iter: 20",
                      LinearNet(0.5, 1));
  const double r0 = 0.02f;
  for (int it = 0; it < 4; ++it) ExpectRate(s->GetLearningRate(it), r0 + (kBase - r0) * it / 4.0, str_cat("iter ", it));
  ExpectRate(s->GetLearningRate(2), 0.06, "iter 2, by hand");
  ExpectRate(s->GetLearningRate(4), kBase, "iter 4");
  ExpectRate(s->GetLearningRate(6), kBase / 2, "iter 6");
  ExpectRejected("base_lr: 0.1 lr_policy: 'fixed' rampup_interval: 4 linear_rampup_interval: 4",
                 "linear_rampup_interval: and rampup_interval");
  ExpectRejected("base_lr: 0.1 lr_policy: 'fixed' linear_rampup_interval: -1", "linear_rampup_interval: must not");
}

TEST(SolverSchedules, PlateauLowersTheRateWhenTheLossStopsFalling) {
  // Rate 0.15: b = 1, 0.7, 0.4, 0.1, -0.2 at iterations 0-4, so the loss
  // (4 b while b > 0) falls to a new minimum at iterations 0-4 and stays 0
  // after. plateau_winsize 2, 3: the step rises at 6 (4 + 2) and 9 (6 + 3),
  // then no more (two entries).
  const double base = 0.15f, gamma = 0.5f;
  const std::string text = "base_lr: 0.15 lr_policy: 'plateau' gamma: 0.5 plateau_winsize: 2 plateau_winsize: 3 "
                           "max_iter: 20";
  auto s = MakeSolver(text, kReluNet);
  std::vector<double> used;
  for (int it = 0; it < 12; ++it) {
    s->Step(1);
    used.push_back(s->GetLearningRate());  // the rate iteration `it` updated with
  }
  for (int it = 0; it < 12; ++it) {
    const int k = (it >= 6) + (it >= 9);
    ExpectRate(used[it], base * std::pow(gamma, k), str_cat("iteration ", it));
  }
  EXPECT_NEAR(s->net()->learnable_params()[1]->cpu_data<float>()[0], 1 - 4 * 2 * base, 1e-6);

  // The state goes into the snapshot and comes back: a run restored at 7
  // steps again at 9, not 7 + 3.
  test::TempDir dir;
  auto a = MakeSolver(str_cat(text, " snapshot_prefix: '", dir / "p", "'"), kReluNet);
  a->Step(7);
  a->Snapshot();
  SolverState state;
  ReadBinaryProto(dir / "p_iter_7.solverstate", &state);
  EXPECT_EQ(state.current_step(), 1);
  EXPECT_EQ(state.iter_last_event(), 6);
  EXPECT_EQ(state.minimum_loss(), 0.f);
  auto b = MakeSolver(text, kReluNet);
  b->Restore(dir / "p_iter_7.solverstate");
  ExpectRate(b->GetLearningRate(), base * gamma, "restored at 7");
  b->Step(2);  // iterations 7 and 8
  ExpectRate(b->GetLearningRate(), base * gamma, "after 8");
  b->Step(1);  // iteration 9
  ExpectRate(b->GetLearningRate(), base * gamma * gamma, "after 9");

  ExpectRejected("base_lr: 0.1 lr_policy: 'plateau'", "lr_policy: plateau needs at least one plateau_winsize");
  ExpectRejected("base_lr: 0.1 lr_policy: 'plateau' plateau_winsize: 0", "plateau_winsize: must be positive");
}

TEST(SolverSchedules, MomentumPolicies) {
  // poly: momentum + (max_momentum - momentum) * (iter / max_iter)^momentum_power.
  auto poly = MakeSolver("type: 'SGD' base_lr: 0.1 lr_policy: 'fixed' momentum: 0.5 momentum_policy: 'poly' "
                         "max_momentum: 0.9 momentum_power: 2 max_iter: 10",
                         LinearNet(0.5, 1));
  const double m0 = 0.5f, m1 = 0.9f;
  for (int it : {0, 1, 5, 10}) {
    const double a = it / 10.0;
    ExpectRate(poly->GetMomentum(it), m0 + (m1 - m0) * a * a, str_cat("poly at ", it));
  }
  ExpectRate(poly->GetMomentum(5), 0.6, "poly at 5, by hand");
  // The update uses it: H1 = r g, H2 = m(1) H1 + r g (g = 2, r = 0.1 * lr_mult 2 on the bias).
  poly->Step(2);
  const double r = 2 * kBase, h1 = r * 2, h2 = (m0 + (m1 - m0) * 0.01) * h1 + r * 2;
  EXPECT_NEAR(poly->net()->learnable_params()[1]->cpu_data<float>()[0], 1 - h1 - h2, 1e-6);

  // opt: (1 - sqrt(rate) / 2)^2, capped by max_momentum only where it is set.
  auto opt = MakeSolver("type: 'SGD' base_lr: 0.04 lr_policy: 'step' gamma: 0.25 stepsize: 5 momentum_policy: 'opt' "
                        "max_iter: 10",
                        LinearNet(0.5, 1));
  const double lr0 = 0.04f;
  const double want0 = std::pow(1 - 0.5 * std::sqrt(lr0), 2);
  ExpectRate(opt->GetMomentum(0), want0, "opt at 0");
  ExpectRate(opt->GetMomentum(0), 0.81, "opt at 0, by hand: (1 - 0.1)^2");
  ExpectRate(opt->GetMomentum(5), std::pow(1 - 0.5 * std::sqrt(lr0 * 0.25), 2), "opt at 5 (rate 0.01)");
  auto capped = MakeSolver("type: 'SGD' base_lr: 0.04 lr_policy: 'fixed' momentum_policy: 'opt' max_momentum: 0.8 "
                           "max_iter: 10",
                           LinearNet(0.5, 1));
  ExpectRate(capped->GetMomentum(0), 0.8f, "opt capped");
  // Nesterov follows the policy too: H' = m H + r g; W = W - ((1 + m) H' - m H)
  // with m = 0.5 at iteration 0 and 0.54 at 1 (momentum_power 1).
  auto nesterov = MakeSolver("type: 'Nesterov' base_lr: 0.1 lr_policy: 'fixed' momentum: 0.5 momentum_policy: 'poly' "
                             "max_momentum: 0.9 max_iter: 10",
                             LinearNet(0.5, 1));
  nesterov->Step(2);
  const double n1 = r * 2, b1 = 1 - 1.5 * n1;
  const double mn = m0 + (m1 - m0) * 0.1, n2 = mn * n1 + r * 2, b2 = b1 - ((1 + mn) * n2 - mn * n1);
  EXPECT_NEAR(nesterov->net()->learnable_params()[1]->cpu_data<float>()[0], b2, 1e-6);

  ExpectRejected("base_lr: 0.1 lr_policy: 'fixed' momentum_policy: 'cosine'", "momentum_policy: unknown policy 'cosine'");
  ExpectRejected("base_lr: 0.1 lr_policy: 'fixed' momentum_policy: 'poly'", "momentum_policy: poly needs max_iter");
}

TEST(SolverSchedules, WeightDecayPolicies) {
  // poly: weight_decay + (max_weight_decay - weight_decay) * (iter / max_iter)^weight_decay_power.
  auto s = MakeSolver("type: 'SGD' base_lr: 0.1 lr_policy: 'fixed' weight_decay: 0.1 weight_decay_policy: 'poly' "
                      "max_weight_decay: 0.3 weight_decay_power: 1 max_iter: 10",
                      LinearNet(0.5, 1));
  const double d0 = 0.1f, d1 = 0.3f;
  for (int it : {0, 2, 5, 10}) ExpectRate(s->GetWeightDecay(it), d0 + (d1 - d0) * it / 10.0, str_cat("iter ", it));
  ExpectRate(s->GetWeightDecay(5), 0.2, "iter 5, by hand");
  // W = W - r (g + wd(it) W) without momentum: wd 0.1, then 0.12.
  s->Step(2);
  const double w1 = 0.5 - kBase * (2 + d0 * 0.5);
  const double w2 = w1 - kBase * (2 + (d0 + (d1 - d0) * 0.1) * w1);
  EXPECT_NEAR(s->net()->learnable_params()[0]->cpu_data<float>()[0], w2, 1e-6);
  EXPECT_NEAR(s->GetWeightDecay(0), d0, 1e-9);
  ExpectRejected("base_lr: 0.1 lr_policy: 'fixed' weight_decay_policy: 'step'",
                 "weight_decay_policy: unknown policy 'step'");
}

// NVCaffe's LARC on the linear net: W (6 values) = 0.5, b (2) = 1, g = 2
// everywhere (before the decay). Momentum 0.9, larc_eta 0.02, weight_decay
// 0.1, base_lr 0.5: t = (1 - 0.9) * 0.02 * |W| / |g|.
struct Larc {
  double m = 0.9f, eta = 0.02f, wd = 0.1f, lr = 0.5f;
  // One parameter of constant value v with gradient 2: |W| / |g| = v / 2.
  double Trust(double v) const { return (1 - m) * eta * v / 2; }
};

std::string LarcSolver(const std::string& policy, const std::string& extra = "") {
  return str_cat("type: 'SGD' base_lr: 0.5 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.1 larc: true "
                 "larc_eta: 0.02 larc_policy: '",
                 policy, "' max_iter: 10 ", extra);
}

TEST(SolverSchedules, LarcScale) {
  const Larc c;
  // The loss scale must be divided out before the norm: 8 here.
  auto s = MakeSolver(LarcSolver("scale"), LinearNet(0.5, 1, "global_grad_scale: 8"));
  s->Step(1);
  // By hand: t_W = 0.1 * 0.02 * 0.25 = 0.0005, t_b = 0.001; lr_mult 2 of
  // the bias does not enter (t takes its place).
  EXPECT_NEAR(c.Trust(0.5), 0.0005, 1e-9);
  const double w1 = 0.5 - c.lr * c.Trust(0.5) * (2 + c.wd * 0.5);
  const double b1 = 1 - c.lr * c.Trust(1) * (2 + c.wd * 1);
  EXPECT_NEAR(w1, 0.4994875, 1e-9);
  EXPECT_NEAR(s->net()->learnable_params()[0]->cpu_data<float>()[0], w1, 2e-7);
  EXPECT_NEAR(s->net()->learnable_params()[1]->cpu_data<float>()[1], b1, 2e-7);
  // A norm of 0 gives t = 1 (and still replaces lr_mult): W = 0, b = 0.
  auto zero = MakeSolver(LarcSolver("scale"), LinearNet(0, 0));
  zero->Step(1);
  EXPECT_NEAR(zero->net()->learnable_params()[0]->cpu_data<float>()[0], -c.lr * 2, 1e-6);
  EXPECT_NEAR(zero->net()->learnable_params()[1]->cpu_data<float>()[0], -c.lr * 2, 1e-6);
}

TEST(SolverSchedules, LarcClip) {
  const Larc c;
  // min(rate, t): t is the smaller at base_lr 0.5 ...
  auto s = MakeSolver(LarcSolver("clip"), LinearNet(0.5, 1));
  s->Step(1);
  EXPECT_NEAR(s->net()->learnable_params()[0]->cpu_data<float>()[0], 0.5 - c.Trust(0.5) * (2 + c.wd * 0.5), 2e-7);
  EXPECT_NEAR(s->net()->learnable_params()[1]->cpu_data<float>()[0], 1 - c.Trust(1) * (2 + c.wd), 2e-7);
  // ... and the rate at base_lr 0.0002, for the bias too (its lr_mult 2 does not enter).
  auto low = MakeSolver("type: 'SGD' base_lr: 0.0002 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.1 larc: true "
                        "larc_eta: 0.02 larc_policy: 'clip' max_iter: 10",
                        LinearNet(0.5, 1));
  low->Step(1);
  const double r = 0.0002f;
  EXPECT_NEAR(low->net()->learnable_params()[0]->cpu_data<float>()[0], 0.5 - r * (2 + c.wd * 0.5), 2e-7);
  EXPECT_NEAR(low->net()->learnable_params()[1]->cpu_data<float>()[0], 1 - r * (2 + c.wd), 2e-7);
  ExpectRejected("base_lr: 0.5 lr_policy: 'fixed' larc: true larc_policy: 'squash'", "larc_policy: unknown policy");
}

TEST(SolverSchedules, LarcTurbo) {
  const Larc c;
  auto s = MakeSolver(LarcSolver("scale", "larc_turbo: true"), LinearNet(0.5, 1));
  // g = 2 and H are constant vectors, so the cosine of the two is the sign
  // of H (0 while H = 0): c = 0 at step 1 (C = 0, plain t); c = 1 at step 2
  // (C = 0.05, t = t_plain - 0.045: NVCaffe's correction, which here turns
  // t and then H negative), so c = -1 at step 3 (C = 0.0475 - 0.05).
  struct P {
    double v, h = 0, corr = 0;
  };
  P w{0.5}, b{1};
  auto step_by_hand = [&](P* p) {
    const double cos = p->h == 0 ? 0 : p->h > 0 ? 1 : -1;
    p->corr = 0.95 * p->corr + 0.05 * cos;
    const double t = c.Trust(p->v) - 0.9 * p->corr;
    p->h = c.m * p->h + c.lr * t * (2 + c.wd * p->v);
    p->v -= p->h;
  };
  for (int step = 0; step < 3; ++step) {
    step_by_hand(&w);
    step_by_hand(&b);
    s->Step(1);
    EXPECT_NEAR(s->net()->learnable_params()[0]->cpu_data<float>()[3], w.v, 1e-6 * std::fabs(w.v)) << "step " << step;
    EXPECT_NEAR(s->net()->learnable_params()[1]->cpu_data<float>()[0], b.v, 1e-6 * std::fabs(b.v)) << "step " << step;
  }
}

// larc_turbo's running correlation goes into the state: a run resumed at
// iteration 2 ends with the bits of one that never stopped.
TEST(SolverSchedules, LarcTurboResumesBitIdentical) {
  test::TempDir dir;
  const std::string text = LarcSolver("scale", str_cat("larc_turbo: true snapshot_prefix: '", dir / "t", "'"));
  auto full = MakeSolver(text, LinearNet(0.5, 1));
  full->Step(4);
  auto first = MakeSolver(text, LinearNet(0.5, 1));
  first->Step(2);
  first->Snapshot();
  SolverState state;
  ReadBinaryProto(dir / "t_iter_2.solverstate", &state);
  ASSERT_EQ(state.larc_turbo_correlation_size(), 2);
  EXPECT_NEAR(state.larc_turbo_correlation(0), 0.05, 1e-9);
  auto resumed = MakeSolver(text, LinearNet(0.5, 1));
  resumed->Restore(dir / "t_iter_2.solverstate");
  resumed->Step(2);
  for (size_t i = 0; i < 2; ++i)
    for (size_t k = 0; k < full->net()->learnable_params()[i]->count(); ++k)
      ASSERT_EQ(full->net()->learnable_params()[i]->cpu_data<float>()[k],
                resumed->net()->learnable_params()[i]->cpu_data<float>()[k])
          << "param " << i << " index " << k;
}

TEST(SolverSchedules, RateFieldsAreValidated) {
  ExpectRejected("base_lr: 0.1 lr_policy: 'fixed' min_lr: -0.1", "min_lr: must not be negative");
  ExpectRejected("base_lr: 0.1 lr_policy: 'poly' min_lr: 0.2 max_iter: 5", "min_lr: = 0.2 exceeds base_lr");
  ExpectRejected("base_lr: 0.1\nlr_policy: 'cosine'", "solver.prototxt:2: lr_policy: unknown policy 'cosine'");
}

}  // namespace
}  // namespace cortado
