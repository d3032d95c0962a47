// AdamSolver and AdamWSolver: three steps against a double reference, in
// every solver data type, FP32 master weights under FP16 layers, L1 decay
// with AdamW, and the beta ranges.
#include "cortado/solvers/adam_rule.hpp"

#include <cmath>

#include "solvers/rule_check.hpp"

namespace cortado::test {
namespace {

const double kB1 = 0.9f, kB2 = 0.99f, kDelta = 0.001f;  // float fields, as the solver reads them

// One Adam step on M = h[0], V = h[1]; returns the step before the rate.
double AdamStep(double g, double* h, int t) {
  h[0] = kB1 * h[0] + (1 - kB1) * g;
  h[1] = kB2 * h[1] + (1 - kB2) * g * g;
  return std::sqrt(1 - std::pow(kB2, t)) / (1 - std::pow(kB1, t)) * h[0] / (std::sqrt(h[1]) + kDelta);
}

RuleCase Adam() {
  RuleCase c;
  c.solver = "type: 'Adam' base_lr: 0.05 momentum: 0.9 momentum2: 0.99 delta: 0.001 weight_decay: 0.05";
  c.slots = 2;
  c.rule = [](double& w, double g, double* h, double rate, double, int t) { w -= rate * AdamStep(g, h, t); };
  return c;
}

// PyTorch's AdamW: W -= rate * decay * W, then the Adam step on the
// gradient without decay.
RuleCase AdamW(const std::string& regularization = "L2") {
  RuleCase c;
  c.solver = str_cat("type: 'AdamW' base_lr: 0.05 momentum: 0.9 momentum2: 0.99 delta: 0.001 weight_decay: 0.5 ",
                     "regularization_type: '", regularization, "'");
  c.slots = 2;
  c.decoupled = true;
  const bool l1 = regularization == "L1";
  c.rule = [l1](double& w, double g, double* h, double rate, double decay, int t) {
    w -= rate * decay * (l1 ? (w > 0) - (w < 0) : w);
    w -= rate * AdamStep(g, h, t);
  };
  return c;
}

TEST(AdamSolver, Registered) {
  EXPECT_STREQ(MakeSolver("type: 'Adam' base_lr: 0.1 lr_policy: 'fixed'", RuleNet(FLOAT))->type(), "Adam");
  EXPECT_STREQ(MakeSolver("type: 'AdamW' base_lr: 0.1 lr_policy: 'fixed'", RuleNet(FLOAT))->type(), "AdamW");
}
TEST(AdamSolver, ThreeStepsFloat) { CheckRuleFloat(Adam()); }
TEST(AdamSolver, ThreeStepsDouble) { CheckRuleDouble(Adam()); }
TEST(AdamSolver, ThreeStepsHalfData) { CheckRuleHalfData(Adam()); }
TEST(AdamSolver, HalfLayersKeepFloatMasterWeights) { CheckHalfLayersKeepFloatMaster(Adam()); }
TEST(AdamSolver, ResumeIsBitIdentical) {
  CheckResumeIsBitIdentical(Adam(), FLOAT);
  CheckResumeIsBitIdentical(Adam(), FLOAT16);
}
TEST(AdamWSolver, ResumeIsBitIdentical) { CheckResumeIsBitIdentical(AdamW(), FLOAT); }

TEST(AdamWSolver, ThreeStepsFloat) { CheckRuleFloat(AdamW()); }
TEST(AdamWSolver, ThreeStepsDouble) { CheckRuleDouble(AdamW()); }
TEST(AdamWSolver, ThreeStepsHalfData) { CheckRuleHalfData(AdamW()); }
TEST(AdamWSolver, HalfLayersKeepFloatMasterWeights) { CheckHalfLayersKeepFloatMaster(AdamW()); }
TEST(AdamWSolver, L1DecayIsDecoupledToo) { CheckRuleFloat(AdamW("L1")); }

TEST(AdamSolver, BetasOutOfRangeNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"type: 'Adam' base_lr: 0.1 lr_policy: 'fixed'\nmomentum: 1",
       "solver.prototxt:2: momentum: (beta1) must lie in [0, 1) for Adam"},
      {"type: 'AdamW' base_lr: 0.1 lr_policy: 'fixed'\nmomentum2: -0.5",
       "solver.prototxt:2: momentum2: (beta2) must lie in [0, 1) for AdamW"},
  };
  for (const auto& [text, want] : cases) {
    try {
      MakeSolver(text, RuleNet(FLOAT));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace cortado::test
