#pragma once
// Layers whose passes the Net may run as one (net_fusion.hpp decides).
//
// A fused chain is a head and the tails that follow it in place on its top:
//   BatchNorm (scale_bias)            + ReLU
//   BatchNorm + Scale (channel scale) + ReLU       (BVLC-style ResNet files)
//   Eltwise SUM                       + ReLU       (the residual add)
// and one tail that is not in place, the residual add right after a
// BatchNorm chain (ResNet's branch2c):
//   BatchNorm [+ Scale] + Eltwise SUM (its top and one other blob) + ReLU
// The head computes the whole chain in one pass over memory, forward and
// backward; each tail stays in the net (its name, its blobs, its parameters,
// its line in `trainer time`) but its Forward and Backward do nothing while
// fused_into() names the head. The result is the unfused chain's: every value
// the unfused layers round to their storage type is rounded at the same point
// (a fused ReLU sees the Ftype-rounded value, its mask reads the output as
// Btype as ReLU's backward does), so CPU results are bit-identical for every
// type pair; GPU kernels compute in float (double for double) and may differ
// from the unfused kernels by a few ulps where nvcc contracts a multiply-add.
//
// Roles (what a tail computes, as the head sees it):
//   kReLU          y = max(0, x), negative_slope 0 (a leaky ReLU is not fused).
//   kChannelAffine y = x * s[c] (+ b[c]): Scale with one bottom, axis 1 and a
//                  (C) scale (blobs()[0] the scale, blobs()[1] the bias if
//                  bias_term). The head reads and accumulates into those blobs
//                  of the tail, and honours its param_propagate_down.
//   kResidualAdd   out = x + r: Eltwise SUM of two bottoms with coefficients
//                  1, one of them the chain's blob x, the other a blob r
//                  computed before the head; out is a blob of its own (Eltwise
//                  is never in place). The Net fuses it only as the layer
//                  right after the chain so far (nothing runs between them,
//                  in either pass), and hands the head r and out
//                  (AbsorbResidual): the head writes out instead of x (x is
//                  then never written) and, in the backward, r's gradient
//                  (dr = dout, when r needs one) with its own; later tails
//                  are in place on out.
// Types: the Net fuses only layers of one (Ftype, Btype) pair.

#include <string>

namespace cortado {

class Blob;
class LayerBase;

enum class FusionRole { kNone, kReLU, kChannelAffine, kResidualAdd };

/// Mixin of the layers that can be a head or a tail of a fused chain.
class FusableLayer {
 public:
  virtual ~FusableLayer() = default;
  /// As a tail: what this layer computes when it can be folded into the pass
  /// of the layer before it (its parameters as set up); kNone where it cannot.
  virtual FusionRole fusion_role() const { return FusionRole::kNone; }
  /// As a head: takes over `tail`'s pass (of role `role`, in place on this
  /// layer's top, after the tails already taken) and returns true; returns
  /// false, changing nothing, where the chain cannot grow that way.
  virtual bool AbsorbTail(FusionRole role, LayerBase* tail) { return false; }
  /// As a head: takes over the residual add `tail` (kResidualAdd) that adds
  /// `other` to this chain's blob into `out`; other_diff: whether other's
  /// gradient is wanted. Returns false, changing nothing, where it cannot.
  virtual bool AbsorbResidual(LayerBase* tail, Blob* other, Blob* out, bool other_diff) { return false; }
  /// As a head: whether its fused pass may read and write memory shared by
  /// the chain's blobs beyond in place (the memory plans of net_memory.hpp
  /// ask, after fusion): the chain's output in the residual's memory, and its
  /// input's gradient in the output's. The layers' own kernels read each
  /// value before writing it there; a library's fused kernels (cuDNN's
  /// BatchNorm) may not.
  virtual bool fused_pass_may_alias() const { return true; }
  /// The head whose pass does this layer's work; empty when it runs its own.
  const std::string& fused_into() const { return fused_into_; }
  bool fused_away() const { return !fused_into_.empty(); }
  void set_fused_into(const std::string& head) { fused_into_ = head; }

 private:
  std::string fused_into_;
};

/// v as the unfused layer leaves it in memory: rounded to storage type T and
/// read back in the math type M (a no-op where T is M).
template <typename T, typename M>
inline M stored_as(M v) {
  return static_cast<M>(static_cast<T>(v));
}

}  // namespace cortado
