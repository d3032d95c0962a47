#include "cortado/layers/cudnn_convolution_layer.hpp"

#ifdef CORTADO_USE_CUDA
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include <glog/logging.h>

#include "cortado/layers/bias_layer.hpp"
#include "cortado/layers/permute_layer.hpp"
#include "cortado/util/cuda.hpp"
#include "cudnn_conv_graph.hpp"
#include "cortado/util/gpu_math.hpp"

namespace cortado {

namespace {

using DeviceScratch = std::unique_ptr<void, void (*)(void*)>;
DeviceScratch scratch(size_t bytes) { return DeviceScratch(cuda::device_alloc(bytes), &cuda::device_free); }

cudnnDataType_t data_type(Type t) {
  switch (t) {
    case DOUBLE: return CUDNN_DATA_DOUBLE;
    case FLOAT: return CUDNN_DATA_FLOAT;
    case FLOAT16: return CUDNN_DATA_HALF;
    case BFLOAT16: break;
  }
  return CUDNN_DATA_BFLOAT16;
}

// alpha/beta: double for double tensors, float otherwise (cuDNN's rule).
const void* scalar(Type storage, int v) {
  static const float f[2] = {0.f, 1.f};
  static const double d[2] = {0.0, 1.0};
  return storage == DOUBLE ? static_cast<const void*>(&d[v]) : static_cast<const void*>(&f[v]);
}

// A chosen algorithm, shared by every layer with the same key.
struct Choice {
  int algo = 0;
  size_t bytes = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

std::mutex& cache_mutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::vector<int>, Choice>& cache() {
  static auto* c = new std::map<std::vector<int>, Choice>();
  return *c;
}

// Workspace for measuring: the limit, halved while it exceeds half the free
// device memory.
size_t find_workspace_bytes(size_t limit) {
  size_t free = 0, total = 0;
  CORTADO_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  size_t ws = limit;
  while (ws > 0 && ws > free / 2) ws /= 2;
  return ws;
}

// A measured algorithm: the choice and its time.
struct Candidate {
  Choice choice;
  float ms = 0;
};

// Appends the candidates that ran and fit the workspace.
template <typename Perf>
void collect(const Perf* perf, int n, size_t ws, std::vector<Candidate>* out) {
  for (int i = 0; i < n; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws) {
      out->push_back(Candidate{Choice{static_cast<int>(perf[i].algo), perf[i].memory, perf[i].mathType}, perf[i].time});
    }
  }
}

const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor op with conversion";
    case CUDNN_FMA_MATH: return "FMA";
  }
  return "unknown";
}

}  // namespace

size_t cudnn_graph_plans_cached() { return cudnn_graph::ConvPlan::cached(); }

namespace detail {

// One cuDNN call (forward, backward data or backward filter) of one layer:
// its descriptors, its types, and the algorithm chosen for the current shape.
struct CudnnConvPass {
  enum Op { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

  Op op;
  Type storage;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::vector<int> key;  // device, op, types, workspace limit, geometry, then the shapes
  size_t geometry_keys = 0;
  bool ready = false;
  Choice choice;
  cudnnMathType_t asked_math = CUDNN_DEFAULT_MATH;  // the type's math (the first one measured)
  // The net's cudnn fields: through the graph API or the legacy calls, and
  // the workspace bound of the choice.
  bool graph_api = false;
  size_t workspace_limit = 0;
  // The graph API's plan (null: the legacy call) and what it is built from.
  cudnn_graph::ConvSpec spec;
  std::shared_ptr<const cudnn_graph::ConvPlan> graph;

