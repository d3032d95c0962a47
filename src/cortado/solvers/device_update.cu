// The solver's fused update on the device: the gradient check, LARC's sums
// and ratios, the tensor lists and the workspace, and the rules' update
// kernels instantiated for the built-in rules (the kernel itself, the
// thread-to-data mapping of every multi-tensor kernel and the arithmetic
// contract: solvers/update_kernel.cuh).
//
// Reductions accumulate in double: per thread, then per block (warp shuffles
// and a shared array), then one atomicAdd per block: into the check result
// (sum of squares; the Inf/NaN flag is a plain store of 1) and, for LARC,
// into the slot's LarcSums for each chunk. LARC's trust ratio per slot is
// then larc.hpp's larc_trust, the host's own function, one thread per slot.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "cortado/solvers/device_update.hpp"
#include "cortado/solvers/builtin_rules.hpp"
#include "cortado/util/cuda.hpp"
#include "update_kernel.cuh"
#include "../util/device_types.cuh"

namespace cortado {
namespace gpu {

namespace {

using kernels::dev_t;
using kernels::load;
using kernels::store;
using update_detail::dispatch_pair;
using update_detail::final_grad;
using update_detail::grid_for;
using update_detail::slot_of;

// The block's sum of v, valid in thread 0. Every thread of the block calls it.
__device__ double block_sum(double v) {
  __shared__ double part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  __syncthreads();  // an earlier call may still read part
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = 0;
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? part[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  return v;
}

template <typename G>
__global__ void check_kernel(const TensorSlot* slots, int n, int64_t chunks, bool want_sumsq, GradientCheck* r) {
  double ss = 0;
  bool bad = false;
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const TensorSlot s = slots[slot_of(slots, n, c)];
    const G* g = static_cast<const G*>(s.grad);
    const int64_t begin = (c - s.first_chunk) * kChunk, end = min(begin + kChunk, s.count);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const double v = load(g, i);
      bad = bad || !isfinite(v);
      ss += v * v;
    }
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) r->nonfinite = 1;
  if (want_sumsq) {
    ss = block_sum(ss);
    if (threadIdx.x == 0) atomicAdd(&r->sumsq, ss);
  }
}

// LARC's sums of one slot's chunk: g as final_grad gives it without the
// decay, H the first history slot before the update.
template <typename G, typename D>
__global__ void larc_sums_kernel(const TensorSlot* slots, int n, int64_t chunks, UpdateHyper h, LarcSums* sums) {
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const TensorSlot s = slots[slot_of(slots, n, c)];
    if (!s.weight) continue;  // frozen (the same for the whole block)
    const G* g = static_cast<const G*>(s.grad);
    const D* w = static_cast<const D*>(s.weight);
    const D* h0 = static_cast<const D*>(s.hist[0]);
    const int64_t begin = (c - s.first_chunk) * kChunk, end = min(begin + kChunk, s.count);
    double ws = 0, gs = 0, ghs = 0, hs = 0;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const double wv = load(w, i), gv = final_grad(g, w, i, h.factor, false, 0.f, h.l1);
      ws += wv * wv;
      gs += gv * gv;
      if (h.larc_turbo) {
        const double hv = load(h0, i);
        ghs += gv * hv;
        hs += hv * hv;
      }
    }
    ws = block_sum(ws);
    gs = block_sum(gs);
    if (h.larc_turbo) {
      ghs = block_sum(ghs);
      hs = block_sum(hs);
    }
    if (threadIdx.x == 0) {
      LarcSums* r = &sums[s.id];
      atomicAdd(&r->w, ws);
      atomicAdd(&r->g, gs);
      if (h.larc_turbo) {
        atomicAdd(&r->gh, ghs);
        atomicAdd(&r->h, hs);
      }
    }
  }
}

// Deferred steps. The records are indexed by a device counter, so that a
// captured iteration (a CUDA graph) writes the next record on each replay:
// begin zeroes record *count, add_loss adds to it, decide fills its update
// half and advances *count.
__device__ __forceinline__ StepRecord* current_record(StepRecord* records, const int* count) {
  const int k = *count;
  return &records[k < kMaxDeferredSteps ? k : kMaxDeferredSteps - 1];
}

__global__ void begin_record_kernel(StepRecord* records, const int* count) {
  *current_record(records, count) = StepRecord();
}

__global__ void decide_step_kernel(StepRule rule, const GradientCheck* check, StepState* state, StepRecord* records,
                                   int* count, StepControl* control) {
  *control = DecideStep(rule, check->nonfinite != 0, check->sumsq, state, current_record(records, count));
  ++*count;
}

