// The solver's fused update on the device: multi-tensor kernels.
//
// Thread-to-data mapping. A launch gets a tensor list (TensorSlot array in
// device memory) whose tensors are cut into chunks of kChunk values, numbered
// one after the other (slot k owns chunks [first_chunk_k, first_chunk_k+1)).
// Block b takes chunks b, b + gridDim.x, ... (grid-stride over chunks); every
// thread finds the chunk's slot by a binary search over first_chunk (a few
// loads that all threads share through the cache), then the block's threads
// stride over the chunk's values. One launch thus covers every parameter of a
// (gradient type, solver data type) group, big tensors and small biases alike.
//
// Arithmetic, per value, is the CPU update's (Solver::ApplyUpdate and the
// rules' UpdateParam) operation for operation: dW is loaded in its storage
// type and converted to float, multiplied in double by `factor` and rounded
// to float; the coupled decay is added in float; the rule runs in float
// (double for DOUBLE data) and every stored value is rounded once, a stored
// history value being read back rounded where the CPU reads it back. Products
// go through mul() (__fmul_rn / __dmul_rn), which the compiler never contracts
// into an FMA; the CPU build has no FMA either, so the two produce the same
// bits except where a reduction's order shows (the clipping norm, LARC).
//
// Reductions accumulate in double: per thread, then per block (warp shuffles
// and a shared array), then one atomicAdd per block: into the check result
// (sum of squares; the Inf/NaN flag is a plain store of 1) and, for LARC,
// into the slot's LarcSums for each chunk. LARC's trust ratio per slot is
// then larc.hpp's larc_trust, the host's own function, one thread per slot.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "cortado/solver_gpu.hpp"
#include "cortado/util/cuda.hpp"
#include "util/device_types.cuh"

