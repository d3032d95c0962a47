#pragma once
// AdaDelta (Zeiler 2012), as in Caffe, with m = momentum:
//   H1 = m * H1 + (1 - m) * g^2                  (running mean of g^2)
//   d  = g * sqrt((H2 + delta) / (H1 + delta))   (H2 before this step)
//   H2 = m * H2 + (1 - m) * d^2                  (running mean of updates^2)
//   W  = W - rate * d
// Fields: momentum (Caffe's examples use 0.95; must lie in [0, 1)), delta
// (default 1e-8; Caffe's examples use 1e-6), base_lr (1.0 gives the paper's
// rule).
// History: 2 blobs per parameter, slot 0 = H1, slot 1 = H2, in the solver data
// type. Arithmetic in math_t<T>, each stored value rounded once. With FLOAT16
// solver data a delta below ~1e-5 leaves H2 in FP16's subnormal range, where it
// keeps few bits.

#include "cortado/solver.hpp"

namespace cortado {

class AdaDeltaSolver : public Solver {
 public:
  AdaDeltaSolver(const SolverParameter& param, const SourceInfo& info = SourceInfo(), SolverSetup setup = SolverSetup());
  const char* type() const override { return "AdaDelta"; }

 protected:
  void UpdateParam(const ParamUpdate& u) override;
  UpdateRule update_rule() const override { return UpdateRule::kAdaDelta; }
  int history_slots() const override { return 2; }
};

}  // namespace cortado