// One block: record.loss += weight * sum(float(top)), the sum in double.
template <typename T>
__global__ void add_loss_kernel(const T* top, int64_t n, double weight, StepRecord* records, const int* count) {
  double sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += static_cast<double>(static_cast<float>(load(top, i)));
  sum = block_sum(sum);
  if (threadIdx.x == 0) current_record(records, count)->loss += __dmul_rn(weight, sum);  // no multiply-add: as the host
}

template <typename T>
__global__ void seed_loss_diff_kernel(T* diff, int64_t n, double weight, const StepState* state) {
  const float v = static_cast<float>(weight * static_cast<double>(state->scale));
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store(diff, i, static_cast<kernels::dmath_t<T>>(v));
}

// One thread per slot: LARC's trust ratio from the slot's sums.
__global__ void larc_trust_kernel(const TensorSlot* slots, int n, UpdateHyper h, const LarcSums* sums, double* corr,
                                  double* trust) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n || !slots[k].weight) return;
  const int64_t id = slots[k].id;
  trust[id] = larc_trust(sums[id], h.larc_momentum, h.larc_eta, h.larc_turbo, &corr[id]);
}

template <typename G, typename T>
void launch_larc_sums(const TensorList& l, const UpdateHyper& h, LarcSums* sums, cudaStream_t s) {
  larc_sums_kernel<dev_t<G>, dev_t<T>><<<grid_for(l.chunks()), cuda::kThreads, 0, s>>>(l.device(), l.size(),
                                                                                       l.chunks(), h, sums);
  CORTADO_KERNEL_CHECK();
}

template <typename... R>
UpdateRuleInfo::GpuUpdate find_update(RuleList<R...>, const std::string& type) {
  UpdateRuleInfo::GpuUpdate f = nullptr;
  ((type == R::kType ? (f = &KernelUpdate<R>) : f), ...);
  return f;
}

}  // namespace

UpdateRuleInfo::GpuUpdate builtin_update(const std::string& type) { return find_update(BuiltinRules(), type); }

bool update_supported(Type grad_type, Type data_type) {
  if (grad_type == DOUBLE || data_type == DOUBLE) return grad_type == data_type;
  if (grad_type == BFLOAT16) return data_type == FLOAT;
  return data_type != BFLOAT16;  // {FLOAT, FLOAT16}^2
}

// ---- tensor lists and the workspace -------------------------------------------------

TensorList::TensorList(int capacity) : capacity_(std::max(capacity, 1)) {
  CORTADO_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&staging_), capacity_ * sizeof(TensorSlot),
                                   cudaHostAllocDefault));
  device_ = static_cast<TensorSlot*>(cuda::device_alloc(capacity_ * sizeof(TensorSlot)));
  CORTADO_CUDA_CHECK(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming));
}

TensorList::~TensorList() {
  if (uploaded_) cudaEventSynchronize(uploaded_);
  cudaEventDestroy(uploaded_);
  cudaFreeHost(staging_);
  cuda::device_free(device_);
}

void TensorList::assign(std::vector<TensorSlot> slots, gpu_stream stream) {
  CORTADO_CHECK_LE(static_cast<int>(slots.size()), capacity_);
  int64_t chunk = 0;
  for (TensorSlot& s : slots) {
    s.first_chunk = chunk;
    chunk += (s.count + kChunk - 1) / kChunk;
  }
  chunks_ = chunk;
  const size_t bytes = slots.size() * sizeof(TensorSlot);  // TensorSlot has no padding
  if (uploaded_once_ && slots.size() == host_.size() && std::memcmp(slots.data(), host_.data(), bytes) == 0) return;
  host_ = std::move(slots);
  if (bytes == 0) return;
  // A new list inside a CUDA graph capture would be replayed from pinned
  // memory the host rewrites: refused (the capture then fails cleanly).
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) {
    cudaGetLastError();
    uploaded_once_ = false;  // upload it at the next assign
    fail("a new tensor list of the update in a CUDA graph capture");
  }
  // The previous upload may still be reading staging_ (normally long done).
  if (uploaded_once_) CORTADO_CUDA_CHECK(cudaEventSynchronize(uploaded_));
  std::memcpy(staging_, host_.data(), bytes);
  CORTADO_CUDA_CHECK(cudaMemcpyAsync(device_, staging_, bytes, cudaMemcpyHostToDevice, stream));
  CORTADO_CUDA_CHECK(cudaEventRecord(uploaded_, stream));
  uploaded_once_ = true;
}