  CudnnConvPass(int device, Op o, Type storage_type, Type math, int num_output, int channels, int group,
                const ConvWindow& win, const CuDNNParameter& cudnn)
      : op(o), storage(storage_type), graph_api(cudnn.api() == CuDNNParameter::GRAPH),
        workspace_limit(size_t{cudnn.workspace_mb()} << 20) {
    const int kh = win.kh, kw = win.kw, ph = win.ph, pw = win.pw, sh = win.sh, sw = win.sw, dh = win.dh, dw = win.dw;
    CORTADO_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    CORTADO_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    CORTADO_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    CORTADO_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    const cudnnDataType_t data = data_type(storage);
    // 16-bit storage computes in FP32 unless FLOAT16 math was asked for
    // for float16 (cuDNN has no bfloat16 compute type).
    const cudnnDataType_t compute =
        storage == BFLOAT16 || (storage == FLOAT16 && math == FLOAT) ? CUDNN_DATA_FLOAT : data;
    const cudnnMathType_t math_type = is_half_type(storage) ? CUDNN_TENSOR_OP_MATH
                                      : storage == FLOAT ? CUDNN_FMA_MATH
                                                         : CUDNN_DEFAULT_MATH;
    CORTADO_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, ph, pw, sh, sw, dh, dw, CUDNN_CROSS_CORRELATION,
                                                        compute));
    CORTADO_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, group));
    CORTADO_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math_type));
    CORTADO_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, data, CUDNN_TENSOR_NCHW, num_output, channels / group, kh, kw));
    choice.math = math_type;
    asked_math = math_type;
    spec.op = static_cast<cudnn_graph::ConvSpec::Op>(o);
    spec.io = data;
    spec.compute = compute;
    spec.strict_fma = storage == FLOAT;
    spec.device = device;
    spec.k = num_output;
    spec.group = group;
    spec.kh = kh, spec.kw = kw, spec.ph = ph, spec.pw = pw, spec.sh = sh, spec.sw = sw, spec.dh = dh, spec.dw = dw;
    // Nets with other workspace bounds may choose other algorithms.
    key = {device, op, static_cast<int>(data), static_cast<int>(compute), static_cast<int>(math_type),
           static_cast<int>(cudnn.workspace_mb()), num_output, channels, group, kh, kw, ph, pw, sh, sw, dh, dw};
    geometry_keys = key.size();
  }

  ~CudnnConvPass() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
  CudnnConvPass(const CudnnConvPass&) = delete;
  CudnnConvPass& operator=(const CudnnConvPass&) = delete;

  // x (n, c, h, w), y (n, k, oh, ow), in NCHW or (nhwc) NHWC with the
  // filter in KRSC; a new shape or layout needs a new algorithm.
  void Reshape(int n, int c, int h, int wd, int k, int oh, int ow, bool nhwc, int group, const ConvWindow& win) {
    std::vector<int> shape{n, c, h, wd, k, oh, ow, nhwc ? 1 : 0};
    if (ready && key.size() == geometry_keys + shape.size() &&
        std::equal(shape.begin(), shape.end(), key.begin() + geometry_keys))
      return;
    key.resize(geometry_keys);
    key.insert(key.end(), shape.begin(), shape.end());
    const cudnnDataType_t data = data_type(storage);
    const cudnnTensorFormat_t format = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    CORTADO_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, format, data, n, c, h, wd));
    CORTADO_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, format, data, n, k, oh, ow));
    CORTADO_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, data, format, k, c / group, win.kh, win.kw));
    spec.n = n, spec.c = c, spec.h = h, spec.w = wd, spec.oh = oh, spec.ow = ow;
    spec.nhwc = nhwc;
    // The filter gradient accumulates into the diff, except in NHWC (a KRSC scratch).
    spec.beta = op == kBackwardFilter ? 1.f : 0.f;
    graph.reset();
    ready = false;
  }

  // Looks the key up, or measures with the given operands: forward (x, w, y),
  // backward data (w, dy, dx), backward filter (x, dy, dw). The output
  // operand is written with garbage; callers pass one they overwrite next or
  // a scratch buffer. float16 is measured twice, with Tensor Core math and
  // with FMA-only math, and the fastest of both is kept: cuDNN's Tensor Core
  // kernels want channel counts that are multiples of 8, and for small or odd
  // counts (LeNet's 1 and 20) an FMA kernel on NCHW can be the faster one.
  void Choose(const Context& ctx, const void* a, const void* b, void* out) {
    cudnnHandle_t handle = ctx.cudnn();
    if (graph_api) {
      std::string why;
      graph = cudnn_graph::ConvPlan::Find(handle, ctx.serial(), spec, a, b, out,
                                          find_workspace_bytes(workspace_limit), &why);
      if (graph) {
        choice = Choice{-1, graph->workspace_bytes(), asked_math};
        ready = true;
        return;
      }
      LOG(WARNING) << "cuDNN's graph API has no plan for " << spec.describe() << " (" << why
                   << "); the legacy call runs it";
    }
    {
      std::lock_guard<std::mutex> lock(cache_mutex());
      auto it = cache().find(key);
      if (it != cache().end()) {
        Use(it->second);
        return;
      }
    }
    const size_t ws = find_workspace_bytes(workspace_limit);
    DeviceScratch space = scratch(ws);
    std::vector<cudnnMathType_t> maths{asked_math};
    if (is_half_type(storage)) maths.push_back(CUDNN_FMA_MATH);
    std::vector<Candidate> found;
    for (size_t m = 0; m < maths.size(); ++m) {
      CORTADO_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, maths[m]));
      const cudnnStatus_t status = Find(handle, a, b, out, space.get(), ws, &found);
      if (m == 0) CORTADO_CUDNN_CHECK(status);  // the second math type is optional
      if (status != CUDNN_STATUS_SUCCESS)
        VLOG(1) << "cuDNN could not measure " << math_name(maths[m]) << " math: " << cudnnGetErrorString(status);
    }
    static const char* const kOps[] = {"forward", "backward data", "backward filter"};
    if (found.empty()) fail("cuDNN found no ", kOps[op], " convolution algorithm within a workspace of ", ws, " bytes");
    // The fastest; the first measured (Tensor Core math) on a tie.
    const Candidate* best = &found[0];
    for (const Candidate& c : found)
      if (c.ms < best->ms) best = &c;
    const int* sh = key.data() + geometry_keys;  // n, c, h, w, k, oh, ow
    VLOG(1) << "cuDNN " << kOps[op] << " " << type_name(storage) << " " << sh[0] << "x" << sh[1] << "x" << sh[2]
            << "x" << sh[3] << " -> " << sh[4] << "x" << sh[5] << "x" << sh[6] << ": algorithm " << best->choice.algo << ", " << math_name(best->choice.math) << " math, "
            << best->choice.bytes << " bytes of workspace, " << best->ms << " ms";
    {
      std::lock_guard<std::mutex> lock(cache_mutex());
      cache().emplace(key, best->choice);
    }
    Use(best->choice);
  }

  // One cudnnFind*Ex call with the descriptor's current math type; appends
  // what it measured.
  cudnnStatus_t Find(cudnnHandle_t handle, const void* a, const void* b, void* out, void* space, size_t ws,
                     std::vector<Candidate>* found) {
    int max = 0, n = 0;
    cudnnStatus_t status;
    if (op == kForward) {
      CORTADO_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(std::max(max, 1));
      status = cudnnFindConvolutionForwardAlgorithmEx(handle, x, a, w, b, conv, y, out, max, &n, perf.data(), space,
                                                      ws);
      if (status == CUDNN_STATUS_SUCCESS) collect(perf.data(), n, ws, found);
    } else if (op == kBackwardData) {
      CORTADO_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(std::max(max, 1));
      status = cudnnFindConvolutionBackwardDataAlgorithmEx(handle, w, a, y, b, conv, x, out, max, &n, perf.data(),
                                                           space, ws);
      if (status == CUDNN_STATUS_SUCCESS) collect(perf.data(), n, ws, found);
    } else {
      CORTADO_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(std::max(max, 1));
      status = cudnnFindConvolutionBackwardFilterAlgorithmEx(handle, x, a, y, b, conv, w, out, max, &n, perf.data(),
                                                             space, ws);
      if (status == CUDNN_STATUS_SUCCESS) collect(perf.data(), n, ws, found);
    }
    return status;
  }

  // The algorithm may have been measured with another math type than the one
  // asked for (cuDNN reports it); run it with the one it was measured with.
  void Use(const Choice& c) {
    choice = c;
    CORTADO_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, c.math));
    ready = true;
  }

  void* workspace() const { return cuda::stream_workspace(choice.bytes); }  // one per stream
};

}  // namespace detail

