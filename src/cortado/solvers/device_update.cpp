// The device executor of the update plan (solvers/update_plan.hpp), CUDA
// builds: the check and the update as fused multi-tensor kernels
// (device_update.cu), one launch per gradient type and pass. The only wait on the
// device is the check's read-back, and a deferred step (update_plan.hpp)
// has none: the decision is made on the device.
#include "cortado/config.hpp"  // CORTADO_USE_CUDA

#ifdef CORTADO_USE_CUDA

#include <array>
#include <vector>

#include "cortado/solvers/device_update.hpp"
#include "cortado/solvers/larc.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/solvers/update_plan.hpp"
#include "cortado/util/cuda.hpp"

namespace cortado {

class DeviceUpdate : public UpdateExecutor {
 public:
  explicit DeviceUpdate(Solver& s) : s_(s) {}

  GradientCheck Check(const UpdatePlan& plan) override {
    const Context& ctx = s_.net_->context();
    gpu::UpdateWorkspace& ws = LaunchCheck(plan.clip);
    ws.fetch_check(ctx.stream());
    ctx.Synchronize();  // the eager iteration's one wait
    GradientCheck c;
    c.nonfinite = ws.check_host().nonfinite;
    c.sumsq = ws.check_host().sumsq;
    return c;
  }
  bool exact_sums() const override { return false; }

