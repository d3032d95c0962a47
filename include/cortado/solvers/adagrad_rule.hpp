#pragma once
// AdaGrad (Duchi et al. 2011), as in Caffe:
//   H = H + g^2
//   W = W - rate * g / (sqrt(H) + delta)     (H as computed, before rounding)
// Fields: delta (default 1e-8). momentum must be 0 (unset): AdaGrad has no
// momentum term, and a nonzero value is rejected before the nets are built
// with an error that names the momentum field, as Caffe does.
// History: 1 blob per parameter (H), in the solver data type. Arithmetic in
// math_t<T>, each stored value rounded once. With FLOAT16 solver data H
// overflows to Inf past 65504 and the steps of that weight become 0: use FLOAT
// solver data for long runs.

#include "cortado/solvers/update_rule.hpp"

namespace cortado {

struct AdaGradRule : UpdateRuleBase {
  static constexpr const char* kType = "AdaGrad";
  static constexpr int kSlots = 1;
  struct Hyper {
    double delta;
  };
  static Hyper MakeHyper(const RuleContext& c) { return {c.param.delta()}; }
  static void Validate(const RuleFields& f) {
    if (f.param.momentum() != 0)
      f.Fail("momentum",
             str_cat("must be 0 (unset) for AdaGrad, which has no momentum term; got ", f.param.momentum()));
  }
  template <typename M> struct Scalars {
    M rate, delta;
  };
  template <typename M> CORTADO_HD static Scalars<M> Prepare(const Hyper& h, double rate, double) {
    return {M(rate), M(h.delta)};
  }
  template <typename M, typename Round>
  CORTADO_HD static M Step(const Scalars<M>& s, M g, M w, M* h, const Round&) {
    using rule_math::mul;
    const M sum = h[0] + mul(g, g);
    h[0] = sum;
    return w - mul(s.rate, g) / (rule_math::sqrt(sum) + s.delta);
  }
};

}  // namespace cortado
