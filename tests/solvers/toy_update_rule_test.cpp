// A new update rule is one definition: this file defines a Lion-like rule
// (Chen et al. 2023), registers it, and trains with it through
// Solver::Create like any built-in rule.
//
//   c = b1 * m + (1 - b1) * g          (b1 = momentum)
//   W = W - rate * sign(c) - rate * decay * W    (decoupled decay)
//   m = b2 * m + (1 - b2) * g          (b2 = momentum2; one history slot)
//
// The rule's fused GPU update: its kernel is instantiated where nvcc compiles
// the rule, so in a CUDA build CMake compiles this file as CUDA and the rule
// registers gpu::KernelUpdate<Rule> (src/cortado/solvers/update_kernel.cuh)
// beside its host loop, as solvers/builtin_rules.hpp does for the built-in rules.
// Compiled by the host compiler (a CPU build), the rule has the host loop
// only, which a GPU context would run too.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/context.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/solvers/update_rule.hpp"
#include "temp_dir.hpp"
#ifdef CORTADO_USE_CUDA
#include "cortado/util/cuda.hpp"
#endif
#ifdef __CUDACC__
#include "../../src/cortado/solvers/update_kernel.cuh"
#endif

namespace cortado {
namespace {

struct ToyLionRule : UpdateRuleBase {
  static constexpr const char* kType = "ToyLion";
  static constexpr int kSlots = 1;
  static constexpr bool kDecoupledDecay = true;
  struct Hyper {
    double b1, b2;
  };
  static Hyper MakeHyper(const RuleContext& c) { return {c.param.momentum(), c.param.momentum2()}; }
  static void Validate(const RuleFields& f) {
    if (!(f.param.momentum2() >= 0 && f.param.momentum2() < 1))
      f.Fail("momentum2", str_cat("must lie in [0, 1) for ToyLion, got ", f.param.momentum2()));
  }
  template <typename M> struct Scalars {
    M rate, b1, b2, wd;
  };
  template <typename M> CORTADO_HD static Scalars<M> Prepare(const Hyper& h, double rate, double decay) {
    return {M(rate), M(h.b1), M(h.b2), M(rule_math::mul(rate, decay))};
  }
  template <typename M, typename Round>
  CORTADO_HD static M Step(const Scalars<M>& s, M g, M w, M* h, const Round&) {
    using rule_math::mul;
    const M c = mul(s.b1, h[0]) + mul(M(1) - s.b1, g);
    h[0] = mul(s.b2, h[0]) + mul(M(1) - s.b2, g);
    return w - mul(s.rate, rule_math::sign(c)) - mul(s.wd, w);
  }
};

UpdateRuleInfo ToyLion() {
#ifdef __CUDACC__
  return MakeUpdateRule<ToyLionRule>(&gpu::KernelUpdate<ToyLionRule>);
#else
  return MakeUpdateRule<ToyLionRule>();
#endif
}

void RegisterToyLion() {
  static const bool once = (RegisterUpdateRule(ToyLion()), true);
  (void)once;
}

// x (8, 4) uniform in [-1, 1], redrawn every forward; y = W x + b regressed
// onto 0.5 by a Euclidean loss. W's lr_mult is 1, b's 2 (decay_mult 0).
const char* kNet = R"(
  layer { name: "d" type: "DummyData" top: "x" top: "t"
    dummy_data_param { shape { dim: 8 dim: 4 } shape { dim: 8 dim: 2 }
                       data_filler { type: "uniform" min: -1 max: 1 } data_filler { type: "constant" value: 0.5 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
    param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
    inner_product_param { num_output: 2 weight_filler { type: "uniform" min: -1 max: 1 } } }
  layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "loss" })";

const char* kSolver =
    "type: 'ToyLion' base_lr: 0.01 momentum: 0.9 momentum2: 0.99 weight_decay: 0.1 lr_policy: 'fixed' "
    "max_iter: 100 random_seed: 5";

std::unique_ptr<Solver> MakeToySolver(const std::string& solver_text, std::shared_ptr<const Context> ctx = nullptr) {
  RegisterToyLion();
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto(solver_text, "solver.prototxt", &sp, &info);
  ParseTextProto(kNet, "net.prototxt", sp.mutable_net_param());
  return Solver::Create(sp, info, SolverSetup(std::move(ctx)));
}

std::vector<float> Values(const Blob& b) {
  const float* v = b.cpu_data<float>();
  return std::vector<float>(v, v + b.count());
}

// The mean loss of 20 forwards (fresh inputs each).
double MeanLoss(Solver& s) {
  double sum = 0;
  for (int i = 0; i < 20; ++i) sum += s.net()->Forward();
  return sum / 20;
}

TEST(ToyUpdateRule, IsASolverType) {
  RegisterToyLion();
  const std::vector<std::string> types = Solver::Types();
  EXPECT_TRUE(std::is_sorted(types.begin(), types.end()));
  EXPECT_NE(std::find(types.begin(), types.end(), "ToyLion"), types.end());
  auto s = MakeToySolver(kSolver);
  EXPECT_STREQ(s->type(), "ToyLion");
  EXPECT_EQ(s->rule().history_slots, 1);
  EXPECT_TRUE(s->rule().decoupled_decay);
#ifdef __CUDACC__
  EXPECT_NE(s->rule().update_gpu, nullptr);
#else
  EXPECT_EQ(s->rule().update_gpu, nullptr);  // compiled by the host compiler: the host loop only
#endif
}

TEST(ToyUpdateRule, RegisteringATypeTwiceIsAnError) {
  RegisterToyLion();
  try {
    RegisterUpdateRule(ToyLion());
    ADD_FAILURE() << "registered twice";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("update rule 'ToyLion' is already registered"), std::string::npos) << e.what();
  }
}

TEST(ToyUpdateRule, ValidatesItsFieldsNamingTheLine) {
  try {
    MakeToySolver("type: 'ToyLion' base_lr: 0.01 lr_policy: 'fixed'\nmomentum2: 1.5");
    ADD_FAILURE() << "accepted momentum2 1.5";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("solver.prototxt:2: momentum2: must lie in [0, 1) for ToyLion, got 1.5"),
              std::string::npos)
        << e.what();
  }
}

