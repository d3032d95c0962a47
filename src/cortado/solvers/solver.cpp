// The Solver (solvers/solver.hpp): construction, the checks of its fields,
// its nets, and the loop (Solve, Step, display, test). Beside it:
// solver_schedules.cpp (rate, momentum and decay policies),
// solver_update.cpp (the update of an iteration), solver_deferred_steps.cpp
// (deferred iterations and their CUDA graphs), solver_snapshot.cpp.
#include "cortado/solvers/solver.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <random>
#include <sstream>

#include "cortado/comm/rank_phase.hpp"
#include "cortado/io/hdf5.hpp"
#include "cortado/layer_traits.hpp"
#include "cortado/layers/data_layer.hpp"
#include "cortado/util/logging.hpp"
#include "cortado/util/rng.hpp"

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

// x with `digits` decimals.
std::string FixedText(double x, int digits) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(digits) << x;
  return o.str();
}

// Seconds as h:mm:ss.
std::string ClockText(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  return buf;
}

// A loss scale as logged: all 9 digits a float needs to be read back exactly
// (the stream's default 6 turn 16777216 into 1.67772e+07), so that log
// parsers see the scale the solver used.
std::string ScaleText(float scale) {
  std::ostringstream s;
  s << std::setprecision(9) << scale;
  return s.str();
}
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
      comm_(std::move(setup.comm)),
      fault_(setup.fault) {
  Validate();
  if (comm_) comm_->set_timeout(param_.collective_timeout());
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
  defer_enabled_ = param_.defer_steps();
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
  if (!(param_.collective_timeout() >= 0) || std::isinf(param_.collective_timeout()))
    ParamFail("collective_timeout", str_cat("must be a number of seconds, at least 0 (0: no limit), got ",
                                            param_.collective_timeout()));
  if (param_.max_iter() < 0) ParamFail("max_iter", "must not be negative");
  // The histograms are written at displays, which read the device anyway
  // (an iteration between displays may run deferred, with no host read).
  if (param_.tensorboard_histogram_interval() > 0 &&
      (param_.display() <= 0 || param_.tensorboard_histogram_interval() % param_.display() != 0))
    ParamFail("tensorboard_histogram_interval", str_cat("= ", param_.tensorboard_histogram_interval(),
                                                        " must be a multiple of display (", param_.display(), ")"));
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

void Solver::Solve(const std::string& resume_file) {
  INFO_LOG << "Solving " << net_->name();
  INFO_LOG << "Learning Rate Policy: " << param_.lr_policy();
  requested_early_exit_ = false;
  if (!resume_file.empty()) {
    INFO_LOG << "Restoring previous solver status from " << resume_file;
    Restore(resume_file);
  }
  MarkPhase("sharing rank 0's parameters");
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
    MarkPhase("the final display (the loss's mean over the ranks)");
    const double loss = reducer_->Mean({smoothed_loss_})[0];
    INFO_LOG << "Iteration " << iter_ << ", loss = " << loss;
    EventScalar("train/loss", loss);
    FlushEvents();
  }
  if (param_.test_interval() && iter_ % param_.test_interval() == 0) TestAll();
  MarkPhase("done");
  INFO_LOG << "Optimization Done.";
}

void Solver::Step(int iters) {
  OpenEvents();
  const int start_iter = iter_, stop_iter = iter_ + iters;
  step_start_iter_ = start_iter;
  losses_.clear();
  smoothed_loss_ = 0;
  auto last_display = std::chrono::steady_clock::now();
  int last_display_iter = iter_;
  while (iter_ < stop_iter) {
    ArmInjectedFault();
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
      MarkPhase("forward and backward");
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
      histograms_due_ = display && HistogramsAt(iter_);
      ApplyUpdate();
      if (display) {
        const double rate = GetLearningRate();
        INFO_LOG << "Iteration " << iter_ << ", lr = " << rate;
        if (param_.dynamic_loss_scale() || scale_used != 1 || skipped_iterations_)
          INFO_LOG << "    loss scale = " << ScaleText(scale_used) << ", skipped steps = " << skipped_iterations_;
        EventScalar("train/lr", rate);
        EventScalar("train/loss_scale", scale_used);
        EventScalar("train/skipped_steps", skipped_iterations_);
        FlushEvents();
      }
    }
    ++iter_;
    MarkPhase("agreeing on the signals' action");
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
  MarkPhase("waiting for the device after the last step");
  net_->context().Synchronize();
}

void Solver::DisplayOutputs(double elapsed_s, int iters) {
  // The smoothed loss and the train net's outputs, as the ranks' mean (one
  // collective): with several ranks the log speaks for the whole batch.
  const BlobVec& outputs = net_->output_blobs();
  MarkPhase("the display (the outputs' mean over the ranks)");
  std::vector<double> shown = {smoothed_loss_};
  for (const Blob* b : outputs) {
    const float* v = b->cpu_data<float>();
    shown.insert(shown.end(), v, v + b->count());
  }
  shown = reducer_->Mean(std::move(shown));
  INFO_LOG << "Iteration " << iter_ << ", loss = " << shown[0];
  EventScalar("train/loss", shown[0]);
  size_t at = 1;
  for (size_t j = 0; j < outputs.size(); ++j) {
    const std::string& name = net_->blob_names()[net_->output_blob_indices()[j]];
    const double w = net_->blob_loss_weight(net_->output_blob_indices()[j]);
    for (size_t k = 0; k < outputs[j]->count(); ++k, ++at) {
      const float v = static_cast<float>(shown[at]);
      std::string loss_msg = w ? str_cat(" (* ", w, " = ", w * v, " loss)") : "";
      INFO_LOG << "    Train net output #" << at - 1 << ": " << name << " = " << v << loss_msg;
      EventScalar(OutputTag("train_net", name, k, outputs[j]->count()), v);
    }
  }
  if (iters > 0 && elapsed_s > 0 && !net_->top_vecs().empty() && !net_->top_vecs()[0].empty()) {
    const Blob* first = net_->top_vecs()[0][0];
    const double batch = first->num_axes() ? first->shape(0) : 1;
    const double ips = iters * param_.iter_size() * batch * ranks() / elapsed_s;  // all ranks'
    // Epochs (where the net reads a Data layer) and the time to max_iter at this pace.
    if (epoch_records_ < 0) epoch_records_ = EpochRecords(*net_);
    const double per_iter = param_.iter_size() * batch * ranks();
    const std::string epochs =
        epoch_records_ > 0 ? str_cat("; epoch ", FixedText(iter_ * per_iter / epoch_records_, 2), " of ",
                                     FixedText(param_.max_iter() * per_iter / epoch_records_, 2))
                           : "";
    const double left_s = std::max(0, param_.max_iter() - iter_) * elapsed_s / iters;
    INFO_LOG << "    " << ips << " images/s, " << iters / elapsed_s << " iter/s over the last " << iters
             << " iterations" << epochs << "; " << ClockText(left_s) << " to go";
    EventScalar("train/images_per_s", ips);
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

void Solver::ArmInjectedFault() {
  if (!fault_.armed() || fault_.rank != rank()) return;
  if (iter_ != fault_.iteration) {
    net_->set_backward_hook(nullptr);
    return;
  }
  // In the middle of the backward: some gradients are complete, some not.
  const int middle = static_cast<int>(net_->layers().size()) / 2;
  net_->set_backward_hook([this, middle](int layer) {
    if (layer <= middle) CarryOut(fault_, net_->layer_names()[static_cast<size_t>(layer)]);
  });
}

void Solver::MarkPhase(const char* phase) const { set_rank_phase(rank(), phase, iter_); }

}  // namespace cortado
