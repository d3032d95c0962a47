#include "cortado/solvers/rmsprop_solver.hpp"

#include <cmath>
#include <utility>

namespace cortado {

RMSPropSolver::RMSPropSolver(const SolverParameter& param, const SourceInfo& info, SolverSetup setup)
    : Solver(param, info, std::move(setup)) {
  if (param_.momentum() != 0)
    ParamFail("momentum", str_cat("must be 0 (unset) for RMSProp, as in Caffe; got ", param_.momentum()));
  if (!(param_.rms_decay() >= 0 && param_.rms_decay() < 1))
    ParamFail("rms_decay", str_cat("must lie in [0, 1), got ", param_.rms_decay()));
}

void RMSPropSolver::UpdateParam(const ParamUpdate& u) {
  dispatch_type(data_type(), [&](auto z) {
    using T = decltype(z);
    using M = math_t<T>;
    T* w = net()->learnable_params()[u.id]->mutable_cpu_data<T>();
    T* h = history(u.id).mutable_cpu_data<T>();
    const M rate = M(u.rate), delta = M(param_.delta()), rho = M(param_.rms_decay());
    for (int64_t i = 0; i < u.count; ++i) {
      const M g = M(u.grad[i]);
      const M mean_sq = rho * M(h[i]) + (1 - rho) * g * g;
      h[i] = T(mean_sq);
      w[i] = T(M(w[i]) - rate * g / (std::sqrt(mean_sq) + delta));
    }
  });
}

}  // namespace cortado
