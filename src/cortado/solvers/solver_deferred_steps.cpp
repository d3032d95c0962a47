// The Solver's deferred iterations (solvers/solver.hpp, Step): forward and
// backward with the loss summed on the executor's side, the step decided
// there, the records read at the next display; and their CUDA graphs
// (iteration_graphs.hpp holds the graphs' state).
#include <memory>
#include <string>

#include "cortado/solvers/deferred_loss.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/solvers/step_graph.hpp"
#include "cortado/util/logging.hpp"

namespace cortado {

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
    MarkPhase("forward and backward");
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
    MarkPhase("the gradient sums");
    if (reducer_->active()) reducer_->Reduce();
    MarkPhase("the update");
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
  if (after_backward_ && graphs_.use() == IterationGraphs::Use::kAllowed) {
    graphs_.Drop(true);
    return false;
  }
  if (graphs_.use() == IterationGraphs::Use::kUndecided) {
    std::string why = after_backward_   ? "a callback runs between backward and the update"
                      : reducer_->active() ? "the gradients are summed across ranks"
                                           : "";
    int head = 0;
    if (why.empty()) why = StepGraphObstacle(*net_, param_, ranks(), &head);
    graphs_.Decide(why, head);
  }
  const IterationGraphs::Key key{plan.rate, plan.momentum, plan.weight_decay};
  if (!graphs_.Admit(key, iter_)) return false;
  const Context& ctx = net_->context();
  ctx.Activate();
  graphs_.CheckWorkspace(ctx.stream(), iter_);
  const auto& layers = net_->layers();
  // The loss gradients as the graph reads them: an eager step may have set a
  // new scale on the host, and no graph may capture its upload.
  for (const auto& top : net_->loss_tops()) top.first->diff().gpu_data_raw(top.first->diff().type());
  DeferLossReads no_reads;
  exec.BeginRecord(slot);  // outside the graphs: once per iteration whatever iter_size
  // iter_size passes: the data layers, then a graph of the rest (the last
  // one's with the step), each captured the first time it is needed.
  const int head = graphs_.head();
  for (int i = 0; i < param_.iter_size(); ++i) {
    const bool last = i + 1 == param_.iter_size();
    MarkPhase("the data layers (outside the CUDA graph)");
    for (int k = 0; k < head; ++k) {
      layers[k]->Forward(net_->bottom_vecs()[k], net_->top_vecs()[k]);
      // Their tops on the device now, outside the graph: a layer that fills
      // them on the host (DummyData with a random filler, say) would else be
      // copied up by its first consumer, inside the capture.
      for (Blob* top : net_->top_vecs()[k]) top->data().gpu_data_raw(top->data().type());
    }
    if (graphs_.NeedsCapture(last)) {
      MarkPhase("capturing the iteration as a CUDA graph");
      std::string why;
      if (graphs_.Capture(last, key, iter_, ctx.stream(), [&] { DeferredPass(exec, plan, slot, head, last); }, &why))
        INFO_LOG << "CUDA graphs: iteration " << iter_ << " captured (layers " << head << " to " << layers.size() - 1
                 << " forward and backward" << (last ? ", the check and the update" : "") << "); replayed from now on";
      else
        LOG(WARNING) << "CUDA graphs: the capture of iteration " << iter_ << " failed (" << why << PassAt()
                     << "); the training steps run without a graph";
    }
    if (graphs_.use() == IterationGraphs::Use::kAllowed) {
      MarkPhase("a CUDA graph of the iteration");
      graphs_.Launch(last, ctx.stream());
    } else {
      MarkPhase("forward and backward");
      DeferredPass(exec, plan, slot, head, last);  // nothing ran in a failed capture
    }
  }
  return true;
}
#else
bool Solver::GraphIteration(UpdateExecutor&, const UpdatePlan&, int) { return false; }
#endif  // CORTADO_USE_CUDA

void Solver::ResolvePending() {
  if (pending_.empty()) return;
  MarkPhase("reading the deferred steps");
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

}  // namespace cortado
