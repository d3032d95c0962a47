#pragma once
// The solver's fused update on the device (CUDA builds only): the launchers
// that the update plan's device executor (solvers/device_update.cpp) calls,
// and the device workspace it keeps between iterations.
//
// One iteration on the device:
//  1. check: one launch per gradient type over every learnable parameter
//     flags Inf/NaN and (with clip_gradients) sums the squares, both into one
//     small device struct, copied once to pinned host memory. The Solver's
//     stream synchronize after that copy is the only wait of the iteration
//     (and is left out when neither skipping nor clipping needs the result).
//  2. (LARC only) one launch per (gradient type, data type) group writes
//     each parameter's LarcSums (larc.hpp: |W|^2, |g|^2 of the gradient
//     before weight decay, and with larc_turbo g.H and |H|^2) into a device
//     array; then one small launch per group turns each parameter's sums
//     into its trust ratio (larc_trust, the host's function), updating
//     larc_turbo's running correlations, which stay on the device. The
//     update reads the ratios there: no wait on the host.
//  3. update: one launch per (gradient type, data type) group applies, per
//     value, g = float(dW) * factor (unscale by 1/(S * iter_size) and the
//     clipping factor), the coupled weight decay, and the rule's Step (the
//     host loop's own function, solvers/update_rule.hpp), writing the
//     weights and the history in the solver data type, the working copy of
//     the weights in the gradient type when that differs (the FP16 weights
//     that the next forward reads: no conversion launch per parameter), and
//     zero into the gradient (no clearing launch per parameter before the
//     next backward). Frozen parameters (lr_mult 0) are in the list with no
//     weights: their gradients are only zeroed.
//
// A launch walks a tensor list: an array of TensorSlot in device memory (a
// pointer set per parameter, like PyTorch's multi_tensor_apply), uploaded
// again only when a pointer or count changes. The arithmetic of each value is
// the CPU update's, operation for operation (see solvers/update_kernel.cuh).
//
// Supported (gradient type, solver data type) pairs: {FLOAT, FLOAT16}^2,
// (BFLOAT16, FLOAT) and (DOUBLE, DOUBLE) (update_supported); Solver falls
// back to the host update for anything else.

#include "cortado/config.hpp"

#ifdef CORTADO_USE_CUDA
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cortado/solvers/larc.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/solvers/step_state.hpp"
#include "cortado/solvers/update_rule.hpp"
#include "cortado/types.hpp"

struct CUstream_st;
struct CUevent_st;

namespace cortado {
namespace gpu {

using gpu_stream = CUstream_st*;

/// One parameter of a multi-tensor launch. Device pointers; plain data,
/// copied to the device as it is.
struct TensorSlot {
  void* grad = nullptr;         // the gradient (diff), in the list's gradient type; zeroed by the update
  void* weight = nullptr;       // the weights, in the solver data type (update lists; null: frozen)
  void* copy = nullptr;         // the weights' working copy in the gradient type, or null
  void* hist[kMaxHistorySlots] = {};  // the rule's history slots, in the solver data type
  int64_t count = 0;
  int64_t first_chunk = 0;     // set by TensorList::assign
  double lr_mult = 0;          // the rate is hyper.rate * lr_mult, or LARC's (larc.hpp)
  double decay = 0;            // the iteration's weight decay * decay_mult
  int64_t id = 0;              // index in learnable_params (LARC's arrays)
};

/// Values per chunk: a block handles one chunk of one tensor at a time.
constexpr int64_t kChunk = 16384;

/// A tensor list kept on the device. assign() uploads it (asynchronously,
/// from pinned memory) only when it differs from the list last uploaded.
class TensorList {
 public:
  /// `capacity`: the most slots the list will hold (the parameter count).
  explicit TensorList(int capacity);
  ~TensorList();
  TensorList(const TensorList&) = delete;
  TensorList& operator=(const TensorList&) = delete;

  void assign(std::vector<TensorSlot> slots, gpu_stream stream);
  const TensorSlot* device() const { return device_; }
  int size() const { return static_cast<int>(host_.size()); }
  int64_t chunks() const { return chunks_; }

 private:
  int capacity_;
  std::vector<TensorSlot> host_;
  TensorSlot* staging_ = nullptr;  // pinned
  TensorSlot* device_ = nullptr;
  CUevent_st* uploaded_ = nullptr;  // the last upload out of staging_
  bool uploaded_once_ = false;
  int64_t chunks_ = 0;
};

/// What the check pass finds, over all gradients.
struct GradientCheck {
  double sumsq = 0;   // sum of dW^2 in double (clip_gradients only)
  int nonfinite = 0;  // 1 if some dW is Inf or NaN
};

/// Per-iteration scalars of the update common to every rule, passed by value
/// to the kernels (a rule's own come in its Hyper: solvers/update_rule.hpp).
struct UpdateHyper {
  double rate = 0;                    // the policy's rate (times lr_mult per slot)
  double factor = 1;                  // 1 / (S * iter_size) times the clipping factor
  bool l1 = false;                    // regularization_type L1 (else L2)
  bool decoupled = false;             // the rule applies the decay itself (AdamW): not added to g
  LarcPolicy larc = LarcPolicy::kOff;
  double larc_eta = 0;
  double larc_momentum = 0;           // momentum_policy's momentum, whatever the rule
  bool larc_turbo = false;
  /// A deferred step's decision in device memory (decide_step wrote it):
  /// the update reads its factor instead of `factor`, and with skip set it
  /// only zeroes the gradients. Null: `factor`, no skip.
  const StepControl* control = nullptr;
};

/// Device and pinned buffers the solver keeps between iterations.
class UpdateWorkspace {
 public:
  /// `stream`: the context's stream, which the destructor waits for.
  UpdateWorkspace(int num_params, gpu_stream stream);
  ~UpdateWorkspace();
  UpdateWorkspace(const UpdateWorkspace&) = delete;
  UpdateWorkspace& operator=(const UpdateWorkspace&) = delete;

