// One mixed-precision update, decided once and run by one of two executors.
//
// Solver::ApplyUpdate makes every decision of a step the same way wherever
// the arithmetic runs:
//
//   1. the ranks' gradient sums (GradientReducer::Reduce);
//   2. the check: does a gradient hold Inf or NaN (when steps may be
//      skipped: dynamic loss scaling or skip_nonfinite_steps), and the sum of
//      squares of the raw gradients (when clip_gradients >= 0);
//   3. skip (the loss scale backs off, the gradients stay as they were) or
//      go on;
//   4. factor = 1 / (S * iter_size * ranks), times the clipping factor
//      clip_gradients / ||g|| when the unscaled norm exceeds it: the unscale
//      comes right after backward, before clipping and weight decay
//      (3, 4 and 7 are step_state.hpp's DecideStep);
//   5. the rate (policy, warm-up, plateau), momentum and weight decay of the
//      iteration;
//   6. the executor's update: per parameter, g = factor * dW, the L2 or L1
//      decay added to g (coupled rules) or left to the rule (AdamW), LARC's
//      trust ratio, then the rule's step (solvers/update_rule.hpp) on the
//      solver-data-type weights and history; every gradient ends zero;
//   7. the loss-scale growth after a clean step.
//
// An executor owns steps 2 and 6 for one place:
//   - the host executor (CPU contexts, and GPU contexts whose rule or types
//     have no device update): FP32 scratch per parameter, the rule's
//     update_cpu, the tensors moved to the host;
//   - the device executor (CUDA builds, GPU context): multi-tensor kernels,
//     one launch per gradient type and pass, one wait (the check's read-back).
// Adding a decision means adding it here once; adding a place to run means
// one more executor.
//
// A deferred step (Solver::Step between displays) hands the executor steps
// 2 to 7 whole: DeferredStep checks, decides (DecideStep, on the device in
// the device executor) and updates, and writes what happened into a
// StepRecord that the host reads later (FetchRecords), so that the device
// executor's iteration has no wait. The host executor runs the same calls
// at once (the test hook SolverSetup::defer_host_steps).
#pragma once

#include <memory>
#include <vector>

#include "cortado/solvers/step_state.hpp"

namespace cortado {

class Solver;

// The decisions of one step (4 and 5 above), the same for every executor.
struct UpdatePlan {
  bool skip_overflow = false;  // a step whose gradients hold Inf/NaN is skipped
  bool clip = false;           // clip_gradients >= 0: the check sums squares
  double factor = 1;           // unscale (and clip) factor for the raw gradients
  double rate = 0;             // the iteration's base learning rate
  double momentum = 0;
  double weight_decay = 0;     // before each parameter's decay_mult
  bool l1 = false;             // regularization_type "L1"
  /// Deferred device steps: the decision in device memory, which the update
  /// reads instead of `factor` (it skips the weights when told to, and
  /// zeroes the gradients either way). Null otherwise.
  const StepControl* control = nullptr;
};

// The check's findings (step 2 above).
struct GradientCheck {
  bool nonfinite = false;  // only looked for when plan.skip_overflow
  double sumsq = 0;        // of the raw gradients; only when plan.clip
};

class UpdateExecutor {
 public:
  virtual ~UpdateExecutor() = default;
  /// Step 2 for the gradients now in the net (after the ranks' sums).
  virtual GradientCheck Check(const UpdatePlan& plan) = 0;
  /// Whether Check's sum of squares is the same on every rank holding the
  /// same gradients. The device adds its blocks' sums in no fixed order:
  /// the ranks then take the mean, so that all clip alike.
  virtual bool exact_sums() const = 0;
  /// Step 6; leaves every gradient zero.
  virtual void Apply(const UpdatePlan& plan) = 0;
  /// larc_turbo: the running correlations, brought to the solver's host copy
  /// if this executor keeps them elsewhere (snapshots read the host copy).
  virtual void LarcCorrelationToHost() {}

  // ---- deferred steps --------------------------------------------------
  /// Whether the steps run on the device (where deferring them saves a wait).
  virtual bool device() const = 0;
  /// The state the next deferred step starts from (after eager steps).
  virtual void PutState(const StepState& s) = 0;
  /// Zeroes record `slot` (< kMaxDeferredSteps) for the iteration to come.
  virtual void BeginRecord(int slot) = 0;
  /// Adds the net's weighted loss tops, as forward left them, to record
  /// `slot`'s loss (the sum LayerBase::Forward would have returned).
  virtual void AddLoss(int slot) = 0;
  /// Steps 2 to 7 for the gradients now in the net (after the ranks' sums),
  /// with `rule`, into record `slot`: the update if not skipped, every
  /// gradient zero after it either way, the loss tops' gradients at the new
  /// scale. plan.factor and plan.control are the executor's to set.
  virtual void DeferredStep(const UpdatePlan& plan, const StepRule& rule, int slot) = 0;
  /// Waits for the deferred steps, copies the first n records to *records
  /// and returns the state after them.
  virtual StepState FetchRecords(int n, std::vector<StepRecord>* records) = 0;
};

/// The executors of `solver` (a friend of Solver: they read its net, rule,
/// history and LARC state). MakeDeviceUpdate exists in CUDA builds only.
std::unique_ptr<UpdateExecutor> MakeHostUpdate(Solver& solver);
std::unique_ptr<UpdateExecutor> MakeDeviceUpdate(Solver& solver);

}  // namespace cortado
