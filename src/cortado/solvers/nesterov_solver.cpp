#include "cortado/solvers/nesterov_solver.hpp"

namespace cortado {

void NesterovSolver::UpdateParam(const ParamUpdate& u) {
  dispatch_type(data_type(), [&](auto z) {
    using T = decltype(z);
    using M = math_t<T>;
    T* w = net()->learnable_params()[u.id]->mutable_cpu_data<T>();
    T* h = history(u.id).mutable_cpu_data<T>();
    const M rate = M(u.rate), m = M(u.momentum);
    for (int64_t i = 0; i < u.count; ++i) {
      const M h_old = M(h[i]);
      const M h_new = m * h_old + rate * M(u.grad[i]);
      h[i] = T(h_new);
      w[i] = T(M(w[i]) - ((1 + m) * h_new - m * h_old));
    }
  });
}

}  // namespace cortado