UpdateWorkspace::UpdateWorkspace(int num_params, gpu_stream stream) : num_params_(num_params), stream_(stream) {
  for (int t = 0; t < kNumTypes; ++t) {  // by type_index
    check_[t] = std::make_unique<TensorList>(num_params);
    update_[t] = std::make_unique<TensorList>(num_params);
  }
  check_device_ = static_cast<GradientCheck*>(cuda::device_alloc(sizeof(GradientCheck)));
  CORTADO_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&check_host_), sizeof(GradientCheck),
                                   cudaHostAllocDefault));
  *check_host_ = GradientCheck();
  const size_t ids = static_cast<size_t>(std::max(num_params, 1));
  larc_sums_ = static_cast<LarcSums*>(cuda::device_alloc(ids * sizeof(LarcSums)));
  larc_trust_ = static_cast<double*>(cuda::device_alloc(ids * sizeof(double)));
  larc_corr_ = static_cast<double*>(cuda::device_alloc(ids * sizeof(double)));
  CORTADO_CUDA_CHECK(cudaMemsetAsync(larc_corr_, 0, ids * sizeof(double), stream));
  step_state_ = static_cast<StepState*>(cuda::device_alloc(sizeof(StepState)));
  step_control_ = static_cast<StepControl*>(cuda::device_alloc(sizeof(StepControl)));
  step_records_ = static_cast<StepRecord*>(cuda::device_alloc(kMaxDeferredSteps * sizeof(StepRecord)));
  step_count_ = static_cast<int*>(cuda::device_alloc(sizeof(int)));
  CORTADO_CUDA_CHECK(cudaMemsetAsync(step_count_, 0, sizeof(int), stream));
  CORTADO_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&step_count_host_), sizeof(int), cudaHostAllocDefault));
  CORTADO_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&step_state_host_), sizeof(StepState),
                                   cudaHostAllocDefault));
  CORTADO_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&step_records_host_),
                                   kMaxDeferredSteps * sizeof(StepRecord), cudaHostAllocDefault));
  CORTADO_CUDA_CHECK(cudaEventCreateWithFlags(&state_put_, cudaEventDisableTiming));
}

UpdateWorkspace::~UpdateWorkspace() {
  // Kernels of the last update may still read the lists and the norms.
  cudaStreamSynchronize(stream_);
  cudaFreeHost(check_host_);
  cuda::device_free(check_device_);
  cuda::device_free(larc_sums_);
  cuda::device_free(larc_trust_);
  cuda::device_free(larc_corr_);
  cuda::device_free(step_state_);
  cuda::device_free(step_control_);
  cuda::device_free(step_records_);
  cuda::device_free(step_count_);
  cudaFreeHost(step_count_host_);
  cudaFreeHost(step_state_host_);
  cudaFreeHost(step_records_host_);
  cudaEventDestroy(state_put_);
}

void UpdateWorkspace::put_step_state(const StepState& s, gpu_stream stream) {
  // The last put's copy may still read the pinned state (long done, normally):
  // wait for that copy alone, not for the stream.
  CORTADO_CUDA_CHECK(cudaEventSynchronize(state_put_));
  *step_state_host_ = s;
  CORTADO_CUDA_CHECK(cudaMemcpyAsync(step_state_, step_state_host_, sizeof(StepState), cudaMemcpyHostToDevice, stream));
  CORTADO_CUDA_CHECK(cudaEventRecord(state_put_, stream));
}

StepState UpdateWorkspace::fetch_step_records(int n, std::vector<StepRecord>* records, gpu_stream stream) {
  CORTADO_CHECK(n >= 0 && n <= kMaxDeferredSteps);
  if (n > 0)
    CORTADO_CUDA_CHECK(cudaMemcpyAsync(step_records_host_, step_records_, n * sizeof(StepRecord),
                                       cudaMemcpyDeviceToHost, stream));
  CORTADO_CUDA_CHECK(cudaMemcpyAsync(step_state_host_, step_state_, sizeof(StepState), cudaMemcpyDeviceToHost, stream));
  CORTADO_CUDA_CHECK(cudaMemcpyAsync(step_count_host_, step_count_, sizeof(int), cudaMemcpyDeviceToHost, stream));
  CORTADO_CUDA_CHECK(cudaMemsetAsync(step_count_, 0, sizeof(int), stream));
  CORTADO_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (*step_count_host_ != n)
    fail("internal: the device recorded ", *step_count_host_, " deferred steps, the solver ran ", n);
  records->assign(step_records_host_, step_records_host_ + n);
  return *step_state_host_;
}

void UpdateWorkspace::begin_check(gpu_stream stream) {
  CORTADO_CUDA_CHECK(cudaMemsetAsync(check_device_, 0, sizeof(GradientCheck), stream));
}