  void Apply(const UpdatePlan& plan) override {
    Net& net = *s_.net_;
    const SolverParameter& param = s_.param_;
    const Context& ctx = net.context();
    ctx.Activate();
    gpu::gpu_stream stream = ctx.stream();
    gpu::UpdateWorkspace& ws = workspace(stream);
    const std::vector<Blob*>& params = net.learnable_params();
    gpu::UpdateHyper h;
    h.rate = plan.rate;
    h.factor = plan.factor;
    const RuleContext rule_ctx{param, s_.iter_, plan.momentum, s_.data_type_};
    h.l1 = plan.l1;
    h.decoupled = s_.rule_.decoupled_decay;
    h.larc = !param.larc() ? LarcPolicy::kOff : param.larc_policy() == "clip" ? LarcPolicy::kClip : LarcPolicy::kScale;
    h.larc_eta = param.larc_eta();
    h.larc_momentum = plan.momentum;
    h.larc_turbo = param.larc() && param.larc_turbo();
    h.control = plan.control;
    // The weights become current in the solver data type on the device here,
    // after the skip decision (a skipped step leaves them as they are), with
    // their working copy in the gradient type (the type the layers compute in)
    // written by the same pass. Every gradient is zeroed by it, frozen ones
    // (in the list without weights) included.
    std::array<std::vector<gpu::TensorSlot>, kNumTypes> lists;
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i]->count() == 0) continue;
      Blob* p = params[i];
      const Type gt = p->diff().type();
      gpu::TensorSlot t;
      t.grad = p->diff().mutable_gpu_data_raw(gt);
      t.count = static_cast<int64_t>(p->count());
      if (net.params_lr()[i] == 0) {
        lists[type_index(gt)].push_back(t);
        continue;
      }
      t.weight = p->data().mutable_gpu_data_raw(s_.data_type_, gt, &t.copy);
      for (int k = 0; k < s_.history_slots(); ++k)
        t.hist[k] = s_.history(static_cast<int>(i), k).data().mutable_gpu_data_raw(s_.data_type_);
      t.lr_mult = net.params_lr()[i];
      t.decay = plan.weight_decay * net.params_weight_decay()[i];
      t.id = static_cast<int64_t>(i);
      lists[type_index(p->diff().type())].push_back(t);
    }
    for (int g = 0; g < kNumTypes; ++g) ws.update_list(kAllTypes[g]).assign(std::move(lists[g]), stream);
    const double* trust = nullptr;
    if (h.larc != LarcPolicy::kOff) {
      if (h.larc_turbo && !s_.larc_corr_on_device_) {  // the first update, or one after Restore
        s_.larc_corr_.resize(params.size());
        ws.upload_larc_corr(s_.larc_corr_, stream);
        s_.larc_corr_on_device_ = true;
      }
      LarcSums* sums = ws.clear_larc_sums(stream);
      for (int g = 0; g < kNumTypes; ++g)
        gpu::larc_sums(kAllTypes[g], s_.data_type_, ws.update_list(kAllTypes[g]), h, sums, stream);
      if (s_.ranks() > 1) {
        // As for the clipping norm: one set of sums for every rank.
        std::vector<double> host(4 * params.size());
        static_assert(sizeof(LarcSums) == 4 * sizeof(double), "LarcSums is read as 4 doubles");
        CORTADO_CUDA_CHECK(cudaMemcpyAsync(host.data(), sums, host.size() * sizeof(double), cudaMemcpyDeviceToHost, stream));
        ctx.Synchronize();
        host = s_.reducer_->Mean(std::move(host));
        CORTADO_CUDA_CHECK(cudaMemcpyAsync(sums, host.data(), host.size() * sizeof(double), cudaMemcpyHostToDevice, stream));
      }
      for (int g = 0; g < kNumTypes; ++g)
        gpu::larc_trust(ws.update_list(kAllTypes[g]), h, sums, ws.larc_corr(), ws.larc_trust(), stream);
      trust = ws.larc_trust();
    }
    for (int g = 0; g < kNumTypes; ++g)
      s_.rule_.update_gpu(rule_ctx, kAllTypes[g], ws.update_list(kAllTypes[g]), h, trust, stream);
  }

  // ---- deferred steps: everything enqueued on the context's stream ----
  bool device() const override { return true; }
  void PutState(const StepState& st) override {
    const Context& ctx = s_.net_->context();
    ctx.Activate();
    workspace(ctx.stream()).put_step_state(st, ctx.stream());
  }
  // The slot is the device's counter (device_update.hpp): `slot` only checks it.
  void BeginRecord(int slot) override {
    CORTADO_CHECK(slot >= 0 && slot < kMaxDeferredSteps);
    const Context& ctx = s_.net_->context();
    ctx.Activate();
    gpu::UpdateWorkspace& ws = workspace(ctx.stream());
    gpu::begin_record(ws.step_records(), ws.step_count(), ctx.stream());
  }
  void AddLoss(int) override {
    const Context& ctx = s_.net_->context();
    ctx.Activate();
    gpu::UpdateWorkspace& ws = workspace(ctx.stream());
    for (const auto& [top, weight] : s_.net_->loss_tops()) {
      const Type t = top->data().type();
      gpu::add_loss(t, top->data().gpu_data_raw(t), static_cast<int64_t>(top->count()), weight, ws.step_records(),
                    ws.step_count(), ctx.stream());
    }
  }
  void DeferredStep(const UpdatePlan& plan, const StepRule& rule, int) override {
    const Context& ctx = s_.net_->context();
    ctx.Activate();
    // The check pass only where the decision reads it (DecideStep reads the
    // Inf/NaN flag to skip, the sum of squares to clip); else a zeroed result.
    const bool check = rule.skip_overflow || rule.clip >= 0;
    gpu::UpdateWorkspace& ws = check ? LaunchCheck(rule.clip >= 0) : workspace(ctx.stream());
    if (!check) ws.begin_check(ctx.stream());
    gpu::decide_step(rule, ws.check_device(), ws.step_state(), ws.step_records(), ws.step_count(), ws.step_control(),
                     ctx.stream());
    UpdatePlan p = plan;
    p.control = ws.step_control();
    Apply(p);
    // The next backward starts from the scale just decided.
    for (const auto& [top, weight] : s_.net_->loss_tops()) {
      const Type t = top->diff().type();
      gpu::seed_loss_diff(t, top->diff().mutable_gpu_data_raw(t), static_cast<int64_t>(top->count()), weight,
                          ws.step_state(), ctx.stream());
    }
  }
  StepState FetchRecords(int n, std::vector<StepRecord>* records) override {
    const Context& ctx = s_.net_->context();
    ctx.Activate();
    return workspace(ctx.stream()).fetch_step_records(n, records, ctx.stream());
  }

  void LarcCorrelationToHost() override {
    if (!ws_) return;
    s_.net_->context().Activate();
    s_.larc_corr_ = ws_->download_larc_corr(s_.net_->context().stream());
  }

 private:
  gpu::UpdateWorkspace& workspace(gpu::gpu_stream stream) {
    if (!ws_) ws_ = std::make_unique<gpu::UpdateWorkspace>(static_cast<int>(s_.net_->learnable_params().size()), stream);
    return *ws_;
  }

  // The check pass over every gradient into the workspace's device result.
  gpu::UpdateWorkspace& LaunchCheck(bool want_sumsq) {
    const Context& ctx = s_.net_->context();
    ctx.Activate();  // conversions and copies below go to ctx's stream
    gpu::gpu_stream stream = ctx.stream();
    gpu::UpdateWorkspace& ws = workspace(stream);
    std::array<std::vector<gpu::TensorSlot>, kNumTypes> lists;
    for (const Blob* p : s_.net_->learnable_params()) {
      gpu::TensorSlot t;
      t.grad = const_cast<void*>(p->diff().gpu_data_raw(p->diff().type()));  // only read by the check
      t.count = static_cast<int64_t>(p->count());
      lists[type_index(p->diff().type())].push_back(t);
    }
    ws.begin_check(stream);
    for (int g = 0; g < kNumTypes; ++g) {
      ws.check_list(kAllTypes[g]).assign(std::move(lists[g]), stream);
      gpu::check_gradients(kAllTypes[g], ws.check_list(kAllTypes[g]), want_sumsq, ws.check_device(), stream);
    }
    return ws;
  }

  Solver& s_;
  std::unique_ptr<gpu::UpdateWorkspace> ws_;  // the device buffers of the check and the update
};

std::unique_ptr<UpdateExecutor> MakeDeviceUpdate(Solver& solver) { return std::make_unique<DeviceUpdate>(solver); }

}  // namespace cortado

#endif  // CORTADO_USE_CUDA
