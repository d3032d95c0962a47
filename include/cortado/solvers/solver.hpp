#pragma once
// The training loop, as in Caffe: learning-rate policies, iter_size gradient
// accumulation, periodic testing, display with a smoothed loss and
// images/second, snapshots (.caffemodel + .solverstate, written to a
// temporary name and renamed), resume, and signal actions.
//
// Mixed precision. One iteration is: forward; the loss gradient times the
// loss scale S; backward (gradients in each layer's Btype); a look for
// Inf/NaN in every weight gradient (a step that overflowed is skipped:
// weights and history untouched, and with dynamic scaling S shrinks); then
// per parameter, in FP32: g = dW / (S * iter_size), times the global
// clipping factor, plus weight decay; the rule's update of the history and
// the weights, in the solver data type.
//
// Solver data type (solver_data_type; DOUBLE for DOUBLE nets):
// - FLOAT: the weights' data tensor is kept current in FP32 (the master
//   copy); layers that store FP16 or BF16 read a copy rounded from it, which
//   the Tensor converts once after each update. Snapshots store the FP32
//   values.
// - FLOAT16: weights and history are stored in FP16 (no master copy); the
//   arithmetic still runs in FP32 and rounds once per stored value.
// - BFLOAT16 is refused (Validate): BF16 weights would lose small updates.
//
// The update rule (the solver's `type`) is one entry of the rule registry
// (solvers/update_rule.hpp): a step written once that the host loop and the
// fused GPU update both run, per value, after the steps above.
//
// Learning-rate policies at iteration it (Caffe's formulas):
//   fixed      base_lr
//   step       base_lr * gamma ^ floor(it / stepsize)
//   exp        base_lr * gamma ^ it
//   inv        base_lr * (1 + gamma * it) ^ (-power)
//   multistep  base_lr * gamma ^ (number of stepvalue entries <= it)
//   poly       (base_lr - min_lr) * (1 - it / max_iter) ^ power + min_lr
//   sigmoid    base_lr / (1 + exp(-gamma * (it - stepsize)))
//   plateau    base_lr * gamma ^ k (NVCaffe's declaration, Intel Caffe's
//              definition): k, from 0 up to the number of plateau_winsize
//              entries, grows by 1 once plateau_winsize[k] iterations have
//              passed since the smoothed loss last reached a new minimum or k
//              last grew (ApplyUpdate tracks both; snapshots keep them).
// NVCaffe's warm-up comes first: for it < rampup_interval the rate is
// rampup_lr + (base_lr - rampup_lr) * (it / rampup_interval)^2 (Cortado's
// earlier linear warm-up: linear_rampup_interval, the same without the
// square); the policy applies after it. Whatever the policy, the warm-up
// included, a rate below min_lr is min_lr (NVCaffe).
// Momentum (momentum_policy; SGD's and Nesterov's momentum, LARC's factor):
//   fixed  momentum
//   poly   momentum + (max_momentum - momentum) * (it / max_iter) ^ momentum_power
//   opt    (1 - sqrt(rate) / 2) ^ 2, at most max_momentum where that is set
// Weight decay (weight_decay_policy; every rule):
//   fixed  weight_decay
//   poly   weight_decay + (max_weight_decay - weight_decay) * (it / max_iter) ^ weight_decay_power
// LARC (larc, larc_policy, larc_eta, larc_turbo): NVCaffe's, larc.hpp.
//
// Several ranks (SolverSetup::comm, communicator.hpp; run_ranks.hpp runs them
// as the threads of one process): each rank's solver trains a full replica
// on its own shard of the data (the train and test nets' Data layers read
// shard `rank` of `ranks`), and before the overflow check the ranks sum
// their gradients (with an asynchronous engine, in reduce_buckets buckets
// started during the step's last backward: gradient_reducer.hpp), which the unscale
// divides by S * iter_size * ranks: the update of a batch of B per rank is
// the update of one solver with batch ranks * B. At Solve's start every
// rank takes rank 0's weights and history; a random_seed left unset is
// drawn on rank 0 and shared (the nets are built from it; then rank r
// draws, dropout masks for one, from random_seed + 1 + r, and snapshots
// keep every rank's generator). Testing is shared too: each rank runs its
// share of test_iter on its shard, and the scores are the ranks' sums over
// test_iter (with test_iter a multiple of the ranks, the scores of one
// solver testing alone). Rank 0 alone writes snapshots, and it displays the
// ranks' mean smoothed loss and train outputs; the signal actions are
// agreed on each iteration (STOP over SNAPSHOT over NONE), so all ranks
// stop or snapshot at the same iteration.
//
// TensorBoard (tensorboard_dir; trainer train --tensorboard=DIR): rank 0
// writes an event file (util/event_writer.hpp), opened by the first Step,
// with the values of the log lines at the iterations they show
// (docs/tensorboard.md lists the tags): at each display the smoothed loss,
// the train net's outputs, images/s, the rate, the loss scale and the
// skipped steps; at each test the test nets' outputs (and loss, with
// test_compute_loss); at the displays tensorboard_histogram_interval picks,
// a histogram of each learnable parameter's gradient, read after the ranks'
// sum and divided by S * iter_size * ranks (the gradient of the mean loss
// the update starts from), non-finite values left out.

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cortado/comm/communicator.hpp"
#include "cortado/comm/gradient_reducer.hpp"
#include "cortado/comm/injected_fault.hpp"
#include "cortado/net/net.hpp"
#include "cortado/solvers/iteration_graphs.hpp"
#include "cortado/solvers/signals.hpp"
#include "cortado/solvers/step_state.hpp"
#include "cortado/solvers/update_plan.hpp"
#include "cortado/solvers/update_rule.hpp"