// Two steps, each checked value by value against the formula above in float:
// the solver hands the rule the gradient, the rate times lr_mult, the decay
// times decay_mult, and stores what the rule returns.
TEST(ToyUpdateRule, StepsAreTheRulesFormula) {
  auto s = MakeToySolver(kSolver);
  const std::vector<Blob*>& params = s->net()->learnable_params();
  ASSERT_EQ(params.size(), 2u);
  std::vector<std::vector<float>> grads;
  s->set_after_backward([&](Solver& solver) {
    grads.clear();
    for (const Blob* p : solver.net()->learnable_params()) {
      const float* d = p->cpu_diff<float>();
      grads.emplace_back(d, d + p->count());
    }
  });
  const float b1 = 0.9f, b2 = 0.99f;
  const double lr_mult[2] = {1, 2}, decay_mult[2] = {1, 0};
  for (int step = 0; step < 2; ++step) {
    std::vector<std::vector<float>> w(2), m(2);
    for (int p = 0; p < 2; ++p) {
      w[p] = Values(*params[p]);
      m[p] = Values(s->history(p, 0));
    }
    s->Step(1);
    ASSERT_FALSE(s->last_step_skipped());
    for (int p = 0; p < 2; ++p) {
      const float rate = static_cast<float>(0.01f * lr_mult[p]);
      const float wd = static_cast<float>(0.01f * lr_mult[p] * (0.1f * decay_mult[p]));
      const std::vector<float> got_w = Values(*params[p]), got_m = Values(s->history(p, 0));
      for (size_t i = 0; i < w[p].size(); ++i) {
        const float g = grads[p][i];
        const float c = b1 * m[p][i] + (1 - b1) * g;
        const float sign = static_cast<float>((c > 0) - (c < 0));
        ASSERT_NE(sign, 0.0f);
        EXPECT_EQ(got_w[i], w[p][i] - rate * sign - wd * w[p][i]) << "step " << step << " param " << p << " index " << i;
        EXPECT_EQ(got_m[i], b2 * m[p][i] + (1 - b2) * g) << "step " << step << " param " << p << " index " << i;
      }
    }
  }
}

