// Convolutions through cuDNN's graph API (cudnn_conv_graph.hpp).
#include "cudnn_conv_graph.hpp"

#ifdef CORTADO_USE_CUDA
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include <glog/logging.h>

#include "cortado/common.hpp"
#include "cortado/util/cuda.hpp"

namespace cortado {
namespace cudnn_graph {

namespace {

// A failed backend call: which step, and cuDNN's word for it.
struct BackendFailure {
  std::string what;
};

void check(cudnnStatus_t s, const char* step) {
  if (s != CUDNN_STATUS_SUCCESS) throw BackendFailure{str_cat(step, ": ", cudnnGetErrorString(s))};
}

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) { check(cudnnBackendCreateDescriptor(type, &d_), "create"); }
  Desc(Desc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc& operator=(Desc&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnBackendDescriptor_t release() {
    cudnnBackendDescriptor_t d = d_;
    d_ = nullptr;
    return d;
  }
  template <typename T>
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const T* values) {
    check(cudnnBackendSetAttribute(d_, name, type, count, values), "set attribute");
    return *this;
  }
  Desc& set(cudnnBackendAttributeName_t name, const Desc& nested) {
    cudnnBackendDescriptor_t d = nested.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
  }
  Desc& finalize(const char* what) {
    check(cudnnBackendFinalize(d_), what);
    return *this;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

constexpr int64_t kX = 1, kW = 2, kY = 3;  // the tensors' unique ids
constexpr int64_t kAlignment = 16;         // bytes; Execute checks the pointers

// dims in Caffe's order (N, C, H, W) or (K, C/g, KH, KW); strides NCHW or,
// channels last, NHWC / KRSC.
Desc Tensor(int64_t id, cudnnDataType_t type, const int64_t (&dims)[4], bool channels_last) {
  const int64_t c = dims[1], h = dims[2], w = dims[3];
  const int64_t nchw[4] = {c * h * w, h * w, w, 1};
  const int64_t nhwc[4] = {h * w * c, 1, w * c, c};
  Desc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims)
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, channels_last ? nhwc : nchw)
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &id)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment)
      .finalize("tensor");
  return d;
}

// The operation graph of one convolution.
Desc Graph(cudnnHandle_t handle, const ConvSpec& s) {
  const Desc x = Tensor(kX, s.io, {s.n, s.c, s.h, s.w}, s.nhwc);
  const Desc w = Tensor(kW, s.io, {s.k, s.c / s.group, s.kh, s.kw}, s.nhwc);
  const Desc y = Tensor(kY, s.io, {s.n, s.k, s.oh, s.ow}, s.nhwc);
  Desc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const int64_t spatial = 2;
  const int64_t dilation[2] = {s.dh, s.dw}, stride[2] = {s.sh, s.sw}, pad[2] = {s.ph, s.pw};
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &s.compute)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial)
      .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation)
      .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride)
      .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad)
      .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad)
      .finalize("convolution");
  // alpha and beta: double for double tensors, float otherwise.
  const double alpha_d = 1, beta_d = s.beta;
  const float alpha_f = 1, beta_f = s.beta;
  const bool dbl = s.io == CUDNN_DATA_DOUBLE;
  const auto scalars = [&](Desc* op, cudnnBackendAttributeName_t alpha, cudnnBackendAttributeName_t beta) {
    if (dbl) {
      op->set(alpha, CUDNN_TYPE_DOUBLE, 1, &alpha_d).set(beta, CUDNN_TYPE_DOUBLE, 1, &beta_d);
    } else {
      op->set(alpha, CUDNN_TYPE_FLOAT, 1, &alpha_f).set(beta, CUDNN_TYPE_FLOAT, 1, &beta_f);
    }
  };
  Desc op(s.op == ConvSpec::kForward         ? CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
          : s.op == ConvSpec::kBackwardData ? CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
                                             : CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
  if (s.op == ConvSpec::kForward) {
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
    scalars(&op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA);
  } else if (s.op == ConvSpec::kBackwardData) {
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, x)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, w)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, y)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, conv);
    scalars(&op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA);
  } else {
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, x)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, w)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, y)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, conv);
    scalars(&op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA);
  }
  op.finalize("operation");
  Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, op)
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
      .finalize("operation graph");
  return graph;
}

