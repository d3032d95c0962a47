#include "cortado/solvers/adam_solver.hpp"

#include <cmath>
#include <utility>

namespace cortado {

AdamSolver::AdamSolver(const SolverParameter& param, const SourceInfo& info, SolverSetup setup)
    : Solver(param, info, std::move(setup)) {
  if (!(param_.momentum() >= 0 && param_.momentum() < 1))
    ParamFail("momentum", str_cat("(beta1) must lie in [0, 1) for ", param_.type(), ", got ", param_.momentum()));
  if (!(param_.momentum2() >= 0 && param_.momentum2() < 1))
    ParamFail("momentum2", str_cat("(beta2) must lie in [0, 1) for ", param_.type(), ", got ", param_.momentum2()));
}

void AdamSolver::UpdateParam(const ParamUpdate& u) { AdamUpdate(u, false); }

void AdamSolver::AdamUpdate(const ParamUpdate& u, bool decoupled) {
  const double b1 = param_.momentum(), b2 = param_.momentum2();
  const double t = iter() + 1.0;
  const double step = u.rate * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
  const double wd = decoupled ? u.rate * u.decay : 0.0;
  const bool l1 = param_.regularization_type() == "L1";
  dispatch_type(data_type(), [&](auto z) {
    using T = decltype(z);
    using Mt = math_t<T>;
    T* w = net()->learnable_params()[u.id]->mutable_cpu_data<T>();
    T* m = history(u.id, 0).mutable_cpu_data<T>();
    T* v = history(u.id, 1).mutable_cpu_data<T>();
    const Mt beta1 = Mt(b1), beta2 = Mt(b2), s = Mt(step), delta = Mt(param_.delta()), lambda = Mt(wd);
    for (int64_t i = 0; i < u.count; ++i) {
      const Mt g = Mt(u.grad[i]), wi = Mt(w[i]);
      const Mt mi = beta1 * Mt(m[i]) + (1 - beta1) * g;
      const Mt vi = beta2 * Mt(v[i]) + (1 - beta2) * g * g;
      m[i] = T(mi);
      v[i] = T(vi);
      const Mt reg = l1 ? Mt((wi > 0) - (wi < 0)) : wi;
      w[i] = T(wi - s * mi / (std::sqrt(vi) + delta) - lambda * reg);
    }
  });
}

}  // namespace cortado
