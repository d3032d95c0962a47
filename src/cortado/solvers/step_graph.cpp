// CUDA graphs of deferred training iterations (solvers/step_graph.hpp).
#include "cortado/solvers/step_graph.hpp"

#include <memory>

#include "cortado/net/net.hpp"
#include "cortado/common.hpp"

#ifdef CORTADO_USE_CUDA
#include <cuda_runtime.h>

#include "cortado/util/cuda.hpp"
#include "cortado/util/cuda_hold.hpp"
#endif

namespace cortado {

std::string StepGraphObstacle(const Net& net, const SolverParameter& param, int ranks, int* head) {
  if (!param.cuda_graphs()) return "cuda_graphs: false";
  if (net.sync_layers()) return "the net's sync_layers waits after every layer";
  if (ranks > 1) return "several ranks (their gradient sums are not captured)";
  // Adam's step count, for one, changes its kernels' arguments every iteration.
  if (param.type() != "SGD" && param.type() != "Nesterov")
    return str_cat("the ", param.type(), " rule (only SGD and Nesterov updates are captured)");
  const auto& layers = net.layers();
  int h = 0;
  while (h < static_cast<int>(layers.size()) && net.bottom_vecs()[h].empty()) ++h;
  for (size_t i = h; i < layers.size(); ++i) {
    if (net.bottom_vecs()[i].empty())
      return str_cat("layer '", layers[i]->name(), "' (", layers[i]->type(),
                     ") has no bottoms but follows layers that do");
    if (!layers[i]->HasGpuPath())
      return str_cat("layer '", layers[i]->name(), "' (", layers[i]->type(), ") runs on the CPU");
  }
  *head = h;
  return "";
}

#ifdef CORTADO_USE_CUDA

StepGraph::~StepGraph() {
  if (exec_) cudaGraphExecDestroy(exec_);  // an in-flight launch is freed when it completes
  if (graph_) cudaGraphDestroy(graph_);
  // Back to their streams' pools: reused only after the graph's launches.
  for (void* p : held_) cuda::device_free(p);
}

bool StepGraph::Begin(cudaStream_t stream, std::string* why) {
  // Relaxed: a block the allocator must still get from cudaMalloc may be.
  const cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *why = str_cat("the capture did not start: ", cudaGetErrorString(e));
    return false;
  }
  hold_ = new cuda::HoldFrees(&held_);
  return true;
}

namespace {

// Whether memory at p is the host's (pageable or pinned).
bool on_host(const void* p) {
  cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  return a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged;
}

// The first copy node that reads or writes host memory, described; "" if none.
std::string host_copy(cudaGraph_t graph) {
  size_t n = 0;
  CORTADO_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) CORTADO_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    CORTADO_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeMemcpy) continue;
    cudaMemcpy3DParms p = {};
    CORTADO_CUDA_CHECK(cudaGraphMemcpyNodeGetParams(node, &p));
    const void* src = p.srcArray ? nullptr : p.srcPtr.ptr;
    const void* dst = p.dstArray ? nullptr : p.dstPtr.ptr;
    if ((src && on_host(src)) || (dst && on_host(dst)) || p.kind == cudaMemcpyHostToDevice ||
        p.kind == cudaMemcpyDeviceToHost)
      return "it copies between host and device memory (a layer's values come from the host each pass)";
  }
  return "";
}

}  // namespace

bool StepGraph::End(cudaStream_t stream, const std::string& error, std::string* why) {
  delete static_cast<cuda::HoldFrees*>(hold_);
  hold_ = nullptr;
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(stream, &graph);
  std::string reason = error;
  if (reason.empty() && e != cudaSuccess) reason = cudaGetErrorString(e);
  cudaGetLastError();  // a failed capture's error is not the next call's
  if (reason.empty() && !graph) reason = "the capture made no graph";
  if (reason.empty()) reason = host_copy(graph);
  if (reason.empty()) {
    const cudaError_t i = cudaGraphInstantiate(&exec_, graph, 0);
    if (i != cudaSuccess) {
      reason = str_cat("instantiating it failed: ", cudaGetErrorString(i));
      cudaGetLastError();
      exec_ = nullptr;
    }
  }
  if (!reason.empty()) {
    if (graph) cudaGraphDestroy(graph);
    *why = reason;
    return false;
  }
  graph_ = graph;
  return true;
}

void StepGraph::Launch(cudaStream_t stream) { CORTADO_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

#endif  // CORTADO_USE_CUDA

}  // namespace cortado
