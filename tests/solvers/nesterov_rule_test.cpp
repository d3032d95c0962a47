// NesterovSolver: three steps against a double reference, in every solver
// data type, and FP32 master weights under FP16 layers.
#include "cortado/solvers/nesterov_rule.hpp"

#include "solvers/rule_check.hpp"

namespace cortado::test {
namespace {

RuleCase Nesterov() {
  RuleCase c;
  c.solver = "type: 'Nesterov' base_lr: 0.02 momentum: 0.9 weight_decay: 0.05";
  c.rule = [](double& w, double g, double* h, double rate, double, int) {
    const double h_old = h[0];
    h[0] = 0.9f * h_old + rate * g;  // momentum is a float field
    w -= (1 + 0.9f) * h[0] - 0.9f * h_old;
  };
  return c;
}

TEST(NesterovSolver, Registered) {
  EXPECT_STREQ(MakeSolver("type: 'Nesterov' base_lr: 0.1 lr_policy: 'fixed'", RuleNet(FLOAT))->type(), "Nesterov");
}
TEST(NesterovSolver, ThreeStepsFloat) { CheckRuleFloat(Nesterov()); }
TEST(NesterovSolver, ThreeStepsDouble) { CheckRuleDouble(Nesterov()); }
TEST(NesterovSolver, ThreeStepsHalfData) { CheckRuleHalfData(Nesterov()); }
TEST(NesterovSolver, HalfLayersKeepFloatMasterWeights) { CheckHalfLayersKeepFloatMaster(Nesterov()); }
TEST(NesterovSolver, ResumeIsBitIdentical) {
  CheckResumeIsBitIdentical(Nesterov(), FLOAT);
  CheckResumeIsBitIdentical(Nesterov(), FLOAT16);
}

}  // namespace
}  // namespace cortado::test