TEST(ToyUpdateRule, TrainsANet) {
  auto s = MakeToySolver(kSolver);
  const double before = MeanLoss(*s);
  s->Step(100);
  const double after = MeanLoss(*s);
  EXPECT_LT(after, before / 4) << "loss " << before << " -> " << after;
}

// Its history is snapshotted and restored like a built-in rule's: a run
// resumed at step 3 ends on the bits of the run that never stopped.
TEST(ToyUpdateRule, ResumeIsBitIdentical) {
  test::TempDir dir;
  const std::string text = str_cat(kSolver, " snapshot_prefix: '", dir / "toy", "'");
  auto full = MakeToySolver(text);
  full->Step(6);
  auto first = MakeToySolver(text);
  first->Step(3);
  const std::string model = first->Snapshot();
  auto resumed = MakeToySolver(text);
  resumed->Restore(model.substr(0, model.rfind('.')) + ".solverstate");
  resumed->Step(3);
  for (size_t p = 0; p < full->net()->learnable_params().size(); ++p) {
    EXPECT_EQ(Values(*full->net()->learnable_params()[p]), Values(*resumed->net()->learnable_params()[p]));
    EXPECT_EQ(Values(full->history(static_cast<int>(p), 0)), Values(resumed->history(static_cast<int>(p), 0)));
  }
}

// On a device the rule's kernel runs, and gives the host loop's bits: a CPU
// solver replaying the device's gradients ends on the same weights and
// history.
TEST(ToyUpdateRule, KernelGivesTheHostLoopsBits) {
#ifdef __CUDACC__
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device";
  auto gpu = MakeToySolver(kSolver, Context::Create(0));
  auto cpu = MakeToySolver(kSolver);
  const std::vector<Blob*>& gp = gpu->net()->learnable_params();
  const std::vector<Blob*>& cp = cpu->net()->learnable_params();
  for (size_t p = 0; p < gp.size(); ++p) {
    const std::vector<float> w = Values(*gp[p]);
    std::copy(w.begin(), w.end(), cp[p]->mutable_cpu_data<float>());
  }
  std::vector<std::vector<std::vector<float>>> grads;  // [iteration][param]
  gpu->set_after_backward([&](Solver& s) {
    grads.emplace_back();
    for (const Blob* p : s.net()->learnable_params()) {
      const float* d = p->cpu_diff<float>();
      grads.back().emplace_back(d, d + p->count());
    }
  });
  cpu->set_after_backward([&](Solver& s) {
    const std::vector<std::vector<float>>& g = grads.at(static_cast<size_t>(s.iter()));
    for (size_t p = 0; p < g.size(); ++p)
      std::copy(g[p].begin(), g[p].end(), s.net()->learnable_params()[p]->mutable_cpu_diff<float>());
  });
  gpu->Step(5);
  EXPECT_TRUE(gp[0]->data().head_on_gpu()) << "the update did not run on the device";
  cpu->Step(5);
  for (size_t p = 0; p < gp.size(); ++p) {
    EXPECT_EQ(Values(*gp[p]), Values(*cp[p])) << "param " << p;
    EXPECT_EQ(Values(gpu->history(static_cast<int>(p), 0)), Values(cpu->history(static_cast<int>(p), 0)))
        << "param " << p;
  }
  Context::Cpu()->Activate();
#else
  GTEST_SKIP() << "compiled by the host compiler: the rule has no kernel here";
#endif
}

}  // namespace
}  // namespace cortado