using detail::CudnnConvPass;

template <typename Ftype, typename Btype>
CuDNNConvolutionLayer<Ftype, Btype>::CuDNNConvolutionLayer(const LayerParameter& param)
    : ConvolutionLayer<Ftype, Btype>(param) {}

template <typename Ftype, typename Btype>
CuDNNConvolutionLayer<Ftype, Btype>::~CuDNNConvolutionLayer() = default;

template <typename Ftype, typename Btype>
void CuDNNConvolutionLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  ConvolutionLayer<Ftype, Btype>::LayerSetUp(bottom, top);
  auto make = [this](CudnnConvPass::Op op, Type storage, Type math) {
    return std::make_unique<CudnnConvPass>(this->context().device(), op, storage, math, this->num_output_,
                                           this->channels_, this->group_, this->win_, this->cudnn_param());
  };
  pad_multiple_ = static_cast<int>(this->cudnn_param().pad_channels());  // the Net checked it: 0, 4 or 8
  fwd_ = make(CudnnConvPass::kForward, type_of<Ftype>(), this->forward_math_);
  bwd_data_ = make(CudnnConvPass::kBackwardData, type_of<Btype>(), this->backward_math_);
  bwd_filter_ = make(CudnnConvPass::kBackwardFilter, type_of<Btype>(), this->backward_math_);
}