namespace cortado {

class EventWriter;
class UpdateExecutor;

/// How a solver is set up beyond its SolverParameter: where its nets run,
/// and an optional edit applied to every net parameter (train and test)
/// before the net is built (trainer time's --batch_size, for one).
struct SolverSetup {
  SolverSetup(std::shared_ptr<const Context> c = nullptr) : ctx(std::move(c)) {}  // NOLINT: implicit on purpose
  std::shared_ptr<const Context> ctx;  // null: the CPU
  std::function<void(NetParameter*)> edit_net;
  /// The ranks this solver trains with (null or one rank: alone).
  std::shared_ptr<Communicator> comm;
  /// Sums the gradients through `comm` even when it has one rank, in
  /// buckets where the engine is asynchronous, as several ranks do (alone
  /// the sum is skipped: a sum of one is the values). A test hook: it runs
  /// an engine's gradient path, NCCL's included, on one device.
  bool reduce_alone = false;
  /// Runs Step's iterations between displays deferred on the host too, as
  /// the device update runs them (the host reads each step's record at the
  /// next display, not at the step). A test hook: it runs the deferred path's
  /// bookkeeping where no GPU is.
  bool defer_host_steps = false;
  /// A fault to carry out on purpose, in the middle of the backward of one
  /// iteration on one rank (comm/injected_fault.hpp; trainer train's
  /// --inject_fault): checks that a job fails as a whole.
  InjectedFault fault;
};

class Solver {
 public:
  /// `info` locates fields of the solver prototxt (and its embedded nets);
  /// `setup.ctx` is where the nets run (null: the CPU). The device comes
  /// from the caller (trainer's --gpu), not from solver_mode.
  /// The rule is the registered one of param.type(); an unknown type is an
  /// error naming the field's line and the known types.
  explicit Solver(const SolverParameter& param, const SourceInfo& info = SourceInfo(),
                  SolverSetup setup = SolverSetup());
  virtual ~Solver() = default;
  /// Reads a solver prototxt and makes the solver its `type` names.
  static std::unique_ptr<Solver> Create(const std::string& solver_file, std::shared_ptr<const Context> ctx = nullptr);
  static std::unique_ptr<Solver> Create(const SolverParameter& param, const SourceInfo& info = SourceInfo(),
                                        SolverSetup setup = SolverSetup());
  /// The solver types Create knows (the registered rules), sorted.
  static std::vector<std::string> Types();

