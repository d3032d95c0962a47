#pragma once
// Nesterov's accelerated gradient, in Caffe's form (Sutskever et al. 2013,
// rewritten so that W holds the look-ahead point):
//   H_new = m * H + rate * g
//   W     = W - ((1 + m) * H_new - m * H)
// m = the iteration's momentum (momentum, default 0, with momentum_policy;
// NVCaffe's Nesterov ignores the policy). g already holds the coupled weight
// decay.
// History: 1 blob per parameter (H), in the solver data type. Arithmetic in
// math_t<T> (double for DOUBLE, float otherwise), each stored value rounded once.

#include "cortado/solver.hpp"

namespace cortado {

class NesterovSolver : public Solver {
 public:
  using Solver::Solver;
  const char* type() const override { return "Nesterov"; }

 protected:
  void UpdateParam(const ParamUpdate& u) override;
  UpdateRule update_rule() const override { return UpdateRule::kNesterov; }
};

}  // namespace cortado
