#include "cortado/comm/gradient_reducer.hpp"

#include <array>

#include "cortado/common.hpp"

namespace cortado {

bool TrainedParam(const Net& net, int i) {
  return net.params_lr()[static_cast<size_t>(i)] != 0 && net.learnable_params()[static_cast<size_t>(i)]->count() > 0;
}

namespace {

Type GradientType(const Net& net, int i) { return net.learnable_params()[static_cast<size_t>(i)]->diff().type(); }

// One bucket per gradient type, in learnable_params order, after backward.
std::vector<GradientBucket> PlanPerType(const Net& net) {
  std::vector<GradientBucket> plan;
  for (Type t : kAllTypes) {
    GradientBucket b;
    b.type = t;
    for (size_t i = 0; i < net.learnable_params().size(); ++i) {
      const int k = static_cast<int>(i);
      if (!TrainedParam(net, k) || GradientType(net, k) != t) continue;
      b.params.push_back(k);
      b.count += static_cast<int64_t>(net.learnable_params()[i]->count());
    }
    if (!b.params.empty()) plan.push_back(std::move(b));
  }
  return plan;
}

}  // namespace

std::vector<GradientBucket> PlanGradientBuckets(const Net& net, int reduce_buckets) {
  if (reduce_buckets <= 1) return PlanPerType(net);
  std::array<int64_t, kNumTypes> size{};  // each type's total, then its bucket size
  for (size_t i = 0; i < net.learnable_params().size(); ++i)
    if (TrainedParam(net, static_cast<int>(i)))
      size[type_index(GradientType(net, static_cast<int>(i)))] += static_cast<int64_t>(net.learnable_params()[i]->count());
  for (int64_t& s : size) s = (s + reduce_buckets - 1) / reduce_buckets;
  std::vector<GradientBucket> plan;
  std::array<GradientBucket, kNumTypes> open;  // per type, the bucket being filled
  for (int g = 0; g < kNumTypes; ++g) open[g].type = kAllTypes[g];
  const std::vector<std::vector<int>>& ready = net.params_ready_after_layer();
  for (int layer = static_cast<int>(ready.size()) - 1; layer >= 0; --layer) {
    for (int i : ready[static_cast<size_t>(layer)]) {
      if (!TrainedParam(net, i)) continue;
      GradientBucket& b = open[type_index(GradientType(net, i))];
      b.params.push_back(i);
      b.count += static_cast<int64_t>(net.learnable_params()[static_cast<size_t>(i)]->count());
      if (b.count < size[type_index(b.type)]) continue;
      b.ready_layer = layer;
      plan.push_back(std::move(b));
      b = GradientBucket();
      b.type = plan.back().type;
    }
  }
  for (GradientBucket& b : open)
    if (!b.params.empty()) plan.push_back(std::move(b));
  return plan;
}

GradientReducer::GradientReducer(Net* net, std::shared_ptr<Communicator> comm, bool reduce_alone, int reduce_buckets)
    : net_(net), comm_(std::move(comm)) {
  reduce_ = comm_ && (comm_->size() > 1 || reduce_alone);
  if (!reduce_) return;
  after_backward_ = PlanPerType(*net_);
  ListenToBackward(reduce_buckets);
}

Communicator::Span GradientReducer::GradientSpan(int i) {
  Tensor& d = net_->learnable_params()[static_cast<size_t>(i)]->diff();
  const Type t = d.type();
  // Host engines: the Tensor brings a GPU context's gradients to the host
  // here, and back when the update reads them.
  const bool on_device = net_->context().on_gpu() && comm_->reduces_device_memory();
  return {on_device ? d.mutable_gpu_data_raw(t) : d.mutable_data_raw(t), static_cast<int64_t>(d.count())};
}

void GradientReducer::ListenToBackward(int reduce_buckets) {
  // Asynchronous engines only: a host engine's sums block, so splitting them
  // would only add collectives.
  if (!comm_->asynchronous() || reduce_buckets <= 1) return;
  buckets_ = PlanGradientBuckets(*net_, reduce_buckets);
  bucket_of_.assign(net_->learnable_params().size(), -1);
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (int i : buckets_[b].params) bucket_of_[static_cast<size_t>(i)] = static_cast<int>(b);
  pending_.assign(buckets_.size(), {});
  // Called inside Net::Backward, which has activated the net's context, with
  // the parameters in the order the plan packed them: a bucket is complete
  // when its last parameter comes.
  net_->set_param_ready_listener([this](const std::vector<int>& ready) {
    if (!last_backward_) return;
    for (int i : ready) {
      const int b = bucket_of_[static_cast<size_t>(i)];
      if (b < 0) continue;
      const GradientBucket& bucket = buckets_[static_cast<size_t>(b)];
      pending_[static_cast<size_t>(b)].push_back(GradientSpan(i));
      if (bucket.ready_layer != GradientBucket::kAfterBackward && i == bucket.params.back())
        StartBucket(static_cast<size_t>(b));
    }
    buckets_started_ = true;
  });
}

void GradientReducer::StartBucket(size_t b) {
  // The plan's order is every rank's order: a bucket out of it would pair
  // different gradients across ranks.
  CORTADO_CHECK(b == next_bucket_ && pending_[b].size() == buckets_[b].params.size())
      << "gradient bucket " << b << " started with " << pending_[b].size() << " of " << buckets_[b].params.size()
      << " parameters, bucket " << next_bucket_ << " due";
  comm_->StartAllReduceSum(pending_[b], buckets_[b].type, net_->context().stream());
  ++sums_;
  pending_[b].clear();
  ++next_bucket_;
}

void GradientReducer::Reduce() {
  // On a GPU context the gradients' host copies (or an engine's device sums)
  // go on this context's stream, after the backward that wrote them.
  net_->context().Activate();
  if (buckets_started_) {
    // The last backward started the sums of the buckets it completed: the
    // rest (each type's last) now, then the update waits for them all.
    while (next_bucket_ < buckets_.size()) StartBucket(next_bucket_);
    comm_->WaitSums(net_->context().stream());
    next_bucket_ = 0;
    buckets_started_ = false;
    return;
  }
  for (const GradientBucket& b : after_backward_) {
    std::vector<Communicator::Span> grads;
    for (int i : b.params) grads.push_back(GradientSpan(i));
    ++sums_;
    comm_->AllReduceSum(grads, b.type, net_->context().stream());
  }
}

std::vector<double> GradientReducer::Mean(std::vector<double> values) {
  if (ranks() > 1) {
    comm_->AllReduceSum(values.data(), static_cast<int64_t>(values.size()), DOUBLE);
    for (double& v : values) v /= ranks();
  }
  return values;
}

SolverAction GradientReducer::Agree(SolverAction mine) {
  if (ranks() <= 1) return mine;
  const int64_t all = comm_->Max(mine == SolverAction::STOP ? 2 : mine == SolverAction::SNAPSHOT ? 1 : 0);
  return all == 2 ? SolverAction::STOP : all == 1 ? SolverAction::SNAPSHOT : SolverAction::NONE;
}

void GradientReducer::Broadcast(const std::vector<std::pair<Tensor*, Type>>& tensors) {
  if (ranks() <= 1) return;
  for (const auto& [t, type] : tensors) {
    if (t->count() == 0) continue;
    comm_->Broadcast(t->mutable_data_raw(type), static_cast<int64_t>(t->count() * type_size(type)), 0);
  }
}

}  // namespace cortado
