// AdaGradSolver: three steps against a double reference, in every solver data
// type, FP32 master weights under FP16 layers, and the momentum error.
#include "cortado/solvers/adagrad_rule.hpp"

#include <cmath>

#include "solvers/rule_check.hpp"

namespace cortado::test {
namespace {

RuleCase AdaGrad() {
  RuleCase c;
  c.solver = "type: 'AdaGrad' base_lr: 0.1 delta: 0.001 weight_decay: 0.05";
  c.rule = [](double& w, double g, double* h, double rate, double, int) {
    h[0] += g * g;
    w -= rate * g / (std::sqrt(h[0]) + 0.001f);
  };
  return c;
}

TEST(AdaGradSolver, Registered) {
  EXPECT_STREQ(MakeSolver("type: 'AdaGrad' base_lr: 0.1 lr_policy: 'fixed'", RuleNet(FLOAT))->type(), "AdaGrad");
}
TEST(AdaGradSolver, ThreeStepsFloat) { CheckRuleFloat(AdaGrad()); }
TEST(AdaGradSolver, ThreeStepsDouble) { CheckRuleDouble(AdaGrad()); }
TEST(AdaGradSolver, ThreeStepsHalfData) { CheckRuleHalfData(AdaGrad()); }
TEST(AdaGradSolver, HalfLayersKeepFloatMasterWeights) { CheckHalfLayersKeepFloatMaster(AdaGrad()); }
TEST(AdaGradSolver, ResumeIsBitIdentical) {
  CheckResumeIsBitIdentical(AdaGrad(), FLOAT);
  CheckResumeIsBitIdentical(AdaGrad(), FLOAT16);
}

TEST(AdaGradSolver, MomentumIsAnErrorNamingTheField) {
  try {
    MakeSolver("type: 'AdaGrad' base_lr: 0.1 lr_policy: 'fixed'\nmomentum: 0.9", RuleNet(FLOAT));
    FAIL() << "momentum 0.9 was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("solver.prototxt:2: momentum: must be 0 (unset) for AdaGrad"), std::string::npos) << msg;
    EXPECT_NE(msg.find("got 0.9"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace cortado::test
