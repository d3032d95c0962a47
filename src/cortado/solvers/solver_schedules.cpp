// The Solver's schedules (solvers/solver.hpp lists the formulas): the
// learning-rate, momentum and weight-decay policies, their fields' checks,
// and the "plateau" policy's bookkeeping.
#include <algorithm>
#include <cmath>

#include "cortado/solvers/solver.hpp"
#include "cortado/util/logging.hpp"

namespace cortado {

// The rate, momentum, weight-decay and LARC fields.
void Solver::ValidateSchedules() const {
  const std::string& policy = param_.lr_policy();
  static const char* const kPolicies[] = {"fixed", "step", "exp", "inv", "multistep", "poly", "sigmoid", "plateau"};
  bool known = false;
  for (const char* p : kPolicies) known |= policy == p;
  if (!known)
    ParamFail("lr_policy", str_cat("unknown policy '", policy,
                                   "'; known policies: fixed, step, exp, inv, multistep, poly, sigmoid, plateau"));
  if (policy == "step" && param_.stepsize() <= 0) ParamFail("stepsize", "must be positive for lr_policy step");
  for (int i = 1; i < param_.stepvalue_size(); ++i)
    if (param_.stepvalue(i) <= param_.stepvalue(i - 1)) ParamFail("stepvalue", "must be increasing");
  if (policy == "plateau" && param_.plateau_winsize_size() == 0)
    ParamFail("lr_policy", "plateau needs at least one plateau_winsize");
  for (int w : param_.plateau_winsize())
    if (w <= 0) ParamFail("plateau_winsize", str_cat("must be positive, got ", w));
  if (!(param_.min_lr() >= 0)) ParamFail("min_lr", str_cat("must not be negative, got ", param_.min_lr()));
  if (policy == "poly" && param_.base_lr() < param_.min_lr())
    ParamFail("min_lr", str_cat("= ", param_.min_lr(), " exceeds base_lr = ", param_.base_lr(), " (lr_policy poly)"));
  if (param_.rampup_interval() < 0) ParamFail("rampup_interval", "must not be negative");
  if (param_.linear_rampup_interval() < 0) ParamFail("linear_rampup_interval", "must not be negative");
  if (param_.rampup_interval() > 0 && param_.linear_rampup_interval() > 0)
    ParamFail("linear_rampup_interval", "and rampup_interval (NVCaffe's quadratic warm-up) exclude each other");
  const std::string& mp = param_.momentum_policy();
  if (mp != "fixed" && mp != "poly" && mp != "opt")
    ParamFail("momentum_policy", str_cat("unknown policy '", mp, "'; use fixed, poly or opt"));
  const std::string& wp = param_.weight_decay_policy();
  if (wp != "fixed" && wp != "poly")
    ParamFail("weight_decay_policy", str_cat("unknown policy '", wp, "'; use fixed or poly"));
  if ((mp == "poly" || wp == "poly") && param_.max_iter() <= 0)
    ParamFail(mp == "poly" ? "momentum_policy" : "weight_decay_policy", "poly needs max_iter > 0");
  // As in NVCaffe, whose other rules read `momentum` as it is.
  if (mp != "fixed" && !rule_.momentum_policy)
    INFO_LOG << "momentum_policy " << mp << " sets SGD's and Nesterov's momentum and LARC's factor; "
             << param_.type() << " uses momentum as it is";
  if (param_.larc_policy() != "scale" && param_.larc_policy() != "clip")
    ParamFail("larc_policy", str_cat("unknown policy '", param_.larc_policy(), "'; use scale or clip"));
  if (param_.larc() && !(param_.larc_eta() > 0)) ParamFail("larc_eta", "must be positive");
  if (param_.larc_turbo() && !param_.larc()) INFO_LOG << "larc_turbo does nothing without larc: true (as in NVCaffe)";
}

double Solver::GetLearningRate(int iter) const {
  const std::string& policy = param_.lr_policy();
  const double base = param_.base_lr(), gamma = param_.gamma(), power = param_.power(), min_lr = param_.min_lr();
  const double it = iter;
  double rate;
  if (iter < param_.rampup_interval()) {
    const double alpha = it / param_.rampup_interval();
    rate = param_.rampup_lr() + (base - param_.rampup_lr()) * alpha * alpha;
  } else if (iter < param_.linear_rampup_interval()) {
    rate = param_.rampup_lr() + (base - param_.rampup_lr()) * (it / param_.linear_rampup_interval());
  } else if (policy == "fixed") {
    rate = base;
  } else if (policy == "step") {
    rate = base * std::pow(gamma, std::floor(it / param_.stepsize()));
  } else if (policy == "exp") {
    rate = base * std::pow(gamma, it);
  } else if (policy == "inv") {
    rate = base * std::pow(1 + gamma * it, -power);
  } else if (policy == "multistep") {
    int step = 0;
    while (step < param_.stepvalue_size() && iter >= param_.stepvalue(step)) ++step;
    rate = base * std::pow(gamma, step);
  } else if (policy == "poly") {
    const double max_iter = param_.max_iter() > 0 ? param_.max_iter() : 1;  // NVCaffe's guard
    rate = (base - min_lr) * std::pow(1 - it / max_iter, power) + min_lr;
  } else if (policy == "plateau") {
    rate = base * std::pow(gamma, current_step_);
  } else {  // sigmoid
    rate = base / (1 + std::exp(-gamma * (it - param_.stepsize())));
  }
  return std::max(rate, min_lr);
}

double Solver::GetMomentum(int iter) const {
  const std::string& policy = param_.momentum_policy();
  const double m = param_.momentum();
  if (policy == "poly")
    return m + (param_.max_momentum() - m) *
                   std::pow(static_cast<double>(iter) / param_.max_iter(), param_.momentum_power());
  if (policy == "opt") {
    const double root = 1 - 0.5 * std::sqrt(GetLearningRate(iter));
    const double opt = root * root;
    return param_.has_max_momentum() ? std::min<double>(param_.max_momentum(), opt) : opt;
  }
  return m;
}

double Solver::GetWeightDecay(int iter) const {
  const double wd = param_.weight_decay();
  if (param_.weight_decay_policy() != "poly") return wd;
  return wd + (param_.max_weight_decay() - wd) *
                  std::pow(static_cast<double>(iter) / param_.max_iter(), param_.weight_decay_power());
}

void Solver::AdvancePlateau() {
  // Not during a warm-up, whose rate does not come from the policy.
  if (param_.lr_policy() != "plateau" || iter_ < param_.rampup_interval() ||
      iter_ < param_.linear_rampup_interval())
    return;
  // Stored as the state stores it, so that a resumed run compares alike; the
  // ranks' mean, so that they all step at the same iteration.
  const float loss = static_cast<float>(reducer_->Mean({smoothed_loss_})[0]);
  if (loss < minimum_loss_) {
    minimum_loss_ = loss;
    iter_last_event_ = iter_;
  }
  if (current_step_ < param_.plateau_winsize_size() &&
      iter_ >= iter_last_event_ + param_.plateau_winsize(current_step_)) {
    ++current_step_;
    iter_last_event_ = iter_;
    INFO_LOG << "Plateau Status: Iteration " << iter_ << ", step = " << current_step_ << ", minimum loss "
             << minimum_loss_;
  }
}

}  // namespace cortado
