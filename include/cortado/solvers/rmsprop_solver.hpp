#pragma once
// RMSProp (Tieleman & Hinton 2012), as in Caffe:
//   H = rms_decay * H + (1 - rms_decay) * g^2
//   W = W - rate * g / (sqrt(H) + delta)
// Fields: rms_decay (default 0.99, must lie in [0, 1)), delta (default 1e-8).
// momentum must be 0 (unset), as in Caffe: a nonzero value is an error that
// names the field.
// History: 1 blob per parameter (H), in the solver data type. Arithmetic in
// math_t<T>, each stored value rounded once.

#include "cortado/solver.hpp"

namespace cortado {

class RMSPropSolver : public Solver {
 public:
  RMSPropSolver(const SolverParameter& param, const SourceInfo& info = SourceInfo(), SolverSetup setup = SolverSetup());
  const char* type() const override { return "RMSProp"; }

 protected:
  void UpdateParam(const ParamUpdate& u) override;
  UpdateRule update_rule() const override { return UpdateRule::kRMSProp; }
};

}  // namespace cortado
