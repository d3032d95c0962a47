#pragma once
// ElementwiseLayer<Ftype, Btype, Op>: a layer y = f(x), value by value, from
// one definition of the op. It gives the CPU loop (split over the cores) and
// the GPU kernels; the layers AbsVal, BNLL, Clip, ELU, Exp, Log, Power, ReLU,
// Sigmoid, TanH and Threshold are each an op and an alias of this class.
//
// An op is a struct (tests/layers/toy_elementwise_op_test.cpp adds one from scratch):
//
//   struct SoftsignOp : ElementwiseOp {
//     static constexpr const char* kType = "Softsign";          // prototxt type
//     static constexpr ElementwiseReads kBackwardReads = ElementwiseReads::kX;
//     static constexpr bool kInPlace = false;                     // top == bottom?
//     template <typename M> CORTADO_HD M forward(M x) const { return x / (M(1) + hd::fabs(x)); }
//     template <typename M> CORTADO_HD M backward(M x, M y, M dy) const {
//       const M d = M(1) + hd::fabs(x);
//       return dy / (d * d);
//     }
//   };
//
// - forward(x) -> y and backward(x, y, dy) -> dx compute in M: math_t of the
//   storage type on the host, float or double on the device (float for the
//   16-bit types there too). The layer loads each value into M, calls the op
//   and stores the result once. The same code runs on both sides, so an op
//   calls hd:: math (util/hd_math.hpp), never std:: or CUDA's functions.
// - kBackwardReads: what the backward reads besides dy. kX: the bottom's
//   data; kY: the top's data; kXY: both; kNone: the op has no backward (a
//   Backward with propagate_down throws, force_backward does not apply). The
//   layer fetches only those blobs (as Btype) and passes M(0) for the others.
// - kInPlace: whether the top may be the bottom. An op that says false is
//   refused in place with a FieldError on "top", unless backward_ignores_x()
//   is true for its parameters (Power with power 1). ReLU and ELU read x and
//   still say true: in place they read y, which keeps x's sign.
// - Parameters are members (trivially copyable: the op goes to the device by
//   value). Setup(layer) reads and validates them, naming the field through
//   layer.field_error; it runs first in LayerSetUp. SetTypes<Ftype, Btype>()
//   runs after it, for parameters that depend on the storage types (Clip's
//   bounds as a Btype read of an Ftype value). ElementwiseOp's versions do
//   nothing.
// - fusion_role(): what the op is to the Net's fusion pass (layer_fusion.hpp):
//   ReLU with negative_slope 0 is kReLU; ElementwiseOp's says kNone. While
//   the layer is fused into another (fused_away()), its Forward and Backward
//   do nothing: the head computes it.
//
// Bottoms: 1, any shape. Tops: 1, the bottom's shape.
// Types: forward reads x and writes y as Ftype; backward reads dy (and x, y
// as the op says) as Btype and writes dx as Btype; each value is computed in
// math_t and rounded once.
// CPU: one loop per direction, in ranges of at least 2^16 values, one chunk of
// ranges per core (cpu_parallel_range); the same bits as a single loop.
// GPU: one grid-stride kernel per direction (layers/elementwise_kernels.cuh),
// compiled from the same op. GPU and CPU agree within a few ulps of the
// storage type: CUDA's math functions are within 2 ulps of the host
// library's, and nvcc may fuse a multiply and an add that the host rounds
// one at a time (an op that needs the host's rounding there writes
// hd::add_rn / hd::mul_rn, as Log and Power do).
//
// Adding an op: its header (the op, then
//   template <typename Ftype, typename Btype> using XLayer = ElementwiseLayer<Ftype, Btype, XOp>;
//   CORTADO_EXTERN_ELEMENTWISE(XOp);),
// its .cpp (Setup, then CORTADO_INSTANTIATE_ELEMENTWISE(XOp);), its .cu
// (CORTADO_INSTANTIATE_ELEMENTWISE_GPU(XOp)), and one line in
// layer_registry.cpp.

#include <cstdint>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"
#include "cortado/layers/layer_fusion.hpp"
#include "cortado/util/cpu_parallel.hpp"
#include "cortado/util/hd_math.hpp"

namespace cortado {

/// What an op's backward reads besides dy (kNone: it has no backward).
enum class ElementwiseReads { kNone, kX, kY, kXY };

/// Defaults for an op's optional members; an op derives from it and hides
/// what it needs.
struct ElementwiseOp {
  void Setup(const LayerBase&) {}
  template <typename Ftype, typename Btype>
  void SetTypes() {}
  bool backward_ignores_x() const { return false; }
  FusionRole fusion_role() const { return FusionRole::kNone; }
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[i] = op.forward(x[i]) for i < n, device pointers, on `stream`; x and y
/// may alias. Instantiated by CORTADO_INSTANTIATE_ELEMENTWISE_GPU(Op).
template <typename Op, typename T>
void elementwise_forward(int64_t n, const T* x, T* y, const Op& op, CUstream_st* stream);
/// dx[i] = op.backward(x[i], y[i], dy[i]); x (or y) may be null where the op
/// does not read it; dx may alias dy, x may alias y.
template <typename Op, typename T>
void elementwise_backward(int64_t n, const T* x, const T* y, const T* dy, T* dx, const Op& op,
                          CUstream_st* stream);
}  // namespace gpu
#endif

template <typename Ftype, typename Btype, typename Op>
class ElementwiseLayer : public Layer<Ftype, Btype>, public FusableLayer {
 public:
  CORTADO_LAYER_HEAD(Layer, Op::kType,
                     BlobRules().Bottoms(1).Tops(1).NoForcedBackward(Op::kBackwardReads == ElementwiseReads::kNone))
  FusionRole fusion_role() const override { return op_.fusion_role(); }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override { top[0]->ReshapeLike(*bottom[0]); }

