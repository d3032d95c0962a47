#pragma once
// What a solver's ranks do together, beside the communicators
// (communicator.hpp): the sums of the weight gradients, in buckets where the
// engine is asynchronous, and the small collectives the ranks agree through
// (a mean of displayed values, the action of an iteration, rank 0's
// parameters for everyone). The Solver owns one and calls it at fixed points
// of its loop, so every rank calls the same collectives in the same order.
//
// Gradient sums. Reduce() sums the trained parameters' gradients (lr_mult not
// 0, not empty) over the ranks in place, in each gradient's own type, in the
// collectives PlanGradientBuckets (below) lists: one per gradient type, in
// learnable_params order, after backward. With an asynchronous engine (NCCL)
// and reduce_buckets > 1, a listener on the net's backward
// (Net::set_param_ready_listener) packs the gradients, as backward completes
// them (reverse layer order), into the planned buckets of about
// 1/reduce_buckets of each type's values and starts each bucket's sum on the
// engine's stream as soon as the layer that completes it has run, during the
// step's last backward only (set_last_backward); Reduce() then starts what is
// left and makes the net's stream wait for every sum. Alone (no communicator, or one rank)
// nothing is summed, unless reduce_alone asks for the sums through a
// communicator of one rank (a test hook: it runs an engine's gradient path on
// one device).
//
// Where gradients are summed: in device memory on a GPU context with an
// engine that sums device memory (NCCL), else in host memory (the Tensor
// moves a GPU context's gradients to the host and back).

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "cortado/comm/communicator.hpp"
#include "cortado/net/net.hpp"
#include "cortado/solvers/signals.hpp"

namespace cortado {

/// One collective of the gradient sums: gradients of one type, packed in the
/// order listed.
struct GradientBucket {
  Type type = FLOAT;
  int64_t count = 0;        // values (bytes: count * type_size(type))
  std::vector<int> params;  // indices into Net::learnable_params(), in packing order
  /// The layer after whose backward the bucket's sum starts (the one that
  /// completes its last parameter); kAfterBackward: after the whole
  /// backward, when the solver calls Reduce().
  int ready_layer = kAfterBackward;
  static constexpr int kAfterBackward = -1;
};

/// Whether learnable parameter i of `net` is trained, and so summed: lr_mult
/// not 0, not empty.
bool TrainedParam(const Net& net, int i);

/// The gradient sums of `net`'s trained parameters, in the order they start
/// (what GradientReducer does; a pure function of the net, so that tools can
/// print the plan without ranks):
/// - reduce_buckets <= 1 (and every synchronous engine: MPI, threads): one
///   bucket per gradient type (DOUBLE, FLOAT, FLOAT16, BFLOAT16 order), each
///   with that type's parameters in learnable_params order, all after
///   backward.
/// - reduce_buckets > 1 (an asynchronous engine, NCCL): per gradient type, a
///   bucket size of ceil(total / reduce_buckets) values of that type; the
///   parameters are packed in the order backward completes them (layers last
///   to first; in a layer, Net::params_ready_after_layer's order), and a
///   bucket closes, its ready_layer the layer that completed it, as soon as
///   it holds at least the bucket size. A bucket may pass the size by most
///   of its last parameter, so a type can have fewer than reduce_buckets
///   buckets. What is left of each type when backward ends is one more
///   bucket after backward (in type order). Buckets of different types
///   interleave in the order they close.
std::vector<GradientBucket> PlanGradientBuckets(const Net& net, int reduce_buckets);

class GradientReducer {
 public:
  /// `comm` null: alone. The net must outlive the reducer, which sets its
  /// param-ready listener when it sums in buckets.
  GradientReducer(Net* net, std::shared_ptr<Communicator> comm, bool reduce_alone, int reduce_buckets);
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  int rank() const { return comm_ ? comm_->rank() : 0; }
  int ranks() const { return comm_ ? comm_->size() : 1; }
  /// Whether Reduce sums: several ranks, or reduce_alone with a communicator.
  bool active() const { return reduce_; }
  /// True around the step's last backward: only then does the listener start
  /// the buckets' sums (earlier backward passes of iter_size accumulate).
  void set_last_backward(bool last) { last_backward_ = last; }
  /// Sums the trained parameters' gradients over the ranks (see above).
  void Reduce();
  /// The collectives that summed gradients so far (buckets, or one per type).
  int64_t sums() const { return sums_; }
  /// Whether learnable parameter i is trained: lr_mult not 0, not empty.
  bool Trained(int i) const { return TrainedParam(*net_, i); }
  /// The sums that start during backward, in their order (empty where the
  /// reducer sums after backward only: one rank, a synchronous engine, or
  /// reduce_buckets <= 1).
  const std::vector<GradientBucket>& buckets() const { return buckets_; }

  /// Each value's mean over the ranks (a collective); the values alone.
  std::vector<double> Mean(std::vector<double> values);
  /// The action every rank takes: the strongest any rank saw (STOP over
  /// SNAPSHOT over NONE; a signal may reach the ranks in different
  /// iterations). A collective; `mine` alone.
  SolverAction Agree(SolverAction mine);
  /// Every tensor takes rank 0's values, each read and written in its type
  /// (a no-op alone; empty tensors are skipped).
  void Broadcast(const std::vector<std::pair<Tensor*, Type>>& tensors);

 private:
  void ListenToBackward(int reduce_buckets);
  void StartBucket(size_t b);
  Communicator::Span GradientSpan(int param);  // host or device, as the engine sums

  Net* net_;
  std::shared_ptr<Communicator> comm_;
  bool reduce_ = false;
  bool last_backward_ = false;    // in the step's last backward
  bool buckets_started_ = false;  // the listener ran since the last Reduce
  std::vector<GradientBucket> after_backward_;  // PlanGradientBuckets(net, 1): the sums without buckets
  std::vector<GradientBucket> buckets_;         // the listener's plan (empty: no listener)
  std::vector<int> bucket_of_;                  // learnable param -> its index in buckets_ (-1: not summed)
  std::vector<std::vector<Communicator::Span>> pending_;  // per bucket: the gradients packed so far
  size_t next_bucket_ = 0;                      // buckets_[next_bucket_] starts next
  int64_t sums_ = 0;
};

}  // namespace cortado
