// RMSPropSolver: three steps against a double reference, in every solver data
// type, FP32 master weights under FP16 layers, and the field errors.
#include "cortado/solvers/rmsprop_rule.hpp"

#include <cmath>

#include "solvers/rule_check.hpp"

namespace cortado::test {
namespace {

RuleCase RMSProp() {
  RuleCase c;
  c.solver = "type: 'RMSProp' base_lr: 0.01 rms_decay: 0.9 delta: 0.001 weight_decay: 0.05";
  c.rule = [](double& w, double g, double* h, double rate, double, int) {
    const double rho = 0.9f, delta = 0.001f;  // float fields
    h[0] = rho * h[0] + (1 - rho) * g * g;
    w -= rate * g / (std::sqrt(h[0]) + delta);
  };
  return c;
}

TEST(RMSPropSolver, Registered) {
  EXPECT_STREQ(MakeSolver("type: 'RMSProp' base_lr: 0.1 lr_policy: 'fixed'", RuleNet(FLOAT))->type(), "RMSProp");
}
TEST(RMSPropSolver, ThreeStepsFloat) { CheckRuleFloat(RMSProp()); }
TEST(RMSPropSolver, ThreeStepsDouble) { CheckRuleDouble(RMSProp()); }
TEST(RMSPropSolver, ThreeStepsHalfData) { CheckRuleHalfData(RMSProp()); }
TEST(RMSPropSolver, HalfLayersKeepFloatMasterWeights) { CheckHalfLayersKeepFloatMaster(RMSProp()); }
TEST(RMSPropSolver, ResumeIsBitIdentical) {
  CheckResumeIsBitIdentical(RMSProp(), FLOAT);
  CheckResumeIsBitIdentical(RMSProp(), FLOAT16);
}

TEST(RMSPropSolver, BadFieldsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"type: 'RMSProp' base_lr: 0.1 lr_policy: 'fixed'\nmomentum: 0.5", "solver.prototxt:2: momentum: must be 0"},
      {"type: 'RMSProp' base_lr: 0.1 lr_policy: 'fixed'\nrms_decay: 1",
       "solver.prototxt:2: rms_decay: must lie in [0, 1), got 1"},
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
