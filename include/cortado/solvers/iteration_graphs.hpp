#pragma once
// The Solver's CUDA graphs of deferred iterations (solver.hpp, Step;
// step_graph.hpp says what a capture fixes): whether graphs run them, the
// graph of an iteration's last pass (with the check and the update) and of
// a pass before it (iter_size > 1), what the capture fixed, and counts.
//
// Per deferred iteration on the device, the Solver asks, in order:
//   use() == kUndecided  ->  Decide(obstacle, head)         (once)
//   Admit(key, iter)     ->  false: the iteration runs without a graph
//   CheckWorkspace(stream, iter)
//   per pass: NeedsCapture(last) -> Capture(...); then Launch(last, stream)
//             while use() == kAllowed, else the pass runs without a graph.
// Every state change that the training log shows is logged here, except the
// capture's own lines, which name the net's layers (the Solver's).
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cortado/config.hpp"

struct CUstream_st;

namespace cortado {

class StepGraph;

class IterationGraphs {
 public:
  /// Whether graphs run the deferred iterations: decided at the first one
  /// on the device; refused for good by an obstacle, a failed capture or a
  /// key that changes soon after a capture.
  enum class Use { kUndecided, kAllowed, kRefused };
  /// The update's host-made kernel arguments a capture fixes: the rate, the
  /// momentum and the weight decay.
  using Key = std::array<double, 3>;

  Use use() const { return use_; }
  /// Decides once: an empty `obstacle` allows graphs, the first `head`
  /// layers (the data layers) running before each launch, outside them;
  /// otherwise graphs are refused and the obstacle logged.
  void Decide(const std::string& obstacle, int head);
  /// The leading layers that run outside the graphs.
  int head() const { return head_; }
  /// Whether iteration `iter`, whose update has `key`, runs through the
  /// graphs (replayed, or captured first). Graphs captured with another key
  /// are dropped, and refused from now on where the capture was fewer than
  /// 20 iterations ago (a "poly" rate, say). After a drop with warm-up (and
  /// at first) two deferred steps run without a graph: cuDNN chooses its
  /// algorithms and buffers are allocated there.
  bool Admit(const Key& key, int iter);
  /// Drops the graphs (captured again when next admitted); with
  /// `warm_up_again`, after two deferred steps without one.
  void Drop(bool warm_up_again);

#ifdef CORTADO_USE_CUDA
  /// Drops the graphs if `stream`'s workspace grew since their capture (a
  /// test pass or a new shape freed the memory they hold the address of).
  void CheckWorkspace(CUstream_st* stream, int iter);
  /// Whether the graph of an iteration's last pass (or of a pass before it)
  /// is allowed but not captured yet.
  bool NeedsCapture(bool last) const { return use_ == Use::kAllowed && !graph(last); }
  /// Captures what `pass` enqueues on `stream` (nothing runs) as the graph
  /// of the last pass or of one before it, fixing `key` and the stream's
  /// workspace. A failed capture refuses graphs from now on, drops them and
  /// returns false with the reason in *why; the pass then has not run.
  bool Capture(bool last, const Key& key, int iter, CUstream_st* stream, const std::function<void()>& pass,
               std::string* why);
  /// Replays the graph of the last pass (or of one before it) on `stream`.
  void Launch(bool last, CUstream_st* stream);
#endif  // CORTADO_USE_CUDA

  /// Passes replayed (iter_size per iteration), and captures, so far.
  int64_t launches() const { return launches_; }
  int64_t captures() const { return captures_; }

 private:
  const std::shared_ptr<StepGraph>& graph(bool last) const { return last ? step_graph_ : pass_graph_; }

  Use use_ = Use::kUndecided;
  // shared_ptr: StepGraph is complete only in CUDA builds.
  std::shared_ptr<StepGraph> step_graph_;  // the last pass, the check and the update
  std::shared_ptr<StepGraph> pass_graph_;  // a pass before the last (iter_size > 1)
  int head_ = 0;
  int warm_ = 0;                // the warm-up's deferred steps so far (two before a capture)
  int captured_iter_ = -1;      // the iteration of the last capture
  uint64_t workspace_ = 0;      // the stream workspace's generation the graphs captured
  Key key_{};
  int64_t launches_ = 0, captures_ = 0;
};

}  // namespace cortado
