#pragma once
// RMSProp (Tieleman & Hinton 2012), as in Caffe:
//   H = rms_decay * H + (1 - rms_decay) * g^2
//   W = W - rate * g / (sqrt(H) + delta)     (H as computed, before rounding)
// Fields: rms_decay (default 0.99, must lie in [0, 1)), delta (default 1e-8).
// momentum must be 0 (unset), as in Caffe: a nonzero value is an error that
// names the field.
// History: 1 blob per parameter (H), in the solver data type. Arithmetic in
// math_t<T>, each stored value rounded once.

#include "cortado/solvers/update_rule.hpp"

namespace cortado {

struct RMSPropRule : UpdateRuleBase {
  static constexpr const char* kType = "RMSProp";
  static constexpr int kSlots = 1;
  struct Hyper {
    double rms_decay, delta;
  };
  static Hyper MakeHyper(const RuleContext& c) { return {c.param.rms_decay(), c.param.delta()}; }
  static void Validate(const RuleFields& f) {
    if (f.param.momentum() != 0)
      f.Fail("momentum", str_cat("must be 0 (unset) for RMSProp, as in Caffe; got ", f.param.momentum()));
    if (!(f.param.rms_decay() >= 0 && f.param.rms_decay() < 1))
      f.Fail("rms_decay", str_cat("must lie in [0, 1), got ", f.param.rms_decay()));
  }
  template <typename M> struct Scalars {
    M rate, rho, delta;
  };
  template <typename M> CORTADO_HD static Scalars<M> Prepare(const Hyper& h, double rate, double) {
    return {M(rate), M(h.rms_decay), M(h.delta)};
  }
  template <typename M, typename Round>
  CORTADO_HD static M Step(const Scalars<M>& s, M g, M w, M* h, const Round&) {
    using rule_math::mul;
    const M mean_sq = mul(s.rho, h[0]) + mul(mul(M(1) - s.rho, g), g);
    h[0] = mean_sq;
    return w - mul(s.rate, g) / (rule_math::sqrt(mean_sq) + s.delta);
  }
};

}  // namespace cortado
