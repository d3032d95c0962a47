#pragma once
// AdaGrad (Duchi et al. 2011), as in Caffe:
//   H = H + g^2
//   W = W - rate * g / (sqrt(H) + delta)
// Fields: delta (default 1e-8). momentum must be 0 (unset): AdaGrad has no
// momentum term, and a nonzero value is rejected at construction with an error
// that names the momentum field, as Caffe does.
// History: 1 blob per parameter (H), in the solver data type. Arithmetic in
// math_t<T>, each stored value rounded once. With FLOAT16 solver data H
// overflows to Inf past 65504 and the steps of that weight become 0: use FLOAT
// solver data for long runs.

#include "cortado/solver.hpp"

namespace cortado {

class AdaGradSolver : public Solver {
 public:
  AdaGradSolver(const SolverParameter& param, const SourceInfo& info = SourceInfo(), SolverSetup setup = SolverSetup());
  const char* type() const override { return "AdaGrad"; }

 protected:
  void UpdateParam(const ParamUpdate& u) override;
  UpdateRule update_rule() const override { return UpdateRule::kAdaGrad; }
};

}  // namespace cortado
