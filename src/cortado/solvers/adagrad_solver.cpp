#include "cortado/solvers/adagrad_solver.hpp"

#include <cmath>
#include <utility>

namespace cortado {

AdaGradSolver::AdaGradSolver(const SolverParameter& param, const SourceInfo& info, SolverSetup setup)
    : Solver(param, info, std::move(setup)) {
  if (param_.momentum() != 0)
    ParamFail("momentum",
              str_cat("must be 0 (unset) for AdaGrad, which has no momentum term; got ", param_.momentum()));
}

void AdaGradSolver::UpdateParam(const ParamUpdate& u) {
  dispatch_type(data_type(), [&](auto z) {
    using T = decltype(z);
    using M = math_t<T>;
    T* w = net()->learnable_params()[u.id]->mutable_cpu_data<T>();
    T* h = history(u.id).mutable_cpu_data<T>();
    const M rate = M(u.rate), delta = M(param_.delta());
    for (int64_t i = 0; i < u.count; ++i) {
      const M g = M(u.grad[i]);
      const M sum = M(h[i]) + g * g;
      h[i] = T(sum);
      w[i] = T(M(w[i]) - rate * g / (std::sqrt(sum) + delta));
    }
  });
}

}  // namespace cortado