  /// Trains to max_iter, resuming from a .solverstate first if given.
  void Solve(const std::string& resume_file = "");
  /// Runs `iters` iterations.
  ///
  /// Deferred steps. On the GPU (device update), an iteration that neither
  /// displays nor tests never waits for the device: the loss tops are summed
  /// into a device record instead of read, and the overflow check, the skip
  /// decision, the unscale and clipping factor and the loss-scale update
  /// (step_state.hpp's DecideStep) run on the device, the update kernels
  /// reading the decision there. The host reads the records of the steps
  /// since the last display at the next display, test, snapshot or the end
  /// of Step (at most kMaxDeferredSteps apart), and only then logs their
  /// skips, clippings and scale changes, each with its own iteration; the
  /// smoothed loss, the weights and every log line are the eager path's.
  /// Eager instead: the "plateau" policy (it reads the loss every step),
  /// LARC, clipping with several ranks, and the field defer_steps: false. After
  /// two deferred steps, a deferred iteration on the GPU is captured as a
  /// CUDA graph and replayed where the net and the rule allow it
  /// (solvers/step_graph.hpp).
  void Step(int iters);
  /// The update half of an iteration, for the gradients now in the net:
  /// checks them for Inf/NaN, adjusts the loss scale, updates every
  /// parameter; returns false when the step was skipped. An applied update
  /// leaves every gradient zero (the device update clears them in its own
  /// pass, as NVCaffe's fused update does); a skipped one leaves them as
  /// they were. Step calls it after backward; trainer time calls it alone to
  /// time it. The iteration count does not advance.
  bool ApplyUpdate();
  /// Zeroes the net's gradients before an iteration, unless the last
  /// applied update already did and nothing ran since.
  void ClearGradients();
  void Restore(const std::string& state_file);
  /// Writes <prefix>_iter_<N>.caffemodel and .solverstate; returns the model path.
  std::string Snapshot();
  /// Runs every test net; returns the mean of each output value of net 0.
  std::vector<double> TestAll();

  /// The policy's rate at the current (or a given) iteration, with warm-up.
  double GetLearningRate() const { return GetLearningRate(iter_); }
  /// "plateau" reads its step from the solver's state, whatever `iter`.
  double GetLearningRate(int iter) const;
  /// The momentum and weight decay of the current (or a given) iteration,
  /// their policies applied.
  double GetMomentum() const { return GetMomentum(iter_); }
  double GetMomentum(int iter) const;
  double GetWeightDecay() const { return GetWeightDecay(iter_); }
  double GetWeightDecay(int iter) const;
  int iter() const { return iter_; }
  /// The collectives that summed gradients so far (buckets, or one per type).
  int64_t gradient_sums() const { return reducer_->sums(); }
  const SolverParameter& param() const { return param_; }
  Net* net() { return net_.get(); }
  const std::vector<std::unique_ptr<Net>>& test_nets() const { return test_nets_; }
  double smoothed_loss() const { return smoothed_loss_; }
  bool requested_early_exit() const { return requested_early_exit_; }
  /// Called at the end of each iteration; SNAPSHOT or STOP act on it.
  void set_action_function(std::function<SolverAction()> f) { action_ = std::move(f); }
  /// The solver type, e.g. "SGD".
  const char* type() const { return rule_.type.c_str(); }
  /// The update rule (history slots, decay handling, host and device steps).
  const UpdateRuleInfo& rule() const { return rule_; }

