// AdaDeltaSolver: three steps against a double reference, in every solver
// data type, FP32 master weights under FP16 layers, and the momentum range.
#include "cortado/solvers/adadelta_rule.hpp"

#include <cmath>

#include "solvers/rule_check.hpp"

namespace cortado::test {
namespace {

// delta 1e-4 keeps H2 in FP16's normal range (see the header).
RuleCase AdaDelta() {
  RuleCase c;
  c.solver = "type: 'AdaDelta' base_lr: 1 momentum: 0.95 delta: 0.0001 weight_decay: 0.05";
  c.slots = 2;
  c.rule = [](double& w, double g, double* h, double rate, double, int) {
    const double m = 0.95f, delta = 0.0001f;  // float fields
    h[0] = m * h[0] + (1 - m) * g * g;
    const double d = g * std::sqrt((h[1] + delta) / (h[0] + delta));
    h[1] = m * h[1] + (1 - m) * d * d;
    w -= rate * d;
  };
  return c;
}

TEST(AdaDeltaSolver, Registered) {
  auto s = MakeSolver("type: 'AdaDelta' base_lr: 1 lr_policy: 'fixed' momentum: 0.95", RuleNet(FLOAT));
  EXPECT_STREQ(s->type(), "AdaDelta");
}
TEST(AdaDeltaSolver, ThreeStepsFloat) { CheckRuleFloat(AdaDelta()); }
TEST(AdaDeltaSolver, ThreeStepsDouble) { CheckRuleDouble(AdaDelta()); }
TEST(AdaDeltaSolver, ThreeStepsHalfData) { CheckRuleHalfData(AdaDelta()); }
TEST(AdaDeltaSolver, HalfLayersKeepFloatMasterWeights) { CheckHalfLayersKeepFloatMaster(AdaDelta()); }
TEST(AdaDeltaSolver, ResumeIsBitIdentical) {
  CheckResumeIsBitIdentical(AdaDelta(), FLOAT);
  CheckResumeIsBitIdentical(AdaDelta(), FLOAT16);
}

TEST(AdaDeltaSolver, MomentumOutOfRangeNamesTheField) {
  try {
    MakeSolver("type: 'AdaDelta' base_lr: 1 lr_policy: 'fixed'\nmomentum: 1", RuleNet(FLOAT));
    FAIL() << "momentum 1 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("solver.prototxt:2: momentum: must lie in [0, 1)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace cortado::test
