#pragma once
// The fused update kernel of every rule (solvers/update_rule.hpp), and what
// it shares with device_update.cu's other multi-tensor kernels.
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
// Arithmetic, per value, is the host update's (Solver::ApplyUpdate and
// CpuRuleUpdate) operation for operation: dW is loaded in its storage type and
// converted to float, multiplied in double by `factor` and rounded to float;
// the coupled decay is added in float; then the rule's Step, the host's own
// function, runs in float (double for DOUBLE data), its history values stored
// rounded once and read back rounded (rounded<D>) where the host reads them
// back. Products go through mul() (__fmul_rn / __dmul_rn), which the compiler
// never contracts into an FMA; the host build has no FMA either, so the two
// produce the same bits.
//
// A rule's kernel comes from KernelUpdate<Rule>, a function that fits
// UpdateRuleInfo::GpuUpdate: device_update.cu instantiates it for the built-in rules;
// a rule defined in another .cu file can pass it to MakeUpdateRule.
#include <algorithm>
#include <type_traits>

#include "cortado/solvers/device_update.hpp"
#include "cortado/util/cuda.hpp"
#include "../util/device_types.cuh"

namespace cortado {
namespace gpu {
namespace update_detail {

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
// The rule's rounding hook on the device.
template <typename D> struct DeviceRound {
  __device__ __forceinline__ acc_t<D> operator()(acc_t<D> v) const { return rounded<D>(v); }
};
using rule_math::mul;
using rule_math::sign;

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

// g = float(dW) * factor (in double, rounded to float), plus the coupled
// decay d * R(W) in float: the host's grad_[k].
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

template <typename G, typename D, typename Rule>
__global__ void update_kernel(const TensorSlot* slots, int n, int64_t chunks, UpdateHyper h,
                              typename Rule::Hyper rh, const double* trust) {
  using M = acc_t<D>;
  constexpr int kSlots = Rule::kSlots;
  // A deferred step's decision: its factor, or no update at all.
  const bool skip = h.control && h.control->skip;
  if (h.control) h.factor = h.control->factor;
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const TensorSlot s = slots[slot_of(slots, n, c)];
    G* gp = static_cast<G*>(s.grad);
    D* w = static_cast<D*>(s.weight);
    G* copy = static_cast<G*>(s.copy);
    const int64_t begin = (c - s.first_chunk) * kChunk, end = min(begin + kChunk, s.count);
    if (!w || skip) {  // frozen, or a skipped deferred step: the gradient is only cleared
      for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) store(gp, i, acc_t<G>(0));
      continue;
    }
    D* hist[kMaxHistorySlots];
    for (int k = 0; k < kMaxHistorySlots; ++k) hist[k] = static_cast<D*>(s.hist[k]);
    const bool couple = s.decay != 0 && !h.decoupled;
    const float decay = static_cast<float>(s.decay);
    const auto scalars = Rule::template Prepare<M>(rh, slot_rate(s, h, trust), s.decay);
    const DeviceRound<D> round;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const M g = M(final_grad(gp, w, i, h.factor, couple, decay, h.l1));
      M hv[kSlots > 0 ? kSlots : 1];
      for (int k = 0; k < kSlots; ++k) hv[k] = M(load(hist[k], i));
      const M wn = Rule::Step(scalars, g, M(load(w, i)), hv, round);
      for (int k = 0; k < kSlots; ++k) store(hist[k], i, hv[k]);
      store(w, i, wn);
      // The working copy is the stored weight converted, as Tensor's
      // conversion kernel would give it (round to nearest even).
      if (copy) store(copy, i, static_cast<acc_t<G>>(rounded<D>(wn)));
      store(gp, i, acc_t<G>(0));
    }
  }
}

inline int grid_for(int64_t chunks) { return static_cast<int>(std::min<int64_t>(chunks, 65535 * 8)); }

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

}  // namespace update_detail

/// The fused update of `Rule` for one list (UpdateRuleInfo::GpuUpdate): the
/// rule's Hyper made on the host from c, then one launch.
template <typename Rule>
void KernelUpdate(const RuleContext& c, Type grad_type, const TensorList& list, const UpdateHyper& hyper,
                  const double* trust, CUstream_st* stream) {
  if (list.chunks() == 0) return;
  const typename Rule::Hyper rh = Rule::MakeHyper(c);
  update_detail::dispatch_pair(grad_type, c.data_type, [&](auto g, auto t) {
    using Gd = kernels::dev_t<decltype(g)>;
    using Dd = kernels::dev_t<decltype(t)>;
    update_detail::update_kernel<Gd, Dd, Rule><<<update_detail::grid_for(list.chunks()), cuda::kThreads, 0, stream>>>(
        list.device(), list.size(), list.chunks(), hyper, rh, trust);
  });
  CORTADO_KERNEL_CHECK();
}

}  // namespace gpu
}  // namespace cortado