  /// The current loss scale S (1 without scaling).
  float loss_scale() const { return loss_scale_; }
  /// Steps skipped because a gradient held Inf or NaN.
  int skipped_iterations() const { return skipped_iterations_; }
  /// Whether the last step was skipped.
  bool last_step_skipped() const { return last_step_skipped_; }
  /// Steps run deferred so far, and the host's reads of their records (each
  /// one wait on the device).
  int64_t deferred_steps() const { return deferred_steps_; }
  int64_t deferred_reads() const { return deferred_reads_; }
  /// Passes run as a replay of a CUDA graph (iter_size per iteration), and captures.
  int64_t graph_launches() const { return graphs_.launches(); }
  int64_t graph_captures() const { return graphs_.captures(); }
  /// Drops the CUDA graphs (captured again after the warm-up steps): for a
  /// caller that may have written weights or history on the host between
  /// steps (the Python API), which a graph's replay would not upload.
  void DropGraphs() { graphs_.Drop(true); }
  /// The solver data type (DOUBLE, FLOAT or FLOAT16).
  Type data_type() const { return data_type_; }
  /// History blob `slot` of parameter `id`, stored in data_type().
  Blob& history(int id, int slot = 0);
  /// Called after backward and before the overflow check (tests inject Inf here).
  /// Called after each step's backward. With several ranks and an
  /// asynchronous engine, buckets of gradients may still be being summed
  /// then: read them only after ApplyUpdate's sum, never write them.
  void set_after_backward(std::function<void(Solver&)> f) { after_backward_ = std::move(f); }
  /// This solver's rank and the number of ranks (0 and 1 alone).
  int rank() const { return comm_ ? comm_->rank() : 0; }
  int ranks() const { return comm_ ? comm_->size() : 1; }
  /// Copies rank 0's weights and history to every rank (a no-op alone);
  /// Solve calls it before the first iteration.
  void SyncParameters();
  /// The TensorBoard event file this solver writes (empty: none, or not
  /// opened yet: the first Step opens it).
  std::string event_file() const;

 protected:
  [[noreturn]] void ParamFail(const std::string& field, const std::string& msg) const;

  SolverParameter param_;
  SourceInfo info_;
  UpdateRuleInfo rule_;
  std::shared_ptr<const Context> ctx_;
  std::function<void(NetParameter*)> edit_net_;
  std::shared_ptr<Communicator> comm_;  // null alone
  int iter_ = 0;
  int current_step_ = 0;
  std::unique_ptr<Net> net_;
  std::vector<std::unique_ptr<Net>> test_nets_;
  Type data_type_ = FLOAT;

 private:
  int history_slots() const { return rule_.history_slots; }
  void InitNets();
  void Validate() const;
  void ValidateSchedules() const;
  std::vector<double> Test(int test_net_id);
  /// Adds iteration `iter`'s loss to the smoothed loss of the current Step.
  void UpdateSmoothedLoss(double loss, int iter);
  void DisplayOutputs(double elapsed_s, int iters);
  // The executors of ApplyUpdate's plan (solvers/update_plan.hpp) read the
  // net, the rule, the history and the LARC state.
  friend class HostUpdate;
  friend class DeviceUpdate;
  /// The executor of this step: the device's (CUDA builds, GPU context,
  /// a device update for the rule and every gradient type) or the host's.
  UpdateExecutor& Executor();
  /// Whether the device executor can run this step; says once why not.
  bool GpuUpdateSupported();
  /// The state DecideStep starts from, and the solver's copy of the state it
  /// leaves (the loss tops' gradients take a changed scale).
  StepState CurrentState() const { return StepState{loss_scale_, clean_iterations_, skipped_iterations_}; }
  void TakeState(const StepState& s);
  /// The log lines of iteration `iter`'s step (clipping, skip, growth).
  void LogStep(int iter, const StepRecord& r) const;
  /// Whether this iteration may run deferred (see Step).
  bool CanDefer(bool display, bool testing);
  /// One deferred iteration: forward and backward, the loss summed on the
  /// executor's side, the sums, the executor's DeferredStep.
  void DeferredIteration();
  /// The plan of a deferred step (DecideStep sets the factor).
  UpdatePlan DeferredPlan() const;
  /// One iter_size pass of a deferred iteration from layer first_layer on:
  /// forward, the loss sums, backward, and after the last pass the step
  /// (the caller began the record and holds a DeferLossReads).
  void DeferredPass(UpdateExecutor& exec, const UpdatePlan& plan, int slot, int first_layer, bool last);
  /// A deferred iteration as a CUDA graph's replay (capturing it first when
  /// needed); false where graphs do not apply (the caller runs it then).
  bool GraphIteration(UpdateExecutor& exec, const UpdatePlan& plan, int slot);
  /// Reads the deferred steps' records (one wait) and takes them in order:
  /// smoothed loss, log lines, the solver's copy of the state.
  void ResolvePending();
  void SetLossScale(float s);
  /// The "plateau" policy's bookkeeping for this iteration (smoothed loss
  /// minimum, step); every update calls it once, before reading the rate.
  void AdvancePlateau();
  /// larc_turbo: brings the running correlations back from the device.
  void LarcCorrelationToHost();
  /// Marks this rank's phase, for the diagnosis of a hung run (comm/rank_phase.hpp).
  void MarkPhase(const char* phase) const;
  // TensorBoard (solver_events.cpp). OpenEvents opens the event file where
  // tensorboard_dir is set, on rank 0, once; EventScalar writes a value at
  // the current iteration (nothing without a file); FlushEvents ends a
  // display's or a test's values; HistogramsAt says whether the display at
  // `iter` writes the gradient histograms, which WriteGradientHistograms
  // does (ApplyUpdate, after the ranks' sum).
  void OpenEvents();
  void EventScalar(const std::string& tag, double value);
  void FlushEvents();
  bool HistogramsAt(int iter) const;
  // The tag of value k of an output blob of `count` values: <group>/<blob>,
  // and <group>/<blob>/<k> where the blob holds several.
  static std::string OutputTag(const std::string& group, const std::string& blob, size_t k, size_t count);
  void WriteGradientHistograms();

