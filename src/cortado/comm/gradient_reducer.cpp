#include "cortado/comm/gradient_reducer.hpp"

namespace cortado {

GradientReducer::GradientReducer(Net* net, std::shared_ptr<Communicator> comm, bool reduce_alone, int reduce_buckets)
    : net_(net), comm_(std::move(comm)) {
  reduce_ = comm_ && (comm_->size() > 1 || reduce_alone);
  PlanBuckets(reduce_buckets);
}

Communicator::Span GradientReducer::GradientSpan(int i) {
  Tensor& d = net_->learnable_params()[static_cast<size_t>(i)]->diff();
  const Type t = d.type();
  // Host engines: the Tensor brings a GPU context's gradients to the host
  // here, and back when the update reads them.
  const bool on_device = net_->context().on_gpu() && comm_->reduces_device_memory();
  return {on_device ? d.mutable_gpu_data_raw(t) : d.mutable_data_raw(t), static_cast<int64_t>(d.count())};
}

bool GradientReducer::Trained(int i) const {
  return net_->params_lr()[static_cast<size_t>(i)] != 0 && net_->learnable_params()[static_cast<size_t>(i)]->count() > 0;
}

void GradientReducer::PlanBuckets(int reduce_buckets) {
  // Asynchronous engines only: a host engine's sums block, so splitting them
  // would only add collectives.
  if (!reduce_ || !comm_->asynchronous() || reduce_buckets <= 1) return;
  const std::vector<Blob*>& params = net_->learnable_params();
  std::array<int64_t, kNumTypes> total{};
  for (size_t i = 0; i < params.size(); ++i)
    if (Trained(static_cast<int>(i))) total[type_index(params[i]->diff().type())] += static_cast<int64_t>(params[i]->count());
  for (int g = 0; g < kNumTypes; ++g) bucket_size_[g] = (total[g] + reduce_buckets - 1) / reduce_buckets;
  // Called inside Net::Backward, which has activated the net's context.
  net_->set_param_ready_listener([this](const std::vector<int>& ready) {
    if (!last_backward_) return;
    for (int i : ready) {
      if (!Trained(i)) continue;
      const Communicator::Span s = GradientSpan(i);
      const int g = type_index(net_->learnable_params()[static_cast<size_t>(i)]->diff().type());
      pending_[g].push_back(s);
      pending_count_[g] += s.count;
      if (pending_count_[g] >= bucket_size_[g]) StartBucket(g);
    }
    buckets_started_ = true;
  });
}

void GradientReducer::StartBucket(int g) {
  if (pending_[g].empty()) return;
  comm_->StartAllReduceSum(pending_[g], kAllTypes[g], net_->context().stream());
  ++sums_;
  pending_[g].clear();
  pending_count_[g] = 0;
}

void GradientReducer::Reduce() {
  // On a GPU context the gradients' host copies (or an engine's device sums)
  // go on this context's stream, after the backward that wrote them.
  net_->context().Activate();
  if (buckets_started_) {
    // The last backward started the sums of the full buckets: the rest now,
    // then the update waits for them all.
    for (int g = 0; g < kNumTypes; ++g) StartBucket(g);
    comm_->WaitSums(net_->context().stream());
    buckets_started_ = false;
    return;
  }
  const std::vector<Blob*>& params = net_->learnable_params();
  for (int g = 0; g < kNumTypes; ++g) {
    std::vector<Communicator::Span> grads;  // the trained parameters' gradients of type g
    for (size_t i = 0; i < params.size(); ++i)
      if (Trained(static_cast<int>(i)) && params[i]->diff().type() == kAllTypes[g])
        grads.push_back(GradientSpan(static_cast<int>(i)));
    if (grads.empty()) continue;
    ++sums_;
    comm_->AllReduceSum(grads, kAllTypes[g], net_->context().stream());
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
