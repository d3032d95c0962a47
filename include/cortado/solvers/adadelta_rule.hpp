#pragma once
// AdaDelta (Zeiler 2012), as in Caffe, with m = momentum:
//   H1 = m * H1 + (1 - m) * g^2                  (running mean of g^2)
//   d  = g * sqrt((H2 + delta) / (H1 + delta))   (H2 before this step)
//   H2 = m * H2 + (1 - m) * d^2                  (running mean of updates^2)
//   W  = W - rate * d
// Fields: momentum (Caffe's examples use 0.95; must lie in [0, 1)), delta
// (default 1e-8; Caffe's examples use 1e-6), base_lr (1.0 gives the paper's
// rule). momentum is read as it is (momentum_policy does not apply).
// History: 2 blobs per parameter, slot 0 = H1, slot 1 = H2, in the solver data
// type. Arithmetic in math_t<T>, each stored value rounded once (d uses H1 as
// computed). With FLOAT16 solver data a delta below ~1e-5 leaves H2 in FP16's
// subnormal range, where it keeps few bits.

#include "cortado/solvers/update_rule.hpp"

namespace cortado {

struct AdaDeltaRule : UpdateRuleBase {
  static constexpr const char* kType = "AdaDelta";
  static constexpr int kSlots = 2;
  struct Hyper {
    double momentum, delta;
  };
  static Hyper MakeHyper(const RuleContext& c) { return {c.param.momentum(), c.param.delta()}; }
  static void Validate(const RuleFields& f) {
    if (!(f.param.momentum() >= 0 && f.param.momentum() < 1))
      f.Fail("momentum", str_cat("must lie in [0, 1) for AdaDelta, got ", f.param.momentum()));
  }
  template <typename M> struct Scalars {
    M rate, m, delta;
  };
  template <typename M> CORTADO_HD static Scalars<M> Prepare(const Hyper& h, double rate, double) {
    return {M(rate), M(h.momentum), M(h.delta)};
  }
  template <typename M, typename Round>
  CORTADO_HD static M Step(const Scalars<M>& s, M g, M w, M* h, const Round&) {
    using rule_math::mul;
    const M g2 = mul(s.m, h[0]) + mul(mul(M(1) - s.m, g), g);
    const M d2_old = h[1];
    const M d = mul(g, rule_math::sqrt((d2_old + s.delta) / (g2 + s.delta)));
    h[0] = g2;
    h[1] = mul(s.m, d2_old) + mul(mul(M(1) - s.m, d), d);
    return w - mul(s.rate, d);
  }
};

}  // namespace cortado