// The ids and pointers of Find's operand order (a, b, out) for each op.
void Operands(ConvSpec::Op op, const void* a, const void* b, void* out, int64_t (&ids)[3], void* (&ptrs)[3]) {
  const int64_t forward[3] = {kX, kW, kY}, data[3] = {kW, kY, kX}, filter[3] = {kX, kY, kW};
  const int64_t* id = op == ConvSpec::kForward ? forward : op == ConvSpec::kBackwardData ? data : filter;
  std::copy(id, id + 3, ids);
  ptrs[0] = const_cast<void*>(a);
  ptrs[1] = const_cast<void*>(b);
  ptrs[2] = out;
}

cudnnStatus_t Run(cudnnHandle_t handle, cudnnBackendDescriptor_t plan, ConvSpec::Op op, const void* a,
                  const void* b, void* out, void* workspace) {
  int64_t ids[3];
  void* ptrs[3];
  Operands(op, a, b, out, ids, ptrs);
  cudnnBackendDescriptor_t pack = nullptr;
  cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
  if (s != CUDNN_STATUS_SUCCESS) return s;
  s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, ids);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(pack);
  if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendExecute(handle, plan, pack);
  cudnnBackendDestroyDescriptor(pack);
  return s;
}

// Whether the engine of `cfg` keeps float math exact as FMA (no Tensor Cores,
// no inputs converted to a narrower type); its global index in *index.
bool StrictFma(cudnnBackendDescriptor_t cfg, int64_t* index) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  int64_t n = 0;
  check(cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e),
        "engine of a configuration");
  check(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, index),
        "engine index");
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t count = 0;
  check(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes),
        "numerical notes");
  for (int64_t i = 0; i < count; ++i)
    if (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)
      return false;
  return true;
}

std::mutex& cache_mutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::vector<int64_t>, std::shared_ptr<const ConvPlan>>& cache() {
  static auto* c = new std::map<std::vector<int64_t>, std::shared_ptr<const ConvPlan>>();
  return *c;
}

}  // namespace

std::vector<int64_t> ConvSpec::key() const {
  int32_t beta_bits = 0;
  std::memcpy(&beta_bits, &beta, sizeof beta_bits);
  return {device, op, io, compute, strict_fma, nhwc, n, c, h, w, k, oh, ow, group, kh, kw, ph, pw, sh, sw, dh, dw,
          beta_bits};
}

std::string ConvSpec::describe() const {
  static const char* const kOps[] = {"forward", "backward data", "backward filter"};
  return str_cat(kOps[op], " ", n, "x", c, "x", h, "x", w, " -> ", k, "x", oh, "x", ow, " kernel ", kh, "x", kw,
                 nhwc ? " NHWC" : " NCHW");
}

size_t ConvPlan::cached() {
  std::lock_guard<std::mutex> lock(cache_mutex());
  return cache().size();
}

ConvPlan::~ConvPlan() {
  if (plan_) cudnnBackendDestroyDescriptor(plan_);
}

