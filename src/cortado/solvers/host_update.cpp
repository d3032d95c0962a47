// The host executor of the update plan (solvers/update_plan.hpp): CPU
// contexts, and GPU contexts whose rule or types have no device update (the
// tensors then move to the host, and back when the layers read them).
#include <cmath>
#include <vector>

#include "cortado/solvers/larc.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/solvers/update_plan.hpp"
#include "cortado/util/math.hpp"

namespace cortado {
namespace {

bool has_nonfinite(const Tensor& t) {
  return dispatch_type(t.type(), [&](auto z) {
    using T = decltype(z);
    return cpu_has_nonfinite<T>(static_cast<int64_t>(t.count()), t.data<T>());
  });
}
// Sum of squares of the tensor's values, in double.
double sumsq(const Tensor& t) {
  return dispatch_type(t.type(), [&](auto z) {
    using T = decltype(z);
    return cpu_sumsq<T>(static_cast<int64_t>(t.count()), t.data<T>());
  });
}

}  // namespace

class HostUpdate : public UpdateExecutor {
 public:
  explicit HostUpdate(Solver& s) : s_(s) {}

  GradientCheck Check(const UpdatePlan& plan) override {
    GradientCheck c;
    const std::vector<Blob*>& params = s_.net_->learnable_params();
    if (plan.skip_overflow)
      for (const Blob* p : params) c.nonfinite = c.nonfinite || has_nonfinite(p->diff());
    if (plan.clip)
      for (const Blob* p : params) c.sumsq += sumsq(p->diff());
    return c;
  }
  // Every rank adds the same values in the same order.
  bool exact_sums() const override { return true; }

  void Apply(const UpdatePlan& plan) override {
    Net& net = *s_.net_;
    const SolverParameter& param = s_.param_;
    const RuleContext rule_ctx{param, s_.iter_, plan.momentum, s_.data_type_};
    if (param.larc_turbo()) s_.LarcCorrelationToHost();
    const std::vector<Blob*>& params = net.learnable_params();
    for (size_t i = 0; i < params.size(); ++i) {
      if (net.params_lr()[i] == 0) continue;
      Blob* p = params[i];
      const int64_t n = static_cast<int64_t>(p->count());
      grad_.resize(n);
      // The gradient converted straight into the scratch (F16C for float16),
      // not into a float copy cached in the diff tensor: same values.
      dispatch_type(p->diff().type(), [&](auto z) {
        using T = decltype(z);
        convert_array<T, float>(n, p->cpu_diff<T>(), grad_.data());
      });
      for (int64_t k = 0; k < n; ++k) grad_[k] = static_cast<float>(grad_[k] * plan.factor);
      CpuParamStep u;
      u.count = n;
      u.grad = grad_.data();
      // LARC reads the gradient before the decay is added.
      u.rate = param.larc() ? LarcRate(static_cast<int>(i), plan.rate, plan.momentum) : plan.rate * net.params_lr()[i];
      u.decay = plan.weight_decay * net.params_weight_decay()[i];
      if (u.decay != 0 && !s_.rule_.decoupled_decay) {
        const float* w = p->cpu_data<float>();
        const float d = static_cast<float>(u.decay);
        for (int64_t k = 0; k < n; ++k) grad_[k] += d * (plan.l1 ? float((w[k] > 0) - (w[k] < 0)) : w[k]);
      }
      u.weight = p->data().mutable_data_raw(s_.data_type_);
      for (int k = 0; k < s_.history_slots(); ++k)
        u.hist[k] = s_.history(static_cast<int>(i), k).data().mutable_data_raw(s_.data_type_);
      s_.rule_.update_cpu(rule_ctx, u);
    }
    net.ClearParamDiffs();  // the device update does this in its own pass
  }

 private:
  // LARC on the host: parameter i's sums from grad_ (its gradient without
  // the decay), its weights and its first history buffer; larc.hpp's formula.
  double LarcRate(int i, double rate, double momentum) {
    const SolverParameter& param = s_.param_;
    const Blob* p = s_.net_->learnable_params()[static_cast<size_t>(i)];
    const int64_t n = static_cast<int64_t>(p->count());
    LarcSums sums;
    sums.w = sumsq(p->data());
    sums.g = cpu_sumsq<float>(n, grad_.data());
    if (param.larc_turbo()) {
      dispatch_type(s_.data_type_, [&](auto z) {
        using T = decltype(z);
        const T* h = s_.history(i).cpu_data<T>();
        for (int64_t k = 0; k < n; ++k) {
          const double hv = static_cast<double>(math_t<T>(h[k]));
          sums.gh += static_cast<double>(grad_[k]) * hv;
          sums.h += hv * hv;
        }
      });
    }
    std::vector<double>& corr = s_.larc_corr_;
    corr.resize(s_.net_->learnable_params().size());
    const LarcPolicy policy = param.larc_policy() == "clip" ? LarcPolicy::kClip : LarcPolicy::kScale;
    const double trust = larc_trust(sums, momentum, param.larc_eta(), param.larc_turbo(), &corr[i]);
    return larc_rate(rate, s_.net_->params_lr()[static_cast<size_t>(i)], policy, trust);
  }

  Solver& s_;
  std::vector<float> grad_;  // FP32 scratch for one parameter's gradient

 public:
  // Deferred steps, run at once (SolverSetup::defer_host_steps): the device
  // executor's calls with the host's arithmetic, so that the solver's
  // deferred bookkeeping runs where no GPU is.
  bool device() const override { return false; }
  void PutState(const StepState& s) override { state_ = s; }
  void BeginRecord(int slot) override { records_.at(static_cast<size_t>(slot)) = StepRecord(); }
  void AddLoss(int slot) override {
    StepRecord& r = records_.at(static_cast<size_t>(slot));
    for (const auto& [top, weight] : s_.net_->loss_tops()) {
      const float* d = top->cpu_data<float>();
      double sum = 0;
      for (size_t k = 0; k < top->count(); ++k) sum += d[k];
      r.loss += weight * sum;
    }
  }
  void DeferredStep(const UpdatePlan& plan, const StepRule& rule, int slot) override {
    const GradientCheck c = plan.skip_overflow || plan.clip ? Check(plan) : GradientCheck();
    const StepControl ctl = DecideStep(rule, c.nonfinite, c.sumsq, &state_, &records_.at(static_cast<size_t>(slot)));
    if (ctl.skip) {
      s_.net_->ClearParamDiffs();
    } else {
      UpdatePlan p = plan;
      p.factor = ctl.factor;
      Apply(p);
    }
    s_.net_->SetLossScale(state_.scale);
  }
  StepState FetchRecords(int n, std::vector<StepRecord>* records) override {
    records->assign(records_.begin(), records_.begin() + n);
    return state_;
  }

 private:
  StepState state_;
  std::vector<StepRecord> records_ = std::vector<StepRecord>(kMaxDeferredSteps);
};

std::unique_ptr<UpdateExecutor> MakeHostUpdate(Solver& solver) { return std::make_unique<HostUpdate>(solver); }

}  // namespace cortado
