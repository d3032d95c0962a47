#pragma once
// Adam (Kingma & Ba 2015), as in Caffe, with b1 = momentum, b2 = momentum2 and
// t = iter() + 1 (the step being taken, from 1):
//   M = b1 * M + (1 - b1) * g
//   V = b2 * V + (1 - b2) * g^2
//   W = W - rate * sqrt(1 - b2^t) / (1 - b1^t) * M / (sqrt(V) + delta)
// Fields: momentum (b1; Caffe's examples use 0.9; momentum_policy does not
// apply), momentum2 (b2, default 0.999), delta (default 1e-8); b1 and b2 must
// lie in [0, 1). g holds the coupled weight decay (L2: decay * W), as in Caffe.
//
// AdamW (Loshchilov & Hutter 2019): the same M and V, computed from g WITHOUT
// weight decay, and the decay applied to the weights directly, scaled by the
// rate as in PyTorch's AdamW (W *= 1 - rate * decay, then the Adam step):
//   W = W - rate * (sqrt(1 - b2^t) / (1 - b1^t) * M / (sqrt(V) + delta) + decay * R(W))
// where decay = weight_decay * decay_mult, R(W) = W for regularization_type L2
// and sign(W) for L1, W the value before the step.
//
// History: 2 blobs per parameter, slot 0 = M, slot 1 = V, in the solver data
// type. Arithmetic in math_t<T> (the step size rate * sqrt(1 - b2^t) / (1 - b1^t)
// and rate * decay in double, then rounded to it), each stored value rounded
// once. With FLOAT16 solver data and b2 = 0.999, V = (1 - b2) g^2 is subnormal
// (few bits) for |g| below about 0.25 and underflows to 0 below about 8e-3,
// where the step then divides by delta: prefer FLOAT solver data with Adam.

#include <cmath>

#include "cortado/solvers/update_rule.hpp"

namespace cortado {

struct AdamRule : UpdateRuleBase {
  static constexpr const char* kType = "Adam";
  static constexpr int kSlots = 2;
  struct Hyper {
    double b1, b2, delta;
    double c1, c2;  // sqrt(1 - b2^t) and 1 - b1^t
    bool decoupled, l1;
  };
  static Hyper MakeHyper(const RuleContext& c) {
    const double b1 = c.param.momentum(), b2 = c.param.momentum2(), t = c.iter + 1.0;
    return {b1, b2, c.param.delta(), std::sqrt(1 - std::pow(b2, t)), 1 - std::pow(b1, t), false,
            c.param.regularization_type() == "L1"};
  }
  static void Validate(const RuleFields& f) {
    if (!(f.param.momentum() >= 0 && f.param.momentum() < 1))
      f.Fail("momentum", str_cat("(beta1) must lie in [0, 1) for ", f.param.type(), ", got ", f.param.momentum()));
    if (!(f.param.momentum2() >= 0 && f.param.momentum2() < 1))
      f.Fail("momentum2", str_cat("(beta2) must lie in [0, 1) for ", f.param.type(), ", got ", f.param.momentum2()));
  }
  template <typename M> struct Scalars {
    M b1, b2, delta;
    M step;    // rate * sqrt(1 - b2^t) / (1 - b1^t)
    M lambda;  // AdamW: rate * decay; Adam: 0
    bool l1;
  };
  template <typename M> CORTADO_HD static Scalars<M> Prepare(const Hyper& h, double rate, double decay) {
    using rule_math::mul;
    return {M(h.b1), M(h.b2), M(h.delta), M(mul(rate, h.c1) / h.c2), M(h.decoupled ? mul(rate, decay) : 0.0), h.l1};
  }
  template <typename M, typename Round>
  CORTADO_HD static M Step(const Scalars<M>& s, M g, M w, M* h, const Round&) {
    using rule_math::mul;
    const M mi = mul(s.b1, h[0]) + mul(M(1) - s.b1, g);
    const M vi = mul(s.b2, h[1]) + mul(mul(M(1) - s.b2, g), g);
    h[0] = mi;
    h[1] = vi;
    const M reg = s.l1 ? rule_math::sign(w) : w;
    return w - mul(s.step, mi) / (rule_math::sqrt(vi) + s.delta) - mul(s.lambda, reg);
  }
};

/// AdamW: Adam's moments from g without the decay; the decay on W.
struct AdamWRule : AdamRule {
  static constexpr const char* kType = "AdamW";
  static constexpr bool kDecoupledDecay = true;
  static Hyper MakeHyper(const RuleContext& c) {
    Hyper h = AdamRule::MakeHyper(c);
    h.decoupled = true;
    return h;
  }
};

}  // namespace cortado
