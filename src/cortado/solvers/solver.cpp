#include "cortado/solvers/solver.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <random>
#include <type_traits>

#include "cortado/solvers/deferred_loss.hpp"
#include "cortado/layer_traits.hpp"
#include "cortado/solvers/step_graph.hpp"
#include "cortado/solvers/update_plan.hpp"
#include "cortado/io/blob_io.hpp"
#include "cortado/io/hdf5.hpp"
#include "cortado/util/logging.hpp"
#include "cortado/comm/rank_phase.hpp"
#include "cortado/util/math.hpp"
#include "cortado/util/rng.hpp"

#ifdef CORTADO_USE_CUDA
#include "cortado/solvers/device_update.hpp"
#include "cortado/util/cuda.hpp"
#endif

namespace cortado {

namespace pb = google::protobuf;

std::unique_ptr<Solver> Solver::Create(const std::string& solver_file, std::shared_ptr<const Context> ctx) {
  SolverParameter param;
  SourceInfo info;
  ReadTextProto(solver_file, &param, &info);
  return Create(param, info, std::move(ctx));
}

namespace {
// The registered rule of param.type(), or the error that names the field.
UpdateRuleInfo RuleOf(const SolverParameter& param, const SourceInfo& info) {
  UpdateRuleInfo rule;
  if (FindUpdateRule(param.type(), &rule)) return rule;
  std::string known;
  for (const std::string& t : UpdateRuleTypes()) known += (known.empty() ? "" : ", ") + t;
  const int line = info.root_field_line(SolverParameter::descriptor(), "type");
  fail(info.where(line), "type: unknown solver type '", param.type(), "'; known types: ", known);
}

// A loss scale as logged: all 9 digits a float needs to be read back exactly
// (the stream's default 6 turn 16777216 into 1.67772e+07), so that log
// parsers see the scale the solver used.
std::string ScaleText(float scale) {
  std::ostringstream s;
  s << std::setprecision(9) << scale;
  return s.str();
}

// The rank's phase, for the diagnosis of a hung run (comm/rank_phase.hpp).
void mark(const Solver& s, const char* phase) { set_rank_phase(s.rank(), phase, s.iter()); }
}  // namespace

std::vector<std::string> Solver::Types() { return UpdateRuleTypes(); }

std::unique_ptr<Solver> Solver::Create(const SolverParameter& param, const SourceInfo& info,
                                       SolverSetup setup) {
  return std::make_unique<Solver>(param, info, std::move(setup));
}

Solver::Solver(const SolverParameter& param, const SourceInfo& info, SolverSetup setup)
    : param_(param),
      info_(info),
      rule_(RuleOf(param, info)),
      ctx_(setup.ctx ? std::move(setup.ctx) : Context::Cpu()),
      edit_net_(std::move(setup.edit_net)),
      comm_(std::move(setup.comm)) {
  Validate();
  if (ranks() > 1) {
    // One seed for every rank: the same initial weights, and Data layers
    // whose shards fit together. Unset, rank 0 draws it.
    int64_t seed = param_.random_seed();
    if (seed < 0 && rank() == 0) seed = std::random_device{}() & 0x7fffffff;
    param_.set_random_seed(comm_->Max(seed));
    INFO_LOG << "Rank " << rank() << " of " << ranks() << " (" << comm_->engine() << "), random_seed "
             << param_.random_seed();
  }
  if (param_.random_seed() >= 0) set_random_seed(param_.random_seed());
  if (param_.has_solver_mode())
    INFO_LOG << "solver_mode is not used to choose the device; trainer's --gpu flag does";
  InitNets();
  // Several ranks: after the nets (built alike on every rank), each rank's
  // generator gets a seed of its own, so its dropout masks are its own.
  if (ranks() > 1) set_random_seed(param_.random_seed() + 1 + rank());
  reducer_ = std::make_unique<GradientReducer>(net_.get(), comm_, setup.reduce_alone, param_.reduce_buckets());
  const bool double_net = !net_->layers().empty() && net_->layers().front()->forward_type() == DOUBLE;
  data_type_ = double_net ? DOUBLE : param_.solver_data_type();
  loss_scale_ = param_.dynamic_loss_scale() ? param_.loss_scale_init() : net_->global_grad_scale();
  net_->SetLossScale(loss_scale_);
  step_rule_.dynamic = param_.dynamic_loss_scale();
  step_rule_.skip_overflow = param_.dynamic_loss_scale() || param_.skip_nonfinite_steps();
  step_rule_.backoff = param_.loss_scale_backoff();
  step_rule_.min = param_.loss_scale_min();
  step_rule_.growth = param_.loss_scale_growth();
  step_rule_.max = param_.loss_scale_max();
  step_rule_.window = param_.loss_scale_window();
  step_rule_.clip = param_.clip_gradients();
  step_rule_.iter_size = param_.iter_size();
  step_rule_.ranks = ranks();
  defer_host_steps_ = setup.defer_host_steps;
  const char* defer = std::getenv("CORTADO_DEFER_STEPS");
  defer_enabled_ = !(defer && std::string(defer) == "0");
}

Blob& Solver::history(int id, int slot) {
  if (history_.empty()) {
    // Allocated on first use (a solver that never updates keeps none).
    for (const Blob* p : net_->learnable_params())
      for (int k = 0; k < history_slots(); ++k) history_.push_back(std::make_shared<Blob>(p->shape(), data_type_));
  }
  return *history_[static_cast<size_t>(id) * history_slots() + slot];
}

void Solver::ParamFail(const std::string& field, const std::string& msg) const {
  RuleFields{param_, info_}.Fail(field, msg);
}

void Solver::Validate() const {
  ValidateSchedules();
  if (param_.iter_size() < 1) ParamFail("iter_size", str_cat("must be at least 1, got ", param_.iter_size()));
  if (param_.average_loss() < 1) ParamFail("average_loss", "must be at least 1");
  if (param_.max_iter() < 0) ParamFail("max_iter", "must not be negative");
  if (param_.snapshot() > 0 && !param_.has_snapshot_prefix() && !param_.has_net())
    ParamFail("snapshot_prefix", "is required when snapshot > 0");
  if (param_.snapshot_format() == SolverParameter::HDF5 && !hdf5::available())
    ParamFail("snapshot_format", "HDF5 needs a build with HDF5 (Debian: libhdf5-dev; CMake option USE_HDF5)");
  if (param_.regularization_type() != "L2" && param_.regularization_type() != "L1")
    ParamFail("regularization_type", str_cat("unknown type '", param_.regularization_type(), "'; use L2 or L1"));
  if (param_.dynamic_loss_scale()) {
    if (!(param_.loss_scale_min() > 0) || param_.loss_scale_min() > param_.loss_scale_max())
      ParamFail("loss_scale_min", "needs 0 < loss_scale_min <= loss_scale_max");
    if (param_.loss_scale_init() < param_.loss_scale_min() || param_.loss_scale_init() > param_.loss_scale_max())
      ParamFail("loss_scale_init", str_cat("= ", param_.loss_scale_init(), " is outside [loss_scale_min, loss_scale_max] = [",
                                           param_.loss_scale_min(), ", ", param_.loss_scale_max(), "]"));
    if (!(param_.loss_scale_backoff() > 0 && param_.loss_scale_backoff() < 1))
      ParamFail("loss_scale_backoff", "must be in (0, 1)");
    if (!(param_.loss_scale_growth() >= 1)) ParamFail("loss_scale_growth", "must be at least 1");
    if (param_.loss_scale_window() < 1) ParamFail("loss_scale_window", "must be at least 1");
  }
  if (param_.solver_data_type() == DOUBLE) ParamFail("solver_data_type", "DOUBLE is only for DOUBLE nets; use FLOAT");
  // bfloat16 master weights would lose every update below half a spacing
  // (2^-9 to 2^-8 of the weight):
  // bfloat16 nets keep FP32 master weights.
  if (param_.solver_data_type() == BFLOAT16)
    ParamFail("solver_data_type", "BFLOAT16 is not a solver data type; use FLOAT (FP32 master weights)");
  const int nets = param_.has_net() + param_.has_net_param() + param_.has_train_net() + param_.has_train_net_param();
  if (nets != 1) ParamFail("net", "exactly one of net, net_param, train_net and train_net_param must be set");
  rule_.validate(RuleFields{param_, info_});
}

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

void Solver::InitNets() {
  const pb::FieldDescriptor* net_param_field = SolverParameter::descriptor()->FindFieldByName("net_param");
  const pb::FieldDescriptor* train_param_field = SolverParameter::descriptor()->FindFieldByName("train_net_param");
  const pb::TextFormat::ParseInfoTree* root = info_.root_tree();
  auto load = [&](const std::string& field, const std::string& path, NetParameter* p, SourceInfo* pi) {
    const std::string resolved = ResolvePath(path, info_.file());
    if (!FileExists(resolved)) ParamFail(field, str_cat("net file '", path, "' does not exist"));
    ReadTextProto(resolved, p, pi);
  };
  NetParameter train;
  SourceInfo train_info;
  if (param_.has_net()) {
    load("net", param_.net(), &train, &train_info);
  } else if (param_.has_train_net()) {
    load("train_net", param_.train_net(), &train, &train_info);
  } else if (param_.has_net_param()) {
    train = param_.net_param();
    train_info = info_.with_net_tree(root ? root->GetTreeForNested(net_param_field, -1) : nullptr);
  } else {
    train = param_.train_net_param();
    train_info = info_.with_net_tree(root ? root->GetTreeForNested(train_param_field, -1) : nullptr);
  }
  NetState state;
  state.set_phase(TRAIN);
  state.MergeFrom(train.state());
  state.MergeFrom(param_.train_state());
  const NetParameter general_net = train;  // the test nets' copy, before the edit
  *train.mutable_state() = state;
  if (edit_net_) edit_net_(&train);
  // Each rank reads its own shard of every shardable data source, in
  // training and in testing, and writes files of its own (ShardForRank,
  // layer_traits.hpp: the shard arithmetic and the traits that choose the layers).
  auto shard = [&](NetParameter* p) {
    for (LayerParameter& l : *p->mutable_layer()) ShardForRank(&l, rank(), ranks());
  };
  shard(&train);
  net_ = std::make_unique<Net>(train, train_info, ctx_);
  if (param_.snapshot_format() == SolverParameter::HDF5) {
    // Said now, not at the first snapshot hours later.
    for (const auto& l : net_->layers()) {
      if (l->blobs().empty()) continue;
      try {
        hdf5::CheckWeightsLayerName(l->name(), "HDF5 snapshots");
      } catch (const Error& e) {
        ParamFail("snapshot_format", e.what());
      }
    }
  }

  // Test nets: test_net files, test_net_param, or the general net in TEST phase.
  std::vector<std::pair<NetParameter, SourceInfo>> tests;
  for (const std::string& f : param_.test_net()) {
    NetParameter p;
    SourceInfo pi;
    load("test_net", f, &p, &pi);
    tests.emplace_back(p, pi);
  }
  const pb::FieldDescriptor* test_param_field = SolverParameter::descriptor()->FindFieldByName("test_net_param");
  for (int i = 0; i < param_.test_net_param_size(); ++i)
    tests.emplace_back(param_.test_net_param(i),
                       info_.with_net_tree(root ? root->GetTreeForNested(test_param_field, i) : nullptr));
  if (tests.empty() && (param_.has_net() || param_.has_net_param())) {
    const NetParameter& general = param_.has_net() ? general_net : param_.net_param();
    for (int i = 0; i < param_.test_iter_size(); ++i) tests.emplace_back(general, train_info);
  }
  if (param_.test_iter_size() != static_cast<int>(tests.size()))
    ParamFail("test_iter", str_cat("has ", param_.test_iter_size(), " values for ", tests.size(), " test nets"));
  if (!tests.empty() && param_.test_interval() <= 0) ParamFail("test_interval", "must be positive when there are test nets");
  for (size_t i = 0; i < tests.size(); ++i) {
    NetParameter p = tests[i].first;
    NetState s;
    s.set_phase(TEST);
    if (i < static_cast<size_t>(param_.test_state_size())) s.MergeFrom(param_.test_state(i));
    *p.mutable_state() = s;
    if (edit_net_) edit_net_(&p);
    shard(&p);
    test_nets_.push_back(std::make_unique<Net>(p, tests[i].second, ctx_));
    test_nets_.back()->ShareTrainedLayersWith(*net_);
  }
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

void Solver::Solve(const std::string& resume_file) {
  INFO_LOG << "Solving " << net_->name();
  INFO_LOG << "Learning Rate Policy: " << param_.lr_policy();
  requested_early_exit_ = false;
  if (!resume_file.empty()) {
    INFO_LOG << "Restoring previous solver status from " << resume_file;
    Restore(resume_file);
  }
  mark(*this, "sharing rank 0's parameters");
  SyncParameters();
  Step(param_.max_iter() - iter_);
  // As Caffe: a snapshot after the last iteration, unless the periodic one
  // was just written; an early stop (SIGINT, --sigint_effect=stop) snapshots
  // too, so an interrupted run loses nothing.
  if (param_.snapshot_after_train() && (!param_.snapshot() || iter_ % param_.snapshot() != 0)) Snapshot();
  if (requested_early_exit_) {
    INFO_LOG << "Optimization stopped early.";
    return;
  }
  if (param_.display() && iter_ % param_.display() == 0) {
    // Caffe runs one more TRAIN forward here, which moves BatchNorm's
    // running statistics past the weights just saved (the final test score
    // would then not be the saved model's); the loss shown is the smoothed
    // training loss of the last iterations instead.
    // The mean is a collective: every rank takes part, whether its log shows
    // INFO lines or not (INFO_LOG does not evaluate its operands where not).
    mark(*this, "the final display (the loss's mean over the ranks)");
    const double loss = reducer_->Mean({smoothed_loss_})[0];
    INFO_LOG << "Iteration " << iter_ << ", loss = " << loss;
  }
  if (param_.test_interval() && iter_ % param_.test_interval() == 0) TestAll();
  mark(*this, "done");
  INFO_LOG << "Optimization Done.";
}

void Solver::Step(int iters) {
  const int start_iter = iter_, stop_iter = iter_ + iters;
  step_start_iter_ = start_iter;
  losses_.clear();
  smoothed_loss_ = 0;
  auto last_display = std::chrono::steady_clock::now();
  int last_display_iter = iter_;
  while (iter_ < stop_iter) {
    ClearGradients();
    const bool testing = param_.test_interval() && iter_ % param_.test_interval() == 0 &&
                         (iter_ > 0 || param_.test_initialization());
    const bool display = param_.display() && iter_ % param_.display() == 0;
    if (CanDefer(display, testing)) {
      DeferredIteration();
    } else {
      // The deferred steps before this one are read first: their log lines
      // and losses come before this iteration's.
      ResolvePending();
      if (testing) {
        const auto t0 = std::chrono::steady_clock::now();
        TestAll();
        last_display += std::chrono::steady_clock::now() - t0;  // testing time is not training time
      }
      double loss = 0;
      mark(*this, "forward and backward");
      for (int i = 0; i < param_.iter_size(); ++i) {
        // The last backward of the step starts the ranks' sums bucket by bucket.
        reducer_->set_last_backward(i + 1 == param_.iter_size());
        loss += net_->ForwardBackward();
        reducer_->set_last_backward(false);
      }
      loss /= param_.iter_size();
      if (after_backward_) after_backward_(*this);
      UpdateSmoothedLoss(loss, iter_);
      if (display) {
        const auto now = std::chrono::steady_clock::now();
        const double elapsed = std::chrono::duration<double>(now - last_display).count();
        DisplayOutputs(elapsed, iter_ - last_display_iter);
        last_display = now;
        last_display_iter = iter_;
      }
      const float scale_used = loss_scale_;
      ApplyUpdate();
      if (display) {
        INFO_LOG << "Iteration " << iter_ << ", lr = " << GetLearningRate();
        if (param_.dynamic_loss_scale() || scale_used != 1 || skipped_iterations_)
          INFO_LOG << "    loss scale = " << ScaleText(scale_used) << ", skipped steps = " << skipped_iterations_;
      }
    }
    ++iter_;
    mark(*this, "agreeing on the signals' action");
    const SolverAction action = reducer_->Agree(action_ ? action_() : SolverAction::NONE);
    if ((param_.snapshot() && iter_ % param_.snapshot() == 0) || action == SolverAction::SNAPSHOT) Snapshot();
    if (action == SolverAction::STOP) {
      requested_early_exit_ = true;
      break;
    }
  }
  ResolvePending();
  // The last update may still run on the device; the weights are final when
  // Step returns, whichever stream the caller reads them on next.
  mark(*this, "waiting for the device after the last step");
  net_->context().Synchronize();
}

bool Solver::CanDefer(bool display, bool testing) {
  if (display || testing || !defer_enabled_ || pending_.size() >= static_cast<size_t>(kMaxDeferredSteps)) return false;
  // These read a step's results on the host before the next step.
  if (param_.lr_policy() == "plateau" || param_.larc() || (param_.clip_gradients() >= 0 && ranks() > 1)) return false;
  UpdateExecutor& exec = Executor();
  return exec.device() || defer_host_steps_;
}

UpdatePlan Solver::DeferredPlan() const {
  UpdatePlan plan;
  plan.skip_overflow = step_rule_.skip_overflow;
  plan.clip = step_rule_.clip >= 0;
  plan.rate = GetLearningRate();
  plan.momentum = GetMomentum();
  plan.weight_decay = GetWeightDecay();
  plan.l1 = param_.regularization_type() == "L1";
  return plan;
}

void Solver::DeferredIteration() {
  UpdateExecutor& exec = Executor();
  if (!state_on_executor_) exec.PutState(CurrentState());
  state_on_executor_ = true;
  const int slot = static_cast<int>(pending_.size());
  const UpdatePlan plan = DeferredPlan();
  if (!GraphIteration(exec, plan, slot)) {
    mark(*this, "forward and backward");
    exec.BeginRecord(slot);
    DeferLossReads no_reads;  // the loss tops are summed by the executor instead
    for (int i = 0; i < param_.iter_size(); ++i) {
      net_->Forward();
      exec.AddLoss(slot);
      reducer_->set_last_backward(i + 1 == param_.iter_size());
      net_->Backward();
      reducer_->set_last_backward(false);
    }
    if (after_backward_) after_backward_(*this);
    mark(*this, "the gradient sums");
    if (reducer_->active()) reducer_->Reduce();
    mark(*this, "the update");
    exec.DeferredStep(plan, step_rule_, slot);
  }
  gradients_zero_ = true;  // skipped or not
  pending_.push_back(iter_);
  ++deferred_steps_;
}

// One pass of a captured iteration: what Net::Forward and Net::Backward run
// from first_layer on (one rank: StepGraphObstacle), and after the last pass
// the step. The caller began the record.
namespace {
// Where DeferredPass is (a layer and the direction, or a step of the
// solver's), for the warning of a failed capture: what in the net kept it
// from a graph.
thread_local const LayerBase* pass_layer = nullptr;
thread_local const char* pass_what = nullptr;
std::string PassAt() {
  if (!pass_what) return "";
  return pass_layer ? str_cat(", in layer '", pass_layer->name(), "' (", pass_layer->type(), ") ", pass_what)
                    : str_cat(", in ", pass_what);
}
}  // namespace

void Solver::DeferredPass(UpdateExecutor& exec, const UpdatePlan& plan, int slot, int first_layer, bool last) {
  const auto& layers = net_->layers();
  const auto& bottoms = net_->bottom_vecs();
  const auto& tops = net_->top_vecs();
  const auto at = [&](size_t i, const char* what) {
    pass_layer = layers[i].get();
    pass_what = what;
  };
  for (size_t i = static_cast<size_t>(first_layer); i < layers.size(); ++i) {
    at(i, "forward");
    layers[i]->Forward(bottoms[i], tops[i]);
  }
  pass_layer = nullptr;
  pass_what = "the loss sums";
  exec.AddLoss(slot);
  for (size_t i = layers.size(); i-- > 0;)
    if (net_->layer_need_backward()[i]) {
      at(i, "backward");
      layers[i]->Backward(tops[i], net_->bottom_need_backward()[i], bottoms[i]);
    }
  pass_what = "the update";
  if (last) exec.DeferredStep(plan, step_rule_, slot);
  pass_what = nullptr;
}

#ifdef CORTADO_USE_CUDA
bool Solver::GraphIteration(UpdateExecutor& exec, const UpdatePlan& plan, int slot) {
  if (!exec.device()) return false;
  // A callback set after the graphs were allowed (or captured): it runs on
  // the host between backward and the update, which a replay would skip.
  if (after_backward_ && graph_allowed_ > 0) {
    DropGraphs(true);
    return false;
  }
  if (graph_allowed_ == 0) {
    std::string why = after_backward_   ? "a callback runs between backward and the update"
                      : reducer_->active() ? "the gradients are summed across ranks"
                                           : "";
    if (why.empty()) why = StepGraphObstacle(*net_, param_, ranks(), &graph_head_);
    graph_allowed_ = why.empty() ? 1 : -1;
    if (!why.empty()) INFO_LOG << "CUDA graphs: not used (" << why << ")";
  }
  if (graph_allowed_ < 0) return false;
  const std::array<double, 3> key{plan.rate, plan.momentum, plan.weight_decay};
  if (step_graph_ && key != graph_key_) {
    DropGraphs(false);
    if (iter_ - graph_captured_iter_ < 20) {
      INFO_LOG << "CUDA graphs: turned off at iteration " << iter_ << " (the rate, momentum or weight decay changed "
               << "within 20 iterations of the last capture, which fixes them)";
      graph_allowed_ = -1;
      return false;
    }
  }
  // The first deferred steps run without capture: cuDNN chooses its
  // algorithms and the buffers are allocated there.
  if (!step_graph_ && graph_warm_ < 2) {
    ++graph_warm_;
    return false;
  }
  const Context& ctx = net_->context();
  ctx.Activate();
  // The graphs hold the stream workspace's address: a test pass or a new
  // shape that grew it since the capture freed that memory.
  if (step_graph_ && cuda::stream_workspace_generation(ctx.stream()) != graph_workspace_) {
    INFO_LOG << "CUDA graphs: captured again at iteration " << iter_
             << " (the stream's workspace grew since the capture, in a test pass or for a new shape)";
    DropGraphs(false);
  }
  const auto& layers = net_->layers();
  // The loss gradients as the graph reads them: an eager step may have set a
  // new scale on the host, and no graph may capture its upload.
  for (const auto& top : net_->loss_tops()) top.first->diff().gpu_data_raw(top.first->diff().type());
  DeferLossReads no_reads;
  exec.BeginRecord(slot);  // outside the graphs: once per iteration whatever iter_size
  // iter_size passes: the data layers, then a graph of the rest (the last
  // one's with the step), each captured the first time it is needed.
  for (int i = 0; i < param_.iter_size(); ++i) {
    const bool last = i + 1 == param_.iter_size();
    mark(*this, "the data layers (outside the CUDA graph)");
    for (int k = 0; k < graph_head_; ++k) {
      layers[k]->Forward(net_->bottom_vecs()[k], net_->top_vecs()[k]);
      // Their tops on the device now, outside the graph: a layer that fills
      // them on the host (DummyData with a random filler, say) would else be
      // copied up by its first consumer, inside the capture.
      for (Blob* top : net_->top_vecs()[k]) top->data().gpu_data_raw(top->data().type());
    }
    std::shared_ptr<StepGraph>& graph = last ? step_graph_ : pass_graph_;
    if (graph_allowed_ > 0 && !graph) {
      mark(*this, "capturing the iteration as a CUDA graph");
      auto g = std::make_shared<StepGraph>();
      std::string why;
      if (g->Capture(ctx.stream(), [&] { DeferredPass(exec, plan, slot, graph_head_, last); }, &why)) {
        graph = std::move(g);
        graph_key_ = key;
        graph_workspace_ = cuda::stream_workspace_generation(ctx.stream());
        graph_captured_iter_ = iter_;
        ++graph_captures_;
        INFO_LOG << "CUDA graphs: iteration " << iter_ << " captured (layers " << graph_head_ << " to "
                 << layers.size() - 1 << " forward and backward" << (last ? ", the check and the update" : "")
                 << "); replayed from now on";
      } else {
        LOG(WARNING) << "CUDA graphs: the capture of iteration " << iter_ << " failed (" << why
                     << PassAt() << "); the training steps run without a graph";
        graph_allowed_ = -1;
        DropGraphs(false);
      }
    }
    if (graph_allowed_ > 0) {
      mark(*this, "a CUDA graph of the iteration");
      graph->Launch(ctx.stream());
      ++graph_launches_;
    } else {
      mark(*this, "forward and backward");
      DeferredPass(exec, plan, slot, graph_head_, last);  // nothing ran in a failed capture
    }
  }
  return true;
}
#else
bool Solver::GraphIteration(UpdateExecutor&, const UpdatePlan&, int) { return false; }
#endif  // CORTADO_USE_CUDA

void Solver::DropGraphs(bool warm_up_again) {
  step_graph_.reset();
  pass_graph_.reset();
  if (warm_up_again) graph_warm_ = 0;
}

void Solver::ResolvePending() {
  if (pending_.empty()) return;
  mark(*this, "reading the deferred steps");
  std::vector<StepRecord> records;
  const StepState after = Executor().FetchRecords(static_cast<int>(pending_.size()), &records);
  ++deferred_reads_;
  for (size_t k = 0; k < pending_.size(); ++k) {
    const StepRecord& r = records[k];
    UpdateSmoothedLoss(r.loss / param_.iter_size(), pending_[k]);
    loss_scale_ = r.scale_after;
    skipped_iterations_ += r.skipped;
    last_step_skipped_ = r.skipped != 0;
    LogStep(pending_[k], r);
  }
  pending_.clear();
  // The loss tops' gradients already hold the scale (DeferredStep).
  loss_scale_ = after.scale;
  clean_iterations_ = after.clean;
  skipped_iterations_ = after.skipped;
}

void Solver::DisplayOutputs(double elapsed_s, int iters) {
  // The smoothed loss and the train net's outputs, as the ranks' mean (one
  // collective): with several ranks the log speaks for the whole batch.
  const BlobVec& outputs = net_->output_blobs();
  mark(*this, "the display (the outputs' mean over the ranks)");
  std::vector<double> shown = {smoothed_loss_};
  for (const Blob* b : outputs) {
    const float* v = b->cpu_data<float>();
    shown.insert(shown.end(), v, v + b->count());
  }
  shown = reducer_->Mean(std::move(shown));
  INFO_LOG << "Iteration " << iter_ << ", loss = " << shown[0];
  size_t at = 1;
  for (size_t j = 0; j < outputs.size(); ++j) {
    const std::string& name = net_->blob_names()[net_->output_blob_indices()[j]];
    const double w = net_->blob_loss_weight(net_->output_blob_indices()[j]);
    for (size_t k = 0; k < outputs[j]->count(); ++k, ++at) {
      const float v = static_cast<float>(shown[at]);
      std::string loss_msg = w ? str_cat(" (* ", w, " = ", w * v, " loss)") : "";
      INFO_LOG << "    Train net output #" << at - 1 << ": " << name << " = " << v << loss_msg;
    }
  }
  if (iters > 0 && elapsed_s > 0 && !net_->top_vecs().empty() && !net_->top_vecs()[0].empty()) {
    const Blob* first = net_->top_vecs()[0][0];
    const double batch = first->num_axes() ? first->shape(0) : 1;
    const double ips = iters * param_.iter_size() * batch * ranks() / elapsed_s;  // all ranks'
    INFO_LOG << "    " << ips << " images/s, " << iters / elapsed_s << " iter/s over the last " << iters
             << " iterations";
  }
}

void Solver::UpdateSmoothedLoss(double loss, int iter) {
  const size_t window = param_.average_loss();
  if (losses_.size() < window) {
    losses_.push_back(loss);
    smoothed_loss_ = (smoothed_loss_ * (losses_.size() - 1) + loss) / losses_.size();
  } else {
    const size_t idx = (iter - step_start_iter_) % window;
    smoothed_loss_ += (loss - losses_[idx]) / window;
    losses_[idx] = loss;
  }
}

std::vector<double> Solver::TestAll() {
  mark(*this, "testing");
  // The ranks test one model: rank 0's untrained parameters (BatchNorm's
  // running statistics, which each rank gathers on its own shard) for all.
  std::vector<std::pair<Tensor*, Type>> untrained;
  const std::vector<Blob*>& params = net_->learnable_params();
  for (size_t i = 0; i < params.size(); ++i)
    if (!reducer_->Trained(static_cast<int>(i))) untrained.emplace_back(&params[i]->data(), params[i]->data().type());
  reducer_->Broadcast(untrained);
  std::vector<double> first;
  for (size_t i = 0; i < test_nets_.size(); ++i) {
    std::vector<double> s = Test(static_cast<int>(i));
    if (i == 0) first = s;
  }
  return first;
}

std::vector<double> Solver::Test(int id) {
  INFO_LOG << "Iteration " << iter_ << ", Testing net (#" << id << ")";
  Net& net = *test_nets_[id];
  size_t outputs = 0;
  for (const Blob* b : net.output_blobs()) outputs += b->count();
  std::vector<double> scores(outputs + 1, 0.0);  // the outputs' sums, then the loss's
  // With several ranks, each runs its share of the test_iter batches on its
  // own shard of the data (test_iter = kR: the batches one solver would run),
  // and the ranks' sums are added.
  const int iters = param_.test_iter(id);
  const int mine = iters / ranks() + (rank() < iters % ranks() ? 1 : 0);
  for (int i = 0; i < mine; ++i) {
    scores[outputs] += net.Forward();
    size_t k = 0;
    for (const Blob* b : net.output_blobs()) {
      const float* v = b->cpu_data<float>();
      for (size_t j = 0; j < b->count(); ++j, ++k) scores[k] += v[j];
    }
  }
  if (ranks() > 1) comm_->AllReduceSum(scores.data(), static_cast<int64_t>(scores.size()), DOUBLE);
  const double loss = scores[outputs];
  scores.pop_back();
  if (param_.test_compute_loss()) INFO_LOG << "Test loss: " << loss / iters;
  size_t k = 0;
  for (size_t j = 0; j < net.output_blobs().size(); ++j) {
    const int blob = net.output_blob_indices()[j];
    const double w = net.blob_loss_weight(blob);
    for (size_t e = 0; e < net.output_blobs()[j]->count(); ++e, ++k) {
      scores[k] /= iters;
      const std::string loss_msg = w ? str_cat(" (* ", w, " = ", w * scores[k], " loss)") : "";
      INFO_LOG << "    Test net output #" << k << ": " << net.blob_names()[blob] << " = " << scores[k] << loss_msg;
      if (w && !std::isfinite(scores[k]))
        LOG_IF(WARNING, thread_logs_info()) << "Test net output #" << k << ": the test loss " << net.blob_names()[blob] << " is " << scores[k]
                 << " at iteration " << iter_ << ": the net has diverged (or its inputs hold NaN or Inf)";
    }
  }
  return scores;
}

namespace {
// NVCaffe's raw blobs in place of the float ones Net::ToProto wrote (one
// LayerParameter per layer, in order).
void write_raw_blobs(Net& net, bool write_diff, NetParameter* param) {
  for (size_t i = 0; i < net.layers().size(); ++i) {
    std::vector<std::shared_ptr<Blob>>& blobs = net.layers()[i]->blobs();
    for (size_t j = 0; j < blobs.size(); ++j)
      BlobToProto(*blobs[j], param->mutable_layer(static_cast<int>(i))->mutable_blobs(static_cast<int>(j)), write_diff,
                  BlobFormat::kRaw);
  }
}

// "layer 'conv1' parameter 0": where learnable parameter i lives.
std::string describe_param(const Net& net, int i) {
  const Blob* p = net.learnable_params()[static_cast<size_t>(i)];
  for (const auto& l : net.layers())
    for (size_t j = 0; j < l->blobs().size(); ++j)
      if (l->blobs()[j].get() == p) return str_cat("layer '", l->name(), "' parameter ", j);
  return str_cat("learnable parameter ", i);
}

// The weights a state names. Caffe writes the path its run used, often
// relative to that run's working directory: as given, then relative to the
// state's folder, then the file of that name beside the state.
std::string learned_net_path(const std::string& learned_net, const std::string& state_file) {
  std::string model = ResolvePath(learned_net, state_file);
  if (FileExists(model)) return model;
  const size_t slash = state_file.rfind('/');
  const std::string beside = (slash == std::string::npos ? "" : state_file.substr(0, slash + 1)) +
                             learned_net.substr(learned_net.rfind('/') + 1);
  if (FileExists(beside)) return beside;
  fail(state_file, ": learned_net '", learned_net, "' does not exist (nor beside the state file)");
}

// The history blobs of `state` into history(i, k). Order: history_order when
// the file has it; else Caffe's (BVLC, NVCaffe: slot k of parameter i at
// k * params + i) unless the file has rng_state, which marks Cortado's
// earlier files, interleaved per parameter (i * slots + k).
void read_history(const SolverState& state, const std::string& file, const Net& net, int slots,
                  const std::function<Blob&(int, int)>& history) {
  int order = state.has_rng_state() ? 1 : 0;
  if (state.has_history_order()) order = state.history_order();
  if (order != 0 && order != 1)
    fail(file, ": history_order = ", order, "; known orders: 0 (Caffe's: every parameter's first buffer, then every ",
         "second) and 1 (interleaved per parameter)");
  const int params = static_cast<int>(net.learnable_params().size());
  for (int i = 0; i < params; ++i)
    for (int k = 0; k < slots; ++k) {
      const int j = order == 0 ? k * params + i : i * slots + k;
      const BlobProto& b = state.history(j);
      Blob& h = history(i, k);
      const std::string what =
          str_cat(file, ": history blob ", j, " (buffer ", k, " of ", describe_param(net, i), ", ",
                  order == 0 ? "Caffe's order" : "the interleaved order of Cortado's earlier files", ")");
      if (!h.ShapeEquals(b))
        fail(what, " has shape ", shape_string(BlobProtoShape(b)), " in the file and ", h.shape_string(), " in the net");
      h.FromProto(b, false, what);
    }
}
}  // namespace

std::string Solver::Snapshot() {
  ResolvePending();  // the loss scale and the skipped steps it saves
  // Every rank's generator state goes into rank 0's file. A collective:
  // every rank snapshots at the same iteration (intervals, agreed actions).
  mark(*this, "a snapshot");
  std::vector<std::string> rank_states;
  if (ranks() > 1) {
    for (int k = 0; k < ranks(); ++k) {
      std::string s = rank() == k ? rng_state() : std::string();
      s.resize(static_cast<size_t>(comm_->Max(static_cast<int64_t>(s.size()))));  // rank k's length
      comm_->Broadcast(s.data(), static_cast<int64_t>(s.size()), k);
      rank_states.push_back(std::move(s));
    }
  }
  if (rank() != 0) return "";  // the ranks' weights are the same: rank 0 writes them
  std::string prefix = param_.snapshot_prefix();
  if (prefix.empty()) prefix = param_.net().substr(0, param_.net().rfind('.'));
  const std::string base = str_cat(prefix, "_iter_", iter_);
  const bool h5 = param_.snapshot_format() == SolverParameter::HDF5;
  const std::string model = base + (h5 ? ".caffemodel.h5" : ".caffemodel");
  // HDF5 weights are typed datasets: Caffe's float blobs feed them.
  const BlobFormat format = SnapshotBlobFormat(param_);
  NetParameter net_param;
  net_->ToProto(&net_param, param_.snapshot_diff());
  if (format == BlobFormat::kRaw && !h5) write_raw_blobs(*net_, param_.snapshot_diff(), &net_param);
  if (h5) {
    // Caffe's layout for the weights. The solver state stays a binary proto
    // (.solverstate, not Caffe's .solverstate.h5): it holds what Caffe's
    // HDF5 state has no place for (random generators, the loss scale).
    INFO_LOG << "Snapshotting to HDF5 file " << model;
    hdf5::WriteWeights(model, net_param);
  } else {
    INFO_LOG << "Snapshotting to binary proto file " << model;
    WriteBinaryProto(model, net_param);
  }
  SolverState state;
  state.set_iter(iter_);
  state.set_learned_net(model);
  state.set_current_step(current_step_);
  state.set_rng_state(rng_state());
  for (const std::string& s : rank_states) state.add_rank_rng_state(s);
  state.set_loss_scale(loss_scale_);
  state.set_clean_iterations(clean_iterations_);
  state.set_skipped_iterations(skipped_iterations_);
  state.set_minimum_loss(minimum_loss_);
  state.set_iter_last_event(iter_last_event_);
  if (param_.larc_turbo()) {
    LarcCorrelationToHost();
    for (double c : larc_corr_) state.add_larc_turbo_correlation(c);
  }
  // Caffe's order: every parameter's first buffer, then every second
  // (Adam's m then v, AdaDelta's mean g^2 then mean update^2), as BVLC and
  // NVCaffe lay out `history`; said explicitly, since a file with rng_state
  // and without history_order is one of Cortado's earlier, interleaved ones.
  state.set_history_order(0);
  const int params = static_cast<int>(net_->learnable_params().size());
  for (int k = 0; k < history_slots(); ++k)
    for (int i = 0; i < params; ++i) BlobToProto(history(i, k), state.add_history(), false, format);
  const std::string state_file = base + ".solverstate";
  INFO_LOG << "Snapshotting solver state to binary proto file " << state_file;
  WriteBinaryProto(state_file, state);
  return model;
}

void Solver::Restore(const std::string& state_file) {
  SolverState state;
  ReadBinaryProto(state_file, &state);
  iter_ = state.iter();
  current_step_ = state.current_step();
  minimum_loss_ = state.minimum_loss();
  iter_last_event_ = state.iter_last_event();
  larc_corr_.assign(state.larc_turbo_correlation().begin(), state.larc_turbo_correlation().end());
  larc_corr_on_device_ = false;
  if (!larc_corr_.empty() && larc_corr_.size() != net_->learnable_params().size())
    fail(state_file, ": holds ", larc_corr_.size(), " larc_turbo_correlation values for ",
         net_->learnable_params().size(), " parameters");
  if (state.has_learned_net()) net_->CopyTrainedLayersFrom(learned_net_path(state.learned_net(), state_file));
  // The weights and history now come from the host: a CUDA graph captured
  // before would read stale device copies. Capture again after two deferred
  // steps have brought them to the device.
  DropGraphs(true);
  const size_t slots = net_->learnable_params().size() * history_slots();
  if (static_cast<size_t>(state.history_size()) != slots)
    fail(state_file, ": holds ", state.history_size(), " history blobs; this ", type(), " solver over ",
         net_->learnable_params().size(), " parameters keeps ", slots);
  read_history(state, state_file, *net_, history_slots(), [this](int i, int k) -> Blob& { return history(i, k); });
  if (ranks() > 1 && state.rank_rng_state_size() == ranks()) {
    set_rng_state(state.rank_rng_state(rank()));
  } else {
    if (state.has_rng_state()) set_rng_state(state.rng_state());
    if (ranks() > 1 || state.rank_rng_state_size() > 0)
      LOG(WARNING) << state_file << " was written by a run of " << std::max(state.rank_rng_state_size(), 1)
                   << " rank(s), this one has " << ranks() << ": every rank restarts from rank 0's random "
                   << "generator, so random draws (dropout) differ from the run that wrote it";
  }
  if (state.has_loss_scale()) {
    clean_iterations_ = state.clean_iterations();
    skipped_iterations_ = state.skipped_iterations();
    SetLossScale(state.loss_scale());
  }
  net_->SeekData(static_cast<int64_t>(iter_) * param_.iter_size());
}

// ---- the update -----------------------------------------------------------------------

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

void Solver::LogStep(int iter, const StepRecord& r) const {
  if (r.clipped)
    INFO_LOG << "Gradient clipping: scaling down gradients (L2 norm " << r.clip_norm << " > " << param_.clip_gradients()
             << ") by scale factor " << r.clip_factor;
  if (r.skipped)
    INFO_LOG << "Iteration " << iter << ": a weight gradient holds Inf or NaN; update skipped, loss scale "
             << ScaleText(r.scale_used) << " -> " << ScaleText(r.scale_after) << " (" << skipped_iterations_
             << " skipped steps)";
  if (r.grown)
    INFO_LOG << "Iteration " << iter << ": " << param_.loss_scale_window() << " clean steps, loss scale "
             << ScaleText(r.scale_used) << " -> " << ScaleText(r.scale_after);
}

// ---- across ranks ------------------------------------------------------------------------

void Solver::SyncParameters() {
  if (ranks() <= 1) return;
  std::vector<std::pair<Tensor*, Type>> tensors;
  const std::vector<Blob*>& params = net_->learnable_params();
  for (size_t i = 0; i < params.size(); ++i) {
    tensors.emplace_back(&params[i]->data(), data_type_);
    for (int k = 0; k < history_slots(); ++k) tensors.emplace_back(&history(static_cast<int>(i), k).data(), data_type_);
  }
  reducer_->Broadcast(tensors);
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
  mark(*this, "the gradient sums");
  if (reducer_->active()) reducer_->Reduce();
  mark(*this, "the update");
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
