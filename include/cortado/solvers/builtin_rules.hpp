#pragma once
// The built-in update rules, sorted by type string: the registry
// (src/cortado/solvers/update_rule.cpp) makes each a solver type with the
// host loop, and the device update (device_update.cu) instantiates the fused kernel
// for each. A new built-in rule is one header beside these (update_rule.hpp
// says what it defines) and one entry here.

#include "cortado/solvers/adadelta_rule.hpp"
#include "cortado/solvers/adagrad_rule.hpp"
#include "cortado/solvers/adam_rule.hpp"
#include "cortado/solvers/nesterov_rule.hpp"
#include "cortado/solvers/rmsprop_rule.hpp"
#include "cortado/solvers/sgd_rule.hpp"
#include "cortado/solvers/update_rule.hpp"

namespace cortado {

using BuiltinRules = RuleList<AdaDeltaRule, AdaGradRule, AdamRule, AdamWRule, NesterovRule, RMSPropRule, SgdRule>;

}  // namespace cortado
