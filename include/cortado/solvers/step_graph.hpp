#pragma once
// A deferred training iteration (solver.hpp, Step) as CUDA graphs: the
// layers after the net's data layers forward, the loss sums, backward, the
// check, the decision and the update are captured once and replayed, one
// launch in place of about 1,400 on ResNet-50 (with iter_size > 1, a second
// graph holds a pass without the update). The data layers run before each
// launch, outside the graphs (their batches come from the host).
//
// What a graph fixes at capture and the solver therefore checks:
// - kernel arguments made on the host: the update's rate, momentum and weight
//   decay are the graph's key (a change captures again; changes within 20
//   iterations, as a "poly" rate makes, turn graphs off), and only rules whose
//   other per-iteration values do not change (SGD, Nesterov) are captured;
// - device addresses: the records are indexed by a device counter; blocks
//   freed during the capture are held for the graph (util/cuda_hold.hpp);
// - host data: a capture that copies from or to host memory (a layer whose
//   values come from the host each pass, such as Dropout's mask) is refused,
//   as is one that fails (a layer that waits for the device): the iteration
//   then runs without a graph, and so do the rest.
// The solver field cuda_graphs: false (trainer --cuda_graphs=0) turns graphs
// off; so does the net's sync_layers.
#include <string>
#include <vector>

#include "cortado/config.hpp"

struct CUstream_st;
struct CUgraph_st;
struct CUgraphExec_st;

namespace cortado {

class Net;
class SolverParameter;

/// Why the deferred steps of `net` (trained with `param` by `ranks` ranks)
/// cannot be captured, or "" if they can; *head is then the number of leading
/// layers without bottoms (the data layers), which run outside the graph.
std::string StepGraphObstacle(const Net& net, const SolverParameter& param, int ranks, int* head);

#ifdef CORTADO_USE_CUDA
class StepGraph {
 public:
  StepGraph() = default;
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  /// Captures what `body` enqueues on `stream` (nothing runs); false, with
  /// the reason in *why, if the capture failed or copies host memory.
  template <typename F>
  bool Capture(CUstream_st* stream, F&& body, std::string* why) {
    if (!Begin(stream, why)) return false;
    try {
      body();
    } catch (const std::exception& e) {
      return End(stream, e.what(), why);
    }
    return End(stream, "", why);
  }
  void Launch(CUstream_st* stream);

 private:
  bool Begin(CUstream_st* stream, std::string* why);
  bool End(CUstream_st* stream, const std::string& error, std::string* why);

  CUgraph_st* graph_ = nullptr;
  CUgraphExec_st* exec_ = nullptr;
  std::vector<void*> held_;  // device blocks freed during the capture
  void* hold_ = nullptr;     // the HoldFrees scope while capturing
};
#endif  // CORTADO_USE_CUDA

}  // namespace cortado
