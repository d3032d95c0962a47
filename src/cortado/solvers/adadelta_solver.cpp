#include "cortado/solvers/adadelta_solver.hpp"

#include <cmath>
#include <utility>

namespace cortado {

AdaDeltaSolver::AdaDeltaSolver(const SolverParameter& param, const SourceInfo& info, SolverSetup setup)
    : Solver(param, info, std::move(setup)) {
  if (!(param_.momentum() >= 0 && param_.momentum() < 1))
    ParamFail("momentum", str_cat("must lie in [0, 1) for AdaDelta, got ", param_.momentum()));
}

void AdaDeltaSolver::UpdateParam(const ParamUpdate& u) {
  dispatch_type(data_type(), [&](auto z) {
    using T = decltype(z);
    using M = math_t<T>;
    T* w = net()->learnable_params()[u.id]->mutable_cpu_data<T>();
    T* h1 = history(u.id, 0).mutable_cpu_data<T>();  // mean of g^2
    T* h2 = history(u.id, 1).mutable_cpu_data<T>();  // mean of d^2
    const M rate = M(u.rate), delta = M(param_.delta()), m = M(param_.momentum());
    for (int64_t i = 0; i < u.count; ++i) {
      const M g = M(u.grad[i]);
      const M g2 = m * M(h1[i]) + (1 - m) * g * g;
      const M d2_old = M(h2[i]);
      const M d = g * std::sqrt((d2_old + delta) / (g2 + delta));
      h1[i] = T(g2);
      h2[i] = T(m * d2_old + (1 - m) * d * d);
      w[i] = T(M(w[i]) - rate * d);
    }
  });
}

}  // namespace cortado