namespace cortado {
namespace gpu {

namespace {

using kernels::dev_t;
using kernels::load;
using kernels::store;
// The arithmetic type of a device storage type.
template <typename D> using acc_t = kernels::dmath_t<D>;
// v as the storage type D would give it back (what a stored value reads as).
template <typename D> __device__ __forceinline__ acc_t<D> rounded(acc_t<D> v) {
  if constexpr (std::is_same_v<D, __half>) return __half2float(__float2half_rn(v));
  if constexpr (std::is_same_v<D, __nv_bfloat16>) return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}
// Uncontracted products (never fused into an FMA with a following add).
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float root(float x) { return sqrtf(x); }
__device__ __forceinline__ double root(double x) { return sqrt(x); }
template <typename M> __device__ __forceinline__ M sign(M x) { return M((x > 0) - (x < 0)); }

// The slot that owns `chunk`: the last one whose first_chunk <= chunk.
__device__ __forceinline__ int slot_of(const TensorSlot* slots, int n, int64_t chunk) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (slots[mid].first_chunk <= chunk) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

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

// g = float(dW) * factor (in double, rounded to float), plus the coupled
// decay d * R(W) in float: the CPU's grad_[k].
template <typename G, typename D>
__device__ __forceinline__ float final_grad(const G* g, const D* w, int64_t i, double factor, bool couple, float decay,
                                            bool l1) {
  float x = static_cast<float>(mul(static_cast<double>(static_cast<float>(load(g, i))), factor));
  if (couple) {
    const float wf = static_cast<float>(load(w, i));
    x = x + mul(decay, l1 ? sign(wf) : wf);
  }
  return x;
}

// The slot's rate: the policy's rate times lr_mult, or LARC's (larc.hpp).
__device__ __forceinline__ double slot_rate(const TensorSlot& s, const UpdateHyper& h, const double* trust) {
  if (h.larc != LarcPolicy::kOff) return larc_rate(h.rate, s.lr_mult, h.larc, trust[s.id]);
  return mul(h.rate, s.lr_mult);
}

// The kernels' view of UpdateRule (SGD's FLOAT16 scheme is its own step).
enum Step { kSgd, kSgdAccumulate, kNesterov, kAdaGrad, kRMSProp, kAdaDelta, kAdam };

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

// One thread per slot: LARC's trust ratio from the slot's sums.
__global__ void larc_trust_kernel(const TensorSlot* slots, int n, UpdateHyper h, const LarcSums* sums, double* corr,
                                  double* trust) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n || !slots[k].weight) return;
  const int64_t id = slots[k].id;
  trust[id] = larc_trust(sums[id], h.larc_momentum, h.larc_eta, h.larc_turbo, &corr[id]);
}

template <typename G, typename D, int R>
__global__ void update_kernel(const TensorSlot* slots, int n, int64_t chunks, UpdateHyper h, const double* trust) {
  using M = acc_t<D>;
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const TensorSlot s = slots[slot_of(slots, n, c)];
    G* gp = static_cast<G*>(s.grad);
    D* w = static_cast<D*>(s.weight);
    G* copy = static_cast<G*>(s.copy);
    const int64_t begin = (c - s.first_chunk) * kChunk, end = min(begin + kChunk, s.count);
    if (!w) {  // frozen: the gradient is only cleared
      for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) store(gp, i, acc_t<G>(0));
      continue;
    }
    D* h0 = static_cast<D*>(s.hist[0]);
    D* h1 = static_cast<D*>(s.hist[1]);
    const bool couple = s.decay != 0 && !h.decoupled;
    const float decay = static_cast<float>(s.decay);
    const double rate_d = slot_rate(s, h, trust);
    const M rate = M(rate_d), m = M(h.momentum), delta = M(h.delta);
    // Adam: the bias-corrected step and the decoupled decay (0 for Adam).
    const M adam_step = M(mul(rate_d, h.adam_c1) / h.adam_c2);
    const M lambda = M(h.decoupled ? mul(rate_d, s.decay) : 0.0);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const M g = M(final_grad(gp, w, i, h.factor, couple, decay, h.l1));
      const M wi = M(load(w, i));
      M wn;  // the new weight
      if constexpr (R == kSgd) {
        const M hn = rounded<D>(mul(m, M(load(h0, i))) + mul(rate, g));
        store(h0, i, hn);
        wn = wi - hn;
      } else if constexpr (R == kSgdAccumulate) {
        // No rate inside the momentum: small gradients stay above FP16's underflow.
        const M hn = rounded<D>(mul(m, M(load(h0, i))) + g);
        store(h0, i, hn);
        wn = wi - mul(rate, hn);
      } else if constexpr (R == kNesterov) {
        const M h_old = M(load(h0, i));
        const M h_new = mul(m, h_old) + mul(rate, g);
        store(h0, i, h_new);
        wn = wi - (mul(M(1) + m, h_new) - mul(m, h_old));
      } else if constexpr (R == kAdaGrad) {
        const M sum = M(load(h0, i)) + mul(g, g);
        store(h0, i, sum);
        wn = wi - mul(rate, g) / (root(sum) + delta);
      } else if constexpr (R == kRMSProp) {
        const M rho = M(h.rms_decay);
        const M mean_sq = mul(rho, M(load(h0, i))) + mul(mul(M(1) - rho, g), g);
        store(h0, i, mean_sq);
        wn = wi - mul(rate, g) / (root(mean_sq) + delta);
      } else if constexpr (R == kAdaDelta) {
        const M g2 = mul(m, M(load(h0, i))) + mul(mul(M(1) - m, g), g);
        const M d2_old = M(load(h1, i));
        const M d = mul(g, root((d2_old + delta) / (g2 + delta)));
        store(h0, i, g2);
        store(h1, i, mul(m, d2_old) + mul(mul(M(1) - m, d), d));
        wn = wi - mul(rate, d);
      } else {  // kAdam (and AdamW through lambda)
        const M b1 = m, b2 = M(h.momentum2);
        const M mi = mul(b1, M(load(h0, i))) + mul(M(1) - b1, g);
        const M vi = mul(b2, M(load(h1, i))) + mul(mul(M(1) - b2, g), g);
        store(h0, i, mi);
        store(h1, i, vi);
        const M reg = h.l1 ? sign(wi) : wi;
        wn = wi - mul(adam_step, mi) / (root(vi) + delta) - mul(lambda, reg);
      }
      store(w, i, wn);
      // The working copy is the stored weight converted, as Tensor's
      // conversion kernel would give it (round to nearest even).
      if (copy) store(copy, i, static_cast<acc_t<G>>(rounded<D>(wn)));
      store(gp, i, acc_t<G>(0));
    }
  }
}