std::shared_ptr<const ConvPlan> ConvPlan::Find(cudnnHandle_t handle, uint64_t handle_serial, const ConvSpec& spec,
                                               const void* a, const void* b, void* out, size_t workspace_limit,
                                               std::string* why) {
  // A plan is finalized with a handle: cached per handle (a Context's, used
  // on its stream), so that no plan serves another handle or thread; by the
  // Context's serial, not the handle's address, which a later Context's
  // handle may reuse.
  std::vector<int64_t> key = spec.key();
  key.push_back(static_cast<int64_t>(handle_serial));
  key.push_back(static_cast<int64_t>(workspace_limit));  // nets with other bounds may choose other plans
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    auto it = cache().find(key);
    if (it != cache().end()) {
      if (!it->second && why) *why = "no engine (measured before)";
      return it->second;
    }
  }
  std::shared_ptr<const ConvPlan> best;
  try {
    const Desc graph = Graph(handle, spec);
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode)
        .finalize("heuristics");
    int64_t count = 0;
    check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                   &count, nullptr),
          "heuristics' count");
    std::vector<Desc> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(cfgs.back().get());
    }
    int64_t got = 0;
    if (count > 0) {
      check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                     &got, raw.data()),
            "heuristics' results");
    }
    // The candidates: finalized plans within the bound, in the heuristics' order.
    struct Candidate {
      Desc plan;
      size_t bytes;
      int64_t engine;
    };
    std::vector<Candidate> candidates;
    for (int64_t i = 0; i < got && static_cast<int>(candidates.size()) < kMaxMeasured; ++i) {
      try {
        int64_t engine = -1;
        bool strict = true;
        try {
          strict = StrictFma(raw[i], &engine);
        } catch (const BackendFailure&) {
          if (spec.strict_fma) throw;  // unknown notes: only a net that needs strict FMA skips the engine
        }
        if (spec.strict_fma && !strict) continue;
        Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
            .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[i])
            .finalize("execution plan");
        int64_t bytes = 0, n = 0;
        check(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                       &bytes),
              "workspace size");
        if (bytes < 0 || static_cast<size_t>(bytes) > workspace_limit) continue;
        candidates.push_back(Candidate{std::move(plan), static_cast<size_t>(bytes), engine});
      } catch (const BackendFailure& f) {
        VLOG(1) << "cuDNN graph " << spec.describe() << ": configuration " << i << " skipped (" << f.what << ")";
      }
    }
    if (candidates.empty()) throw BackendFailure{str_cat("none of ", got, " engine configurations fits")};
    // Measure each: a first run, then the median of three timed runs.
    size_t most = 0;
    for (const Candidate& c : candidates) most = std::max(most, c.bytes);
    std::unique_ptr<void, void (*)(void*)> space(most ? cuda::device_alloc(most) : nullptr, &cuda::device_free);
    cudaStream_t stream = nullptr;
    check(cudnnGetStream(handle, &stream), "stream");
    cudaEvent_t start, stop;
    CORTADO_CUDA_CHECK(cudaEventCreate(&start));
    CORTADO_CUDA_CHECK(cudaEventCreate(&stop));
    float best_ms = 0;
    int best_i = -1;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (Run(handle, candidates[i].plan.get(), spec.op, a, b, out, space.get()) != CUDNN_STATUS_SUCCESS) continue;
      float ms[3];
      bool ok = true;
      for (float& m : ms) {
        CORTADO_CUDA_CHECK(cudaEventRecord(start, stream));
        ok = ok && Run(handle, candidates[i].plan.get(), spec.op, a, b, out, space.get()) == CUDNN_STATUS_SUCCESS;
        CORTADO_CUDA_CHECK(cudaEventRecord(stop, stream));
        CORTADO_CUDA_CHECK(cudaEventSynchronize(stop));
        CORTADO_CUDA_CHECK(cudaEventElapsedTime(&m, start, stop));
      }
      if (!ok) continue;
      std::sort(ms, ms + 3);
      if (best_i < 0 || ms[1] < best_ms) best_ms = ms[1], best_i = static_cast<int>(i);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (best_i < 0) throw BackendFailure{str_cat("none of ", candidates.size(), " plans ran")};
    std::shared_ptr<ConvPlan> p(new ConvPlan());
    p->spec_ = spec;
    p->workspace_ = candidates[best_i].bytes;
    p->name_ = str_cat("engine ", candidates[best_i].engine);
    p->plan_ = candidates[best_i].plan.release();
    VLOG(1) << "cuDNN graph " << spec.describe() << ": " << p->name_ << " of " << candidates.size() << ", "
            << p->workspace_ << " bytes of workspace, " << best_ms << " ms";
    best = p;
  } catch (const BackendFailure& f) {
    if (why) *why = f.what;
    best = nullptr;
  }
  std::lock_guard<std::mutex> lock(cache_mutex());
  cache().emplace(key, best);
  return best;
}

void ConvPlan::Execute(cudnnHandle_t handle, const void* a, const void* b, void* out, void* workspace) const {
  for (const void* p : {a, b, static_cast<const void*>(out)}) {
    CORTADO_CHECK(reinterpret_cast<uintptr_t>(p) % kAlignment == 0)
        << "cuDNN graph " << spec_.describe() << ": an operand is not " << kAlignment << "-byte aligned";
  }
  const cudnnStatus_t s = Run(handle, plan_, spec_.op, a, b, out, workspace);
  if (s != CUDNN_STATUS_SUCCESS) {
    throw Error(str_cat("cuDNN graph ", spec_.describe(), " (", name_, "): ", cudnnGetErrorString(s)));
  }
}

}  // namespace cudnn_graph
}  // namespace cortado
#endif  // CORTADO_USE_CUDA