template <typename Ftype, typename Btype>
void CuDNNConvolutionLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  ConvolutionLayer<Ftype, Btype>::Reshape(bottom, top);
  // The layout plan (net_layout.hpp) gives a convolution's bottoms and tops
  // one layout; NHWC runs on cuDNN's NHWC formats, the filter in KRSC.
  nhwc_ = bottom[0]->layout() == Layout::NHWC;
  for (const BlobVec* v : {&bottom, &top}) {
    for (const Blob* b : *v) {
      if ((b->layout() == Layout::NHWC) != nhwc_) {
        this->field_error("bottom", "the bottoms and tops mix the NCHW and NHWC layouts (",
                          layout_name(bottom[0]->layout()), " and ", layout_name(b->layout()), ")");
      }
    }
  }
  // Channel padding: NHWC without groups, channels not a multiple of it.
  const int multiple = nhwc_ && this->group_ == 1 ? pad_multiple_ : 0;
  padded_c_ = multiple > 0 && this->channels_ % multiple != 0
                  ? (this->channels_ + multiple - 1) / multiple * multiple : 0;
  const int c = padded_c_ > 0 ? padded_c_ : this->channels_;
  // A 1x1 filter is KRSC as it is KCRS (the same order in memory): cuDNN
  // reads and accumulates into the parameter itself, with no copies.
  krsc_copy_ = nhwc_ && (padded_c_ > 0 || this->win_.kh * this->win_.kw > 1);
  if (krsc_copy_) {
    std::vector<int> shape = this->blobs_[0]->shape();  // K, C/group, R, S
    shape[1] = c / this->group_;
    for (Blob* b : {&w_krsc_, &dw_krsc_}) {
      b->Reshape(shape);
      b->set_layout(Layout::NHWC);
    }
  }
  if (padded_c_ > 0) {
    for (Blob* b : {&x_pad_, &x_pad_back_}) {
      if (b == &x_pad_back_ && std::is_same_v<Ftype, Btype>) continue;
      b->Reshape({this->num_, c, this->height_, this->width_});
      b->set_layout(Layout::NHWC);
    }
  }
  for (CudnnConvPass* p : {fwd_.get(), bwd_data_.get(), bwd_filter_.get()}) {
    p->Reshape(this->num_, c, this->height_, this->width_, this->num_output_, this->out_h_, this->out_w_, nhwc_,
               this->group_, this->win_);
  }
}

