#pragma once
// Adam (Kingma & Ba 2015), as in Caffe, with b1 = momentum, b2 = momentum2 and
// t = iter() + 1 (the step being taken, from 1):
//   M = b1 * M + (1 - b1) * g
//   V = b2 * V + (1 - b2) * g^2
//   W = W - rate * sqrt(1 - b2^t) / (1 - b1^t) * M / (sqrt(V) + delta)
// Fields: momentum (b1; Caffe's examples use 0.9), momentum2 (b2, default
// 0.999), delta (default 1e-8); b1 and b2 must lie in [0, 1). g holds the
// coupled weight decay (L2: decay * W), as in Caffe.
//
// AdamW (Loshchilov & Hutter 2019): the same M and V, computed from g WITHOUT
// weight decay, and the decay applied to the weights directly, scaled by the
// rate as in PyTorch's AdamW (W *= 1 - rate * decay, then the Adam step):
//   W = W - rate * (sqrt(1 - b2^t) / (1 - b1^t) * M / (sqrt(V) + delta) + decay * R(W))
// where decay = weight_decay * decay_mult, R(W) = W for regularization_type L2
// and sign(W) for L1, W the value before the step.
//
// History: 2 blobs per parameter, slot 0 = M, slot 1 = V, in the solver data
// type. Arithmetic in math_t<T>, each stored value rounded once. With FLOAT16
// solver data and b2 = 0.999, V = (1 - b2) g^2 is subnormal (few bits) for |g|
// below about 0.25 and underflows to 0 below about 8e-3, where the step then
// divides by delta: prefer FLOAT solver data with Adam.

#include "cortado/solver.hpp"

namespace cortado {

class AdamSolver : public Solver {
 public:
  AdamSolver(const SolverParameter& param, const SourceInfo& info = SourceInfo(), SolverSetup setup = SolverSetup());
  const char* type() const override { return "Adam"; }

 protected:
  void UpdateParam(const ParamUpdate& u) override;
  int history_slots() const override { return 2; }
  UpdateRule update_rule() const override { return UpdateRule::kAdam; }
  /// The rule shared by Adam and AdamW; decoupled adds rate * decay * R(W).
  void AdamUpdate(const ParamUpdate& u, bool decoupled);
};

class AdamWSolver : public AdamSolver {
 public:
  using AdamSolver::AdamSolver;
  const char* type() const override { return "AdamW"; }

 protected:
  void UpdateParam(const ParamUpdate& u) override { AdamUpdate(u, true); }
  bool decoupled_decay() const override { return true; }
  UpdateRule update_rule() const override { return UpdateRule::kAdamW; }
};

}  // namespace cortado
