#pragma once
// SGD with momentum (Caffe's rule), m the iteration's momentum
// (momentum_policy applied):
//   H = m * H + rate * g
//   W = W - H                      (H as stored: rounded to the solver data type)
// With FLOAT16 solver data and half_update_scheme ACCUMULATE_GRADIENTS (the
// default), no rate inside the momentum, so that small gradients stay above
// FP16's underflow; the product with the rate is formed in FP32:
//   H = m * H + g
//   W = W - rate * H
// History: 1 blob per parameter (H), in the solver data type. Arithmetic in
// math_t<T>, each stored value rounded once.

#include "cortado/solvers/update_rule.hpp"

namespace cortado {

struct SgdRule : UpdateRuleBase {
  static constexpr const char* kType = "SGD";
  static constexpr int kSlots = 1;
  static constexpr bool kMomentumPolicy = true;
  struct Hyper {
    double momentum;
    bool accumulate;  // FLOAT16 data with ACCUMULATE_GRADIENTS
  };
  static Hyper MakeHyper(const RuleContext& c) {
    return {c.momentum,
            c.data_type == FLOAT16 && c.param.half_update_scheme() == SolverParameter::ACCUMULATE_GRADIENTS};
  }
  template <typename M> struct Scalars {
    M rate, m;
    bool accumulate;
  };
  template <typename M> CORTADO_HD static Scalars<M> Prepare(const Hyper& h, double rate, double) {
    return {M(rate), M(h.momentum), h.accumulate};
  }
  template <typename M, typename Round>
  CORTADO_HD static M Step(const Scalars<M>& s, M g, M w, M* h, const Round& round) {
    using rule_math::mul;
    if (s.accumulate) {
      h[0] = round(mul(s.m, h[0]) + g);
      return w - mul(s.rate, h[0]);
    }
    h[0] = round(mul(s.m, h[0]) + mul(s.rate, g));
    return w - h[0];
  }
};

}  // namespace cortado
