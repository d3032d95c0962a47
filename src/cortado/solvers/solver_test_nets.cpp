// The Solver's test passes (solver.hpp): each test net run for its
// test_iter batches on the ranks' shards, the scores summed over the ranks,
// logged as Caffe logs them, and written to TensorBoard.
#include <algorithm>
#include <string>
#include <vector>

#include "cortado/comm/gradient_reducer.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/util/logging.hpp"

namespace cortado {

std::vector<double> Solver::TestAll() {
  MarkPhase("testing");
  // The ranks test one model: rank 0's untrained parameters (BatchNorm's
  // running statistics, which each rank gathers on its own shard) for all.
  std::vector<std::pair<Tensor*, Type>> untrained;
  const std::vector<Blob*>& params = net_->learnable_params();
  for (size_t i = 0; i < params.size(); ++i)
    if (!reducer_->Trained(static_cast<int>(i))) untrained.emplace_back(&params[i]->data(), params[i]->data().type());
  reducer_->Broadcast(untrained);
  std::vector<double> first;
  for (size_t i = 0; i < test_nets_.size(); ++i) {
    std::vector<double> s = Test(static_cast<int>(i));
    if (i == 0) first = s;
  }
  return first;
}

std::vector<double> Solver::Test(int id) {
  INFO_LOG << "Iteration " << iter_ << ", Testing net (#" << id << ")";
  Net& net = *test_nets_[id];
  size_t outputs = 0;
  for (const Blob* b : net.output_blobs()) outputs += b->count();
  std::vector<double> scores(outputs + 1, 0.0);  // the outputs' sums, then the loss's
  // With several ranks, each runs its share of the test_iter batches on its
  // own shard of the data (test_iter = kR: the batches one solver would run),
  // and the ranks' sums are added.
  const int iters = param_.test_iter(id);
  const int mine = iters / ranks() + (rank() < iters % ranks() ? 1 : 0);
  for (int i = 0; i < mine; ++i) {
    scores[outputs] += net.Forward();
    size_t k = 0;
    for (const Blob* b : net.output_blobs()) {
      const float* v = b->cpu_data<float>();
      for (size_t j = 0; j < b->count(); ++j, ++k) scores[k] += v[j];
    }
  }
  if (ranks() > 1) comm_->AllReduceSum(scores.data(), static_cast<int64_t>(scores.size()), DOUBLE);
  const double loss = scores[outputs];
  scores.pop_back();
  // Test net #0's tags are test/ and test_net/, net #i's test<i>/ and test_net<i>/.
  const std::string suffix = id ? std::to_string(id) : "";
  if (param_.test_compute_loss()) {
    INFO_LOG << "Test loss: " << loss / iters;
    EventScalar("test" + suffix + "/loss", loss / iters);
  }
  size_t k = 0;
  for (size_t j = 0; j < net.output_blobs().size(); ++j) {
    const int blob = net.output_blob_indices()[j];
    const double w = net.blob_loss_weight(blob);
    for (size_t e = 0; e < net.output_blobs()[j]->count(); ++e, ++k) {
      scores[k] /= iters;
      const std::string loss_msg = w ? str_cat(" (* ", w, " = ", w * scores[k], " loss)") : "";
      INFO_LOG << "    Test net output #" << k << ": " << net.blob_names()[blob] << " = " << scores[k] << loss_msg;
      EventScalar(OutputTag("test_net" + suffix, net.blob_names()[blob], e, net.output_blobs()[j]->count()), scores[k]);
      if (w && !std::isfinite(scores[k]))
        LOG_IF(WARNING, thread_logs_info()) << "Test net output #" << k << ": the test loss " << net.blob_names()[blob] << " is " << scores[k]
                 << " at iteration " << iter_ << ": the net has diverged (or its inputs hold NaN or Inf)";
    }
  }
  FlushEvents();
  return scores;
}

}  // namespace cortado
