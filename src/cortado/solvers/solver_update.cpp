// The update half of a Solver's iteration (solvers/solver.hpp, ApplyUpdate):
// the plan's decisions (update_plan.hpp), the executor that runs them, and
// the solver's copy of the loss-scale state.
#include "cortado/solvers/solver.hpp"
#include "cortado/util/logging.hpp"

#ifdef CORTADO_USE_CUDA
#include "cortado/solvers/device_update.hpp"
#endif

namespace cortado {

void Solver::SetLossScale(float scale) {
  loss_scale_ = scale;
  state_on_executor_ = false;
  net_->SetLossScale(scale);
}

void Solver::TakeState(const StepState& s) {
  if (s.scale != loss_scale_) SetLossScale(s.scale);
  clean_iterations_ = s.clean;
  skipped_iterations_ = s.skipped;
}

void Solver::ClearGradients() {
  if (!gradients_zero_) net_->ClearParamDiffs();
  gradients_zero_ = false;
}

bool Solver::ApplyUpdate() {
  // The plan of solvers/update_plan.hpp: every decision here, once; the
  // check and the arithmetic in the executor of where the net runs.
  gradients_zero_ = false;
  state_on_executor_ = false;  // the step's state is decided here
  MarkPhase("the gradient sums");
  if (reducer_->active()) reducer_->Reduce();
  if (histograms_due_) {  // Step's display asks for them: the summed gradients, before the check
    MarkPhase("the gradient histograms");
    WriteGradientHistograms();
    histograms_due_ = false;
  }
  MarkPhase("the update");
  AdvancePlateau();
  UpdateExecutor& exec = Executor();
  UpdatePlan plan;
  plan.skip_overflow = step_rule_.skip_overflow;
  plan.clip = step_rule_.clip >= 0;
  const GradientCheck check = plan.skip_overflow || plan.clip ? exec.Check(plan) : GradientCheck();
  const bool skip = check.nonfinite && plan.skip_overflow;
  double ss = check.sumsq;
  if (plan.clip && !skip && ranks() > 1 && !exec.exact_sums()) ss = reducer_->Mean({ss})[0];
  StepState state = CurrentState();
  StepRecord record;
  const StepControl control = DecideStep(step_rule_, check.nonfinite, ss, &state, &record);
  last_step_skipped_ = control.skip != 0;
  if (!control.skip) {
    plan.factor = control.factor;
    plan.rate = GetLearningRate();
    plan.momentum = GetMomentum();
    plan.weight_decay = GetWeightDecay();
    plan.l1 = param_.regularization_type() == "L1";
    exec.Apply(plan);
    gradients_zero_ = true;
  }
  TakeState(state);
  LogStep(iter_, record);
  return !control.skip;
}

UpdateExecutor& Solver::Executor() {
#ifdef CORTADO_USE_CUDA
  if (net_->context().on_gpu() && GpuUpdateSupported()) {
    if (!device_update_) device_update_ = MakeDeviceUpdate(*this);
    return *device_update_;
  }
#endif
  if (!host_update_) host_update_ = MakeHostUpdate(*this);
  return *host_update_;
}

void Solver::LarcCorrelationToHost() {
  if (larc_corr_on_device_ && device_update_) device_update_->LarcCorrelationToHost();
  larc_corr_on_device_ = false;
}

#ifdef CORTADO_USE_CUDA
bool Solver::GpuUpdateSupported() {
  std::string why;
  if (!rule_.update_gpu) why = str_cat("the ", type(), " rule has no GPU update");
  for (const Blob* p : net_->learnable_params())
    if (why.empty() && !gpu::update_supported(p->diff().type(), data_type_))
      why = str_cat("no GPU update for ", type_name(p->diff().type()), " gradients with ", type_name(data_type_),
                    " solver data");
  if (why.empty()) return true;
  if (!gpu_fallback_logged_) LOG(WARNING) << why << ": the update runs on the host, moving the weights there";
  gpu_fallback_logged_ = true;
  return false;
}
#endif  // CORTADO_USE_CUDA

}  // namespace cortado