template <typename Ftype, typename Btype>
void CuDNNConvolutionLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  cudnnHandle_t handle = this->context().cudnn();
  const Type t = type_of<Ftype>();
  const int ohw = this->out_h_ * this->out_w_;
  const Ftype* w = this->blobs_[0]->template gpu_data<Ftype>();
  const int64_t hw = int64_t{this->height_} * this->width_;
  cudaStream_t stream = this->context().stream();
  if (krsc_copy_) {  // Caffe's KCRS weights as cuDNN's NHWC filter (KRSC), every pass: the weights change
    Krsc(true, sizeof(Ftype), w, w_krsc_.template mutable_gpu_data<Ftype>(), stream);
    w = w_krsc_.template gpu_data<Ftype>();
  }
  const Ftype* b = this->bias_term_ ? this->blobs_[1]->template gpu_data<Ftype>() : nullptr;
  // The bias's view of y: (N, K, OH*OW), or (N*OH*OW, K, 1) in NHWC.
  const int64_t b_outer = nhwc_ ? int64_t{this->num_} * ohw : this->num_, b_inner = nhwc_ ? 1 : ohw;
  CudnnConvPass& p = *fwd_;
  for (size_t i = 0; i < bottom.size(); ++i) {
    const Ftype* x = bottom[i]->template gpu_data<Ftype>();
    if (padded_c_ > 0) {
      PadChannels(this->num_ * hw, this->channels_, 1, padded_c_, sizeof(Ftype), x,
                  x_pad_.template mutable_gpu_data<Ftype>(), true, stream);
      x = x_pad_.template gpu_data<Ftype>();
    }
    Ftype* y = top[i]->template mutable_gpu_data<Ftype>();
    if (!p.ready) p.Choose(this->context(), x, w, y);
    if (p.graph) {
      p.graph->Execute(handle, x, w, y, p.workspace());
    } else {
      CORTADO_CUDNN_CHECK(cudnnConvolutionForward(handle, scalar(t, 1), p.x, x, p.w, w, p.conv,
                                                  static_cast<cudnnConvolutionFwdAlgo_t>(p.choice.algo),
                                                  p.workspace(), p.choice.bytes, scalar(t, 0), p.y, y));
    }
    if (b) gpu::bias_forward<Ftype>(b_outer, this->num_output_, b_inner, y, b, y, stream);
  }
}

