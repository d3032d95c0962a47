// The Solver's CUDA graphs of deferred iterations (solvers/iteration_graphs.hpp).
#include "cortado/solvers/iteration_graphs.hpp"

#include "cortado/solvers/step_graph.hpp"
#include "cortado/util/logging.hpp"

#ifdef CORTADO_USE_CUDA
#include "cortado/util/cuda.hpp"
#endif

namespace cortado {

void IterationGraphs::Decide(const std::string& obstacle, int head) {
  if (!obstacle.empty()) {
    use_ = Use::kRefused;
    INFO_LOG << "CUDA graphs: not used (" << obstacle << ")";
    return;
  }
  use_ = Use::kAllowed;
  head_ = head;
}

bool IterationGraphs::Admit(const Key& key, int iter) {
  if (use_ != Use::kAllowed) return false;
  if (step_graph_ && key != key_) {
    Drop(false);
    if (iter - captured_iter_ < 20) {
      INFO_LOG << "CUDA graphs: turned off at iteration " << iter << " (the rate, momentum or weight decay changed "
               << "within 20 iterations of the last capture, which fixes them)";
      use_ = Use::kRefused;
      return false;
    }
  }
  if (!step_graph_ && warm_ < 2) {
    ++warm_;
    return false;
  }
  return true;
}

void IterationGraphs::Drop(bool warm_up_again) {
  step_graph_.reset();
  pass_graph_.reset();
  if (warm_up_again) warm_ = 0;
}

#ifdef CORTADO_USE_CUDA
void IterationGraphs::CheckWorkspace(cudaStream_t stream, int iter) {
  if (step_graph_ && cuda::stream_workspace_generation(stream) != workspace_) {
    INFO_LOG << "CUDA graphs: captured again at iteration " << iter
             << " (the stream's workspace grew since the capture, in a test pass or for a new shape)";
    Drop(false);
  }
}

bool IterationGraphs::Capture(bool last, const Key& key, int iter, cudaStream_t stream,
                              const std::function<void()>& pass, std::string* why) {
  auto g = std::make_shared<StepGraph>();
  if (!g->Capture(stream, pass, why)) {
    use_ = Use::kRefused;
    Drop(false);
    return false;
  }
  (last ? step_graph_ : pass_graph_) = std::move(g);
  key_ = key;
  workspace_ = cuda::stream_workspace_generation(stream);
  captured_iter_ = iter;
  ++captures_;
  return true;
}

void IterationGraphs::Launch(bool last, cudaStream_t stream) {
  graph(last)->Launch(stream);
  ++launches_;
}
#endif  // CORTADO_USE_CUDA

}  // namespace cortado
