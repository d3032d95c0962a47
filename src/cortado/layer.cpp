#include "cortado/layer.hpp"

#include "cortado/solvers/deferred_loss.hpp"

#ifdef CORTADO_USE_CUDA
#include "cortado/util/cuda.hpp"
#endif

namespace cortado {

namespace {
// One stream per layer, the one of the Context the Net gave it. The layer's
// kernels take context().stream(); the copies and conversions its blobs make
// (SyncedMemory, Tensor) take the calling thread's current stream. For each
// set-up and pass this scope makes that current stream the layer's
// Context's, whoever called and whatever Context it activated last, and puts
// the caller's back after. So a layer's work is ordered on one stream, named
// by the Context passed to it, and the Net's Activate only picks the device.
class ContextStream {
 public:
  explicit ContextStream(const Context& ctx) {
#ifdef CORTADO_USE_CUDA
    if (!ctx.on_gpu()) return;
    caller_ = cuda::stream();
    cuda::set_stream(ctx.stream());
    active_ = true;
#endif
  }
  ~ContextStream() {
#ifdef CORTADO_USE_CUDA
    if (active_) cuda::set_stream(caller_);
#endif
  }
  ContextStream(const ContextStream&) = delete;
  ContextStream& operator=(const ContextStream&) = delete;

 private:
#ifdef CORTADO_USE_CUDA
  cudaStream_t caller_ = nullptr;
  bool active_ = false;
#endif
};
}  // namespace

namespace {
thread_local bool t_defer_loss_reads = false;
}  // namespace

DeferLossReads::DeferLossReads() : before_(t_defer_loss_reads) { t_defer_loss_reads = true; }
DeferLossReads::~DeferLossReads() { t_defer_loss_reads = before_; }
bool loss_reads_deferred() { return t_defer_loss_reads; }

LayerBase::LayerBase(const LayerParameter& param) : param_(param) {
  for (const BlobProto& b : param_.blobs()) {
    auto blob = std::make_shared<Blob>(param_.forward_type());
    blob->FromProto(b, true);
    blobs_.push_back(blob);
  }
}

void LayerBase::SetUp(const BlobVec& bottom, const BlobVec& top) {
  CheckBlobCounts(bottom, top);
  if (on_gpu() && !HasGpuPath())
    LOG(WARNING) << "layer '" << name() << "' (" << type() << ") has no GPU path: it runs on the CPU, its blobs "
                 << "moving between host and device";
  ContextStream stream(context());
  LayerSetUp(bottom, top);
  Reshape(bottom, top);
  SetLossWeights(top);
}

double LayerBase::Forward(const BlobVec& bottom, const BlobVec& top) {
  ContextStream stream(context());
  Reshape(bottom, top);
  Forward_impl(bottom, top);
  // The loss is weight * sum(top), not dot(top, diff): the diff also carries
  // the loss scale, which must not show in the reported loss.
  if (t_defer_loss_reads) return 0;
  double loss = 0;
  for (size_t i = 0; i < top.size(); ++i) {
    if (loss_.size() <= i || loss_[i] == 0) continue;
    const int64_t n = static_cast<int64_t>(top[i]->count());
    const float* d = top[i]->cpu_data<float>();
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) sum += d[k];
    loss += loss_[i] * sum;
  }
  return loss;
}

void LayerBase::Backward(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) {
  ContextStream stream(context());
  Backward_impl(top, propagate_down, bottom);
}

void LayerBase::set_loss(int top_index, double v) {
  if (static_cast<int>(loss_.size()) <= top_index) loss_.resize(top_index + 1, 0);
  loss_[top_index] = v;
}

void LayerBase::set_param_propagate_down(int i, bool v) {
  if (static_cast<int>(param_propagate_down_.size()) <= i) param_propagate_down_.resize(i + 1, false);
  param_propagate_down_[i] = v;
}

void LayerBase::CheckBlobCounts(const BlobVec& bottom, const BlobVec& top) const {
  const int nb = static_cast<int>(bottom.size()), nt = static_cast<int>(top.size());
  if (ExactNumBottomBlobs() >= 0 && nb != ExactNumBottomBlobs())
    field_error("bottom", "takes ", ExactNumBottomBlobs(), " bottom blob(s), got ", nb);
  if (MinBottomBlobs() >= 0 && nb < MinBottomBlobs())
    field_error("bottom", "takes at least ", MinBottomBlobs(), " bottom blob(s), got ", nb);
  if (MaxBottomBlobs() >= 0 && nb > MaxBottomBlobs())
    field_error("bottom", "takes at most ", MaxBottomBlobs(), " bottom blob(s), got ", nb);
  if (ExactNumTopBlobs() >= 0 && nt != ExactNumTopBlobs())
    field_error("top", "produces ", ExactNumTopBlobs(), " top blob(s), got ", nt);
  if (MinTopBlobs() >= 0 && nt < MinTopBlobs())
    field_error("top", "produces at least ", MinTopBlobs(), " top blob(s), got ", nt);
  if (MaxTopBlobs() >= 0 && nt > MaxTopBlobs())
    field_error("top", "produces at most ", MaxTopBlobs(), " top blob(s), got ", nt);
  if (EqualNumBottomTopBlobs() && nb != nt)
    field_error("top", "needs as many tops as bottoms, got ", nb, " bottom(s) and ", nt, " top(s)");
}

// The loss weight of top i is written into its diff, so that Forward's loss is
// dot(data, diff) and Backward of a loss layer starts from diff = weight.
void LayerBase::ScaleLossGradients(const BlobVec& top, float scale) {
  for (size_t i = 0; i < top.size() && i < loss_.size(); ++i) {
    if (loss_[i] == 0) continue;
    float* d = top[i]->mutable_cpu_diff<float>();
    const float v = static_cast<float>(loss_[i] * scale);
    for (size_t k = 0; k < top[i]->count(); ++k) d[k] = v;
  }
}

void LayerBase::SetLossWeights(const BlobVec& top) {
  const int n = param_.loss_weight_size();
  if (n == 0) return;
  if (n != static_cast<int>(top.size()))
    field_error("loss_weight", "has ", n, " value(s) for ", top.size(), " top(s)");
  for (int i = 0; i < n; ++i) {
    const float w = param_.loss_weight(i);
    set_loss(i, w);
    if (w == 0) continue;
    float* d = top[i]->mutable_cpu_diff<float>();
    for (size_t k = 0; k < top[i]->count(); ++k) d[k] = w;
  }
}

}  // namespace cortado