template <typename Ftype, typename Btype>
void CuDNNConvolutionLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                       const BlobVec& bottom) {
  cudnnHandle_t handle = this->context().cudnn();
  const Type t = type_of<Btype>();
  const int ohw = this->out_h_ * this->out_w_;
  const bool do_w = this->param_propagate_down(0);
  const bool do_b = this->bias_term_ && this->param_propagate_down(1);
  Btype* wd = do_w ? this->blobs_[0]->template mutable_gpu_diff<Btype>() : nullptr;
  Btype* bd = do_b ? this->blobs_[1]->template mutable_gpu_diff<Btype>() : nullptr;
  cudaStream_t stream = this->context().stream();
  const int64_t b_outer = nhwc_ ? int64_t{this->num_} * ohw : this->num_, b_inner = nhwc_ ? 1 : ohw;
  // NHWC with KRSC copies (krsc_copy_): the data gradient reads the
  // forward's KRSC weights (converted to Btype by the tensor where the types
  // differ; the weights have not changed since); the filter gradient
  // accumulates into the diff moved to KRSC (its pad channels zero), which
  // is then moved back. Padded: the forward's padded bottom is read again
  // where it is the only bottom in the same type, else the bottom is padded
  // again (in Btype, into a blob of that type); the data gradient is
  // computed padded and its pad channels dropped.
  const int64_t nhw = int64_t{this->num_} * this->height_ * this->width_;
  Blob& x_pad = std::is_same_v<Ftype, Btype> ? x_pad_ : x_pad_back_;
  const bool repad = bottom.size() > 1 || !std::is_same_v<Ftype, Btype>;
  for (size_t i = 0; i < top.size(); ++i) {
    const bool do_x = i < propagate_down.size() && propagate_down[i];
    if (!do_w && !do_b && !do_x) continue;
    const Btype* dy = top[i]->template gpu_diff<Btype>();
    if (do_b) gpu::bias_backward<Btype>(b_outer, this->num_output_, b_inner, dy, true, bd, stream);
    if (do_w) {
      CudnnConvPass& p = *bwd_filter_;
      const Btype* x = bottom[i]->template gpu_data<Btype>();
      if (padded_c_ > 0) {
        if (repad) {
          PadChannels(nhw, this->channels_, 1, padded_c_, sizeof(Btype), x, x_pad.template mutable_gpu_data<Btype>(),
                      true, stream);
        }
        x = x_pad.template gpu_data<Btype>();
      }
      if (!p.ready) {
        // Measuring writes its output: give it a scratch filter, not the accumulated diff.
        DeviceScratch dw = scratch((krsc_copy_ ? dw_krsc_.count() : this->blobs_[0]->count()) * sizeof(Btype));
        p.Choose(this->context(), x, dy, dw.get());
      }
      Btype* dw = wd;
      if (krsc_copy_) {  // the diff as KRSC, accumulated into there
        dw = dw_krsc_.template mutable_gpu_diff<Btype>();
        Krsc(true, sizeof(Btype), wd, dw, stream);
      }
      if (p.graph) {  // beta 1 (the spec)
        p.graph->Execute(handle, x, dy, dw, p.workspace());
      } else {
        CORTADO_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
            handle, scalar(t, 1), p.x, x, p.y, dy, p.conv,
            static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.choice.algo), p.workspace(), p.choice.bytes,
            scalar(t, 1), p.w, dw));
      }
      if (krsc_copy_) Krsc(false, sizeof(Btype), dw, wd, stream);
    }
    if (do_x) {
      CudnnConvPass& p = *bwd_data_;
      const Btype* w =
          krsc_copy_ ? w_krsc_.template gpu_data<Btype>() : this->blobs_[0]->template gpu_data<Btype>();
      Btype* dx = padded_c_ > 0 ? x_pad.template mutable_gpu_diff<Btype>()
                                : bottom[i]->template mutable_gpu_diff<Btype>();
      if (!p.ready) p.Choose(this->context(), w, dy, dx);
      if (p.graph) {
        p.graph->Execute(handle, w, dy, dx, p.workspace());
      } else {
        CORTADO_CUDNN_CHECK(cudnnConvolutionBackwardData(
            handle, scalar(t, 1), p.w, w, p.y, dy, p.conv,
            static_cast<cudnnConvolutionBwdDataAlgo_t>(p.choice.algo), p.workspace(), p.choice.bytes, scalar(t, 0),
            p.x, dx));
      }
      if (padded_c_ > 0) {
        UnpadChannels(nhw, this->channels_, 1, padded_c_, sizeof(Btype), dx,
                      bottom[i]->template mutable_gpu_diff<Btype>(), true, stream);
      }
    }
  }
}

template <typename Ftype, typename Btype>
void CuDNNConvolutionLayer<Ftype, Btype>::Krsc(bool to_krsc, size_t bytes, const void* from, void* to,
                                               CUstream_st* stream) const {
  // (K, C/group, R*S) <-> (K, R*S, C') with C' = C/group, or padded_c_
  // (then without groups) with zero pad channels.
  const int c = this->channels_ / this->group_, cp = padded_c_ > 0 ? padded_c_ : c;
  const int64_t rs = int64_t{this->win_.kh} * this->win_.kw;
  if (to_krsc) {
    PadChannels(this->num_output_, c, rs, cp, bytes, from, to, true, stream);
  } else {
    UnpadChannels(this->num_output_, c, rs, cp, bytes, from, to, true, stream);
  }
}

template <typename Ftype, typename Btype>
int CuDNNConvolutionLayer<Ftype, Btype>::graph_api_passes() const {
  int n = 0;
  for (const CudnnConvPass* p : {fwd_.get(), bwd_data_.get(), bwd_filter_.get()}) n += p && p->graph ? 1 : 0;
  return n;
}

CORTADO_INSTANTIATE_LAYER(CuDNNConvolutionLayer);

}  // namespace cortado
#endif  // CORTADO_USE_CUDA
