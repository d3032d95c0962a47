#pragma once
// A convolution through cuDNN's graph API (the backend descriptors of
// cudnn_graph.h): the cuDNN engine of Convolution uses it in a net whose
// cudnn.api is GRAPH (cudnn_convolution_layer.hpp; the legacy calls are the
// default until this path has been measured on a GPU).
//
// One ConvPlan is one operation (forward, backward data or backward filter)
// of one geometry, shape, layout and type: its operation graph, and the
// execution plan chosen among the configurations that cuDNN's heuristics
// (mode A) offer, each finalized, kept when its workspace fits the bound
// and, for float storage, when it neither uses Tensor Cores nor converts its
// inputs down (the legacy path's FMA math); the fastest of up to
// kMaxMeasured is kept, by timing each on the device (a first run, then the
// median of three). Plans are cached by their key (with the handle and the
// workspace bound) for the whole process and shared by every layer with the
// same key; measuring synchronizes the device, on the first pass of a new
// shape only.
//
// Internal to the library (CUDA builds).

#include "cortado/config.hpp"

#ifdef CORTADO_USE_CUDA
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cortado {
namespace cudnn_graph {

struct ConvSpec {
  enum Op { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };
  Op op = kForward;
  cudnnDataType_t io = CUDNN_DATA_HALF;       // x, w, y
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;  // the accumulation
  bool strict_fma = false;  // float storage: no Tensor Core engines, no down-converted inputs
  bool nhwc = false;        // x and y NHWC, w KRSC; else NCHW and KCRS
  int64_t n = 0, c = 0, h = 0, w = 0;  // x
  int64_t k = 0, oh = 0, ow = 0;       // y
  int64_t group = 1, kh = 1, kw = 1, ph = 0, pw = 0, sh = 1, sw = 1, dh = 1, dw = 1;
  float beta = 0;  // the output is alpha * conv + beta * output, alpha 1
  int device = 0;

  std::vector<int64_t> key() const;
  std::string describe() const;
};

class ConvPlan {
 public:
  static constexpr int kMaxMeasured = 8;

  /// The cached plan of `spec` for the handle, or a new one measured with
  /// the operands (forward: x, w, y; backward data: w, dy, dx; backward
  /// filter: x, dy, dw; the output is overwritten with garbage) on `handle`'s
  /// stream, within `workspace_limit` bytes. `handle_serial` names the handle
  /// in the cache (Context::serial(): unique for the process, unlike the
  /// handle's address). Null, with the reason in *why, when no engine runs it
  /// (the caller takes the legacy path).
  static std::shared_ptr<const ConvPlan> Find(cudnnHandle_t handle, uint64_t handle_serial, const ConvSpec& spec,
                                              const void* a, const void* b, void* out, size_t workspace_limit,
                                              std::string* why);
  /// How many plans the cache holds (tests).
  static size_t cached();

  ~ConvPlan();
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;

  size_t workspace_bytes() const { return workspace_; }
  /// Runs the operation with Find's operand order, on `handle`'s stream.
  void Execute(cudnnHandle_t handle, const void* a, const void* b, void* out, void* workspace) const;
  const std::string& engine_name() const { return name_; }

 private:
  ConvPlan() = default;
  ConvSpec spec_;
  cudnnBackendDescriptor_t plan_ = nullptr;
  size_t workspace_ = 0;
  std::string name_;
};

}  // namespace cudnn_graph
}  // namespace cortado
#endif  // CORTADO_USE_CUDA