  /// The op with its parameters, as Setup read them.
  const Op& op() const { return op_; }

 protected:
  static constexpr bool kReadsX = Op::kBackwardReads == ElementwiseReads::kX ||
                                  Op::kBackwardReads == ElementwiseReads::kXY;
  static constexpr bool kReadsY = Op::kBackwardReads == ElementwiseReads::kY ||
                                  Op::kBackwardReads == ElementwiseReads::kXY;
  /// Values per range of the CPU loops: small blobs run on the calling thread.
  static constexpr int64_t kGrain = int64_t{1} << 16;

  CORTADO_LAYER_PASSES

 private:
  /// Whether Backward has work: throws for an op without a backward.
  bool BackwardWanted(const std::vector<bool>& propagate_down) const;

  Op op_;
};

template <typename Ftype, typename Btype, typename Op>
void ElementwiseLayer<Ftype, Btype, Op>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  op_.Setup(*this);
  op_.template SetTypes<Ftype, Btype>();
  if (top[0] == bottom[0] && !Op::kInPlace && !op_.backward_ignores_x()) {
    this->field_error("top", Op::kType, " cannot run in place (its backward reads x); give the top a name of its own");
  }
}

template <typename Ftype, typename Btype, typename Op>
bool ElementwiseLayer<Ftype, Btype, Op>::BackwardWanted(const std::vector<bool>& propagate_down) const {
  if (propagate_down.empty() || !propagate_down[0]) return false;
  if (Op::kBackwardReads == ElementwiseReads::kNone) {
    throw Error("layer '" + this->name() + "' (" + Op::kType + "): no backward (not differentiable)");
  }
  return true;
}

// The top pointer is taken first: in place, mutable_cpu_data makes Ftype the
// current type and cpu_data then returns that same buffer. The op is copied
// into each chunk, so that the compiler sees its parameters cannot change
// while y is written.
template <typename Ftype, typename Btype, typename Op>
void ElementwiseLayer<Ftype, Btype, Op>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if (fused_away()) return;
  using M = math_t<Ftype>;
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  const Op op = op_;
  cpu_parallel_range(static_cast<int64_t>(bottom[0]->count()), kGrain, [x, y, op](int64_t lo, int64_t hi) {
    const Op f = op;
    for (int64_t i = lo; i < hi; ++i) y[i] = static_cast<Ftype>(f.template forward<M>(static_cast<M>(x[i])));
  });
}

template <typename Ftype, typename Btype, typename Op>
void ElementwiseLayer<Ftype, Btype, Op>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                      const BlobVec& bottom) {
  if (fused_away() || !BackwardWanted(propagate_down)) return;
  if constexpr (Op::kBackwardReads != ElementwiseReads::kNone) {
    using M = math_t<Btype>;
    Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
    const Btype* dy = top[0]->cpu_diff<Btype>();
    const Btype* x = kReadsX ? bottom[0]->cpu_data<Btype>() : nullptr;
    const Btype* y = kReadsY ? top[0]->cpu_data<Btype>() : nullptr;
    const Op op = op_;
    cpu_parallel_range(static_cast<int64_t>(bottom[0]->count()), kGrain, [x, y, dy, dx, op](int64_t lo, int64_t hi) {
      const Op f = op;
      for (int64_t i = lo; i < hi; ++i) {
        const M xv = kReadsX ? static_cast<M>(x[i]) : M(0);
        const M yv = kReadsY ? static_cast<M>(y[i]) : M(0);
        dx[i] = static_cast<Btype>(f.template backward<M>(xv, yv, static_cast<M>(dy[i])));
      }
    });
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype, typename Op>
void ElementwiseLayer<Ftype, Btype, Op>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (fused_away()) return;
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  gpu::elementwise_forward(static_cast<int64_t>(bottom[0]->count()), x, y, op_, this->context().stream());
}

template <typename Ftype, typename Btype, typename Op>
void ElementwiseLayer<Ftype, Btype, Op>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                      const BlobVec& bottom) {
  if (fused_away() || !BackwardWanted(propagate_down)) return;
  if constexpr (Op::kBackwardReads != ElementwiseReads::kNone) {
    Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
    const Btype* dy = top[0]->gpu_diff<Btype>();
    const Btype* x = kReadsX ? bottom[0]->gpu_data<Btype>() : nullptr;
    const Btype* y = kReadsY ? top[0]->gpu_data<Btype>() : nullptr;
    gpu::elementwise_backward(static_cast<int64_t>(bottom[0]->count()), x, y, dy, dx, op_, this->context().stream());
  }
}
#endif

}  // namespace cortado

#define CORTADO_ELEMENTWISE_PAIR_(Op, F, B) template class ::cortado::ElementwiseLayer<F, B, Op>;
#define CORTADO_ELEMENTWISE_EXTERN_PAIR_(Op, F, B) extern template class ::cortado::ElementwiseLayer<F, B, Op>;
/// In the op's .cpp: ElementwiseLayer<F, B, Op> for every pair.
#define CORTADO_INSTANTIATE_ELEMENTWISE(Op) \
  CORTADO_FOR_EACH_PAIR(CORTADO_ELEMENTWISE_PAIR_, Op) static_assert(true, "")
/// In the op's header: the pairs are instantiated in the op's .cpp only.
#define CORTADO_EXTERN_ELEMENTWISE(Op) \
  CORTADO_FOR_EACH_PAIR(CORTADO_ELEMENTWISE_EXTERN_PAIR_, Op) static_assert(true, "")