  std::vector<std::shared_ptr<Blob>> history_;
  std::vector<double> losses_;
  double smoothed_loss_ = 0;
  int64_t epoch_records_ = -1;  // the train net's records an epoch (-1: not asked yet; 0: no Data layer)
  bool requested_early_exit_ = false;
  std::function<SolverAction()> action_;
  std::function<void(Solver&)> after_backward_;
  float loss_scale_ = 1;
  int clean_iterations_ = 0;
  int skipped_iterations_ = 0;
  bool last_step_skipped_ = false;
  bool gradients_zero_ = false;  // set by an applied update, reset by ClearGradients
  StepRule step_rule_;
  int step_start_iter_ = 0;       // the current Step's first iteration (the smoothed loss's window)
  std::vector<int> pending_;      // deferred iterations whose records the host has not read
  bool state_on_executor_ = false;  // the executor's StepState is the solver's (no eager step since)
  bool defer_host_steps_ = false;
  bool defer_enabled_ = true;     // the field defer_steps
  int64_t deferred_steps_ = 0, deferred_reads_ = 0;
  IterationGraphs graphs_;  // the CUDA graphs of deferred iterations
  // The "plateau" policy's state (current_step_ is its step).
  float minimum_loss_ = 1e38f;
  int iter_last_event_ = 0;
  // larc_turbo's running correlation per parameter (larc.hpp); newest on the
  // device while the GPU update keeps it there.
  std::vector<double> larc_corr_;
  bool larc_corr_on_device_ = false;
  // The plan's executors, made when first needed; shared_ptrs so that the
  // type can stay incomplete here (CPU builds never make the device's).
  std::shared_ptr<UpdateExecutor> host_update_, device_update_;
  bool gpu_fallback_logged_ = false;
  // The ranks' gradient sums and agreements (null only while InitNets runs).
  std::unique_ptr<GradientReducer> reducer_;
  InjectedFault fault_;  // SolverSetup::fault
  /// Sets the net's backward hook for fault_ where this rank's iteration is
  /// its iteration, and clears it after.
  void ArmInjectedFault();
  // TensorBoard: the event file (rank 0, tensorboard_dir set; a shared_ptr
  // for the incomplete type), whether this step's ApplyUpdate writes the
  // gradient histograms, and their tags (learnable parameter order).
  std::shared_ptr<EventWriter> events_;
  bool histograms_due_ = false;
  std::vector<std::string> grad_tags_;
};

}  // namespace cortado
