#pragma once
// Nesterov's accelerated gradient, in Caffe's form (Sutskever et al. 2013,
// rewritten so that W holds the look-ahead point):
//   H_new = m * H + rate * g
//   W     = W - ((1 + m) * H_new - m * H)
// m = the iteration's momentum (momentum, default 0, with momentum_policy;
// NVCaffe's Nesterov ignores the policy). g already holds the coupled weight
// decay.
// History: 1 blob per parameter (H), in the solver data type. Arithmetic in
// math_t<T> (double for DOUBLE, float otherwise), each stored value rounded
// once; W's step uses H_new as computed, not as stored.

#include "cortado/solvers/update_rule.hpp"

namespace cortado {

struct NesterovRule : UpdateRuleBase {
  static constexpr const char* kType = "Nesterov";
  static constexpr int kSlots = 1;
  static constexpr bool kMomentumPolicy = true;
  struct Hyper {
    double momentum;
  };
  static Hyper MakeHyper(const RuleContext& c) { return {c.momentum}; }
  template <typename M> struct Scalars {
    M rate, m;
  };
  template <typename M> CORTADO_HD static Scalars<M> Prepare(const Hyper& h, double rate, double) {
    return {M(rate), M(h.momentum)};
  }
  template <typename M, typename Round>
  CORTADO_HD static M Step(const Scalars<M>& s, M g, M w, M* h, const Round&) {
    using rule_math::mul;
    const M h_old = h[0];
    const M h_new = mul(s.m, h_old) + mul(s.rate, g);
    h[0] = h_new;
    return w - (mul(M(1) + s.m, h_new) - mul(s.m, h_old));
  }
};

}  // namespace cortado