void UpdateWorkspace::fetch_check(gpu_stream stream) {
  CORTADO_CUDA_CHECK(
      cudaMemcpyAsync(check_host_, check_device_, sizeof(GradientCheck), cudaMemcpyDeviceToHost, stream));
}

LarcSums* UpdateWorkspace::clear_larc_sums(gpu_stream stream) {
  CORTADO_CUDA_CHECK(cudaMemsetAsync(larc_sums_, 0, std::max(num_params_, 1) * sizeof(LarcSums), stream));
  return larc_sums_;
}

void UpdateWorkspace::upload_larc_corr(const std::vector<double>& corr, gpu_stream stream) {
  CORTADO_CHECK_EQ(static_cast<int>(corr.size()), num_params_);
  if (corr.empty()) return;
  // From pageable memory: the copy is done when the call returns.
  CORTADO_CUDA_CHECK(cudaMemcpyAsync(larc_corr_, corr.data(), corr.size() * sizeof(double), cudaMemcpyHostToDevice,
                                     stream));
  CORTADO_CUDA_CHECK(cudaStreamSynchronize(stream));
}

std::vector<double> UpdateWorkspace::download_larc_corr(gpu_stream stream) {
  std::vector<double> corr(static_cast<size_t>(num_params_));
  if (corr.empty()) return corr;
  CORTADO_CUDA_CHECK(cudaMemcpyAsync(corr.data(), larc_corr_, corr.size() * sizeof(double), cudaMemcpyDeviceToHost,
                                     stream));
  CORTADO_CUDA_CHECK(cudaStreamSynchronize(stream));
  return corr;
}

// ---- launchers ------------------------------------------------------------------------

void check_gradients(Type grad_type, const TensorList& list, bool want_sumsq, GradientCheck* result,
                     gpu_stream stream) {
  if (list.chunks() == 0) return;
  dispatch_type(grad_type, [&](auto g) {
    using G = dev_t<decltype(g)>;
    check_kernel<G><<<grid_for(list.chunks()), cuda::kThreads, 0, stream>>>(list.device(), list.size(),
                                                                              list.chunks(), want_sumsq, result);
  });
  CORTADO_KERNEL_CHECK();
}

void begin_record(StepRecord* records, const int* count, gpu_stream stream) {
  begin_record_kernel<<<1, 1, 0, stream>>>(records, count);
  CORTADO_KERNEL_CHECK();
}

void decide_step(const StepRule& rule, const GradientCheck* check, StepState* state, StepRecord* records, int* count,
                 StepControl* control, gpu_stream stream) {
  decide_step_kernel<<<1, 1, 0, stream>>>(rule, check, state, records, count, control);
  CORTADO_KERNEL_CHECK();
}

void add_loss(Type type, const void* top, int64_t count, double weight, StepRecord* records, const int* counter,
              gpu_stream stream) {
  if (count == 0) return;
  dispatch_type(type, [&](auto z) {
    using T = dev_t<decltype(z)>;
    add_loss_kernel<T><<<1, cuda::kThreads, 0, stream>>>(static_cast<const T*>(top), count, weight, records, counter);
  });
  CORTADO_KERNEL_CHECK();
}

void seed_loss_diff(Type type, void* diff, int64_t count, double weight, const StepState* state, gpu_stream stream) {
  if (count == 0) return;
  const int blocks = static_cast<int>(std::min<int64_t>((count + cuda::kThreads - 1) / cuda::kThreads, 1024));
  dispatch_type(type, [&](auto z) {
    using T = dev_t<decltype(z)>;
    seed_loss_diff_kernel<T><<<blocks, cuda::kThreads, 0, stream>>>(static_cast<T*>(diff), count, weight, state);
  });
  CORTADO_KERNEL_CHECK();
}

void larc_sums(Type grad_type, Type data_type, const TensorList& list, const UpdateHyper& hyper, LarcSums* sums,
               gpu_stream stream) {
  if (list.chunks() == 0) return;
  dispatch_pair(grad_type, data_type, [&](auto g, auto t) {
    launch_larc_sums<decltype(g), decltype(t)>(list, hyper, sums, stream);
  });
}

void larc_trust(const TensorList& list, const UpdateHyper& hyper, const LarcSums* sums, double* corr, double* trust,
                gpu_stream stream) {
  if (list.size() == 0) return;
  const int blocks = (list.size() + cuda::kThreads - 1) / cuda::kThreads;
  larc_trust_kernel<<<blocks, cuda::kThreads, 0, stream>>>(list.device(), list.size(), hyper, sums, corr, trust);
  CORTADO_KERNEL_CHECK();
}

}  // namespace gpu
}  // namespace cortado