int grid_for(int64_t chunks) { return static_cast<int>(std::min<int64_t>(chunks, 65535 * 8)); }

Step step_of(const UpdateHyper& h) {
  switch (h.rule) {
    case UpdateRule::kSGD: return h.accumulate_gradients ? kSgdAccumulate : kSgd;
    case UpdateRule::kNesterov: return kNesterov;
    case UpdateRule::kAdaGrad: return kAdaGrad;
    case UpdateRule::kRMSProp: return kRMSProp;
    case UpdateRule::kAdaDelta: return kAdaDelta;
    case UpdateRule::kAdam:
    case UpdateRule::kAdamW: return kAdam;
    case UpdateRule::kNone: break;
  }
  fail("internal: no GPU update for this rule");
}

template <typename G, typename T>
void launch_update(const TensorList& l, const UpdateHyper& h, const double* trust, cudaStream_t s) {
  using Gd = dev_t<G>;
  using Dd = dev_t<T>;
  const int grid = grid_for(l.chunks());
  const TensorSlot* slots = l.device();
  switch (step_of(h)) {
#define CORTADO_UPDATE_CASE(R) \
  case R: update_kernel<Gd, Dd, R><<<grid, cuda::kThreads, 0, s>>>(slots, l.size(), l.chunks(), h, trust); break;
    CORTADO_UPDATE_CASE(kSgd)
    CORTADO_UPDATE_CASE(kSgdAccumulate)
    CORTADO_UPDATE_CASE(kNesterov)
    CORTADO_UPDATE_CASE(kAdaGrad)
    CORTADO_UPDATE_CASE(kRMSProp)
    CORTADO_UPDATE_CASE(kAdaDelta)
    CORTADO_UPDATE_CASE(kAdam)
#undef CORTADO_UPDATE_CASE
  }
  CORTADO_KERNEL_CHECK();
}

template <typename G, typename T>
void launch_larc_sums(const TensorList& l, const UpdateHyper& h, LarcSums* sums, cudaStream_t s) {
  larc_sums_kernel<dev_t<G>, dev_t<T>><<<grid_for(l.chunks()), cuda::kThreads, 0, s>>>(l.device(), l.size(),
                                                                                       l.chunks(), h, sums);
  CORTADO_KERNEL_CHECK();
}

// Calls f(G{}, T{}) for the supported (gradient type, data type) pairs.
template <typename F>
void dispatch_pair(Type grad_type, Type data_type, F&& f) {
  if (grad_type == DOUBLE && data_type == DOUBLE) return f(double{}, double{});
  if (grad_type == FLOAT && data_type == FLOAT) return f(float{}, float{});
  if (grad_type == FLOAT && data_type == FLOAT16) return f(float{}, float16{});
  if (grad_type == FLOAT16 && data_type == FLOAT) return f(float16{}, float{});
  if (grad_type == FLOAT16 && data_type == FLOAT16) return f(float16{}, float16{});
  if (grad_type == BFLOAT16 && data_type == FLOAT) return f(bfloat16{}, float{});
  fail("internal: no GPU update for ", type_name(grad_type), " gradients with ", type_name(data_type),
       " solver data");
}

}  // namespace

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
}

UpdateWorkspace::~UpdateWorkspace() {
  // Kernels of the last update may still read the lists and the norms.
  cudaStreamSynchronize(stream_);
  cudaFreeHost(check_host_);
  cuda::device_free(check_device_);
  cuda::device_free(larc_sums_);
  cuda::device_free(larc_trust_);
  cuda::device_free(larc_corr_);
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

void apply_update(Type grad_type, Type data_type, const TensorList& list, const UpdateHyper& hyper,
                  const double* trust, gpu_stream stream) {
  if (list.chunks() == 0) return;
  dispatch_pair(grad_type, data_type, [&](auto g, auto t) {
    launch_update<decltype(g), decltype(t)>(list, hyper, trust, stream);
  });
}

}  // namespace gpu
}  // namespace cortado