  TensorList& check_list(Type grad_type) { return *check_[type_index(grad_type)]; }
  TensorList& update_list(Type grad_type) { return *update_[type_index(grad_type)]; }
  /// Zeroes the device check result.
  void begin_check(gpu_stream stream);
  GradientCheck* check_device() { return check_device_; }
  /// Enqueues the copy of the check result to pinned host memory; read
  /// check_host() after synchronizing the stream.
  void fetch_check(gpu_stream stream);
  const GradientCheck& check_host() const { return *check_host_; }
  /// Zeroes and returns the LARC sums, a LarcSums per parameter id.
  LarcSums* clear_larc_sums(gpu_stream stream);
  /// Per parameter id: LARC's trust ratio of this iteration (written by
  /// larc_trust), and larc_turbo's running correlation.
  double* larc_trust() { return larc_trust_; }
  double* larc_corr() { return larc_corr_; }
  /// larc_turbo's correlations, from and to the host (they start at 0).
  void upload_larc_corr(const std::vector<double>& corr, gpu_stream stream);
  std::vector<double> download_larc_corr(gpu_stream stream);
  /// Deferred steps: the state on the device, the decision the update
  /// reads, and kMaxDeferredSteps records.
  StepState* step_state() { return step_state_; }
  StepControl* step_control() { return step_control_; }
  StepRecord* step_records() { return step_records_; }
  /// The records written since the last fetch (the next one's index).
  int* step_count() { return step_count_; }
  /// Enqueues the copy of s to the device state (through pinned memory).
  void put_step_state(const StepState& s, gpu_stream stream);
  /// Copies the first n records and the state to the host, and starts the
  /// count again; waits. n must be the device's count.
  StepState fetch_step_records(int n, std::vector<StepRecord>* records, gpu_stream stream);

 private:
  int num_params_;
  gpu_stream stream_;
  std::array<std::unique_ptr<TensorList>, kNumTypes> check_, update_;
  GradientCheck* check_device_ = nullptr;
  GradientCheck* check_host_ = nullptr;  // pinned
  LarcSums* larc_sums_ = nullptr;
  double* larc_trust_ = nullptr;
  double* larc_corr_ = nullptr;
  StepState* step_state_ = nullptr;
  StepControl* step_control_ = nullptr;
  StepRecord* step_records_ = nullptr;
  int* step_count_ = nullptr;
  int* step_count_host_ = nullptr;            // pinned
  StepState* step_state_host_ = nullptr;      // pinned
  StepRecord* step_records_host_ = nullptr;   // pinned, kMaxDeferredSteps
  CUevent_st* state_put_ = nullptr;           // the last put_step_state's copy
};

/// Deferred steps (one-thread and one-block launches on `stream`), each on
/// the record at index *count (the device's counter, so that a CUDA graph
/// of the iteration writes a new record on each replay): begin_record zeroes
/// it; add_loss adds weight * sum(float(top)) to its loss, as
/// LayerBase::Forward sums a loss top; decide_step runs DecideStep from the
/// check's findings and *state, writing the decision and the record's update
/// half, and advances *count; seed_loss_diff fills a loss top's gradient with
/// weight * state->scale, as LayerBase::ScaleLossGradients does.
void begin_record(StepRecord* records, const int* count, gpu_stream stream);
void decide_step(const StepRule& rule, const GradientCheck* check, StepState* state, StepRecord* records, int* count,
                 StepControl* control, gpu_stream stream);
void add_loss(Type type, const void* top, int64_t count, double weight, StepRecord* records, const int* counter,
              gpu_stream stream);
void seed_loss_diff(Type type, void* diff, int64_t count, double weight, const StepState* state, gpu_stream stream);

/// Whether the rules' updates and larc_sums take this (gradient type, solver data
/// type) pair.
bool update_supported(Type grad_type, Type data_type);

/// Adds to *result the Inf/NaN flag and (if want_sumsq) the sum of squares
/// of every gradient of `list`, stored as grad_type. One launch.
void check_gradients(Type grad_type, const TensorList& list, bool want_sumsq, GradientCheck* result,
                     gpu_stream stream);
/// LARC: adds each slot's sums (larc.hpp; g unscaled and clipped, before
/// the weight decay; g.H and |H|^2 with hyper.larc_turbo) into sums[id].
/// One launch.
void larc_sums(Type grad_type, Type data_type, const TensorList& list, const UpdateHyper& hyper, LarcSums* sums,
               gpu_stream stream);
/// LARC: trust[id] = larc_trust(sums[id], ...) for each slot with weights,
/// updating corr[id] with hyper.larc_turbo. One launch.
void larc_trust(const TensorList& list, const UpdateHyper& hyper, const LarcSums* sums, double* corr, double* trust,
                gpu_stream stream);
/// The fused update of a built-in rule (solvers/builtin_rules.hpp) by solver type
/// (null for any other type): every slot of a list, which also writes the
/// working copies and zeroes the gradients; `trust` (LARC's ratios by id) may
/// be null without LARC. One launch per call. The kernel is
/// solvers/update_kernel.cuh's, instantiated for the rule.
UpdateRuleInfo::GpuUpdate builtin_update(const std::string& type);

}  // namespace gpu
}  // namespace cortado
#endif  // CORTADO_USE_CUDA
