#pragma once
// An update rule (SGD, Adam, ...): the arithmetic of one optimizer step on one
// value, written once as a struct of static functions that both executors
// call: the host loop (CpuRuleUpdate below, run by Solver::ApplyUpdate) and the
// device's multi-tensor kernel (src/cortado/solvers/update_kernel.cuh, run by
// the Solver's GPU update). The two give the same bits: the same operations in
// the same order, products through rule_math::mul (hd::mul_rn of
// util/hd_math.hpp: on the device __fmul_rn / __dmul_rn, which nvcc never
// contracts into an FMA with a following add; on the host a plain *, which the
// host build, without FMA instructions, does not contract either), each stored
// value rounded once. CORTADO_HD (hd_math.hpp) marks the functions both sides
// compile.
//
// What the Solver hands a rule, per value, on either side:
//   g  the FP32 gradient: float(dW) * (1 / (S * iter_size * ranks) times the
//      clipping factor), computed in double and rounded to float, plus the
//      coupled weight decay in float (L2: decay * W, L1: decay * sign(W))
//      unless the rule decouples it (kDecoupledDecay);
//   w  the weight, and h[0..kSlots) the history values, in the solver data
//      type, read into the math type M (float for float16, else the type);
// and per parameter the rate (the policy's, times lr_mult, or LARC's) and the
// decay (the iteration's weight_decay * decay_mult).
//
// A rule is a struct deriving from UpdateRuleBase (which gives the defaults
// marked "default") with:
//   static constexpr const char* kType      the solver type string, e.g. "Adam"
//   static constexpr int kSlots              history blobs per parameter, at
//                                            most kMaxHistorySlots
//   static constexpr bool kDecoupledDecay    default false: g holds the decay
//   static constexpr bool kMomentumPolicy    default false: whether the rule's
//                                            momentum is momentum_policy's
//                                            (RuleContext::momentum); only for
//                                            the log line that says so
//   struct Hyper                             per-iteration scalars; trivially
//                                            copyable (a kernel argument)
//   static Hyper MakeHyper(const RuleContext&)          host only
//   template <typename M> struct Scalars                per-parameter scalars in M
//   template <typename M>
//   CORTADO_HD static Scalars<M> Prepare(const Hyper&, double rate, double decay)
//   template <typename M, typename Round>
//   CORTADO_HD static M Step(const Scalars<M>&, M g, M w, M* h, const Round& round)
//       one value: h holds the stored history values and receives the new
//       ones (the caller stores them, rounding to the solver data type);
//       returns the new weight (stored likewise). round(x) is x as the solver
//       data type gives it back once stored (M(T(x)) on the host, the device's
//       round-to-nearest-even conversion there): a rule that reads back a
//       history value it has just computed (SGD's W - H) calls it.
//   static void Validate(const RuleFields&)             default: no checks;
//       runs before the nets are built, fails through RuleFields::Fail.
//
// Registering: the built-in rules are listed in solvers/builtin_rules.hpp (one line
// each), which gives them the host loop and the fused device kernel. A rule
// defined elsewhere registers at run time with
//   RegisterUpdateRule(MakeUpdateRule<MyRule>());
// and runs the host loop, on a GPU context too (the Solver says so once); from
// a .cu file it may pass gpu::KernelUpdate<MyRule> (update_kernel.cuh) to
// MakeUpdateRule to get the fused kernel as well.

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "cortado/types.hpp"
#include "cortado/util/hd_math.hpp"

struct CUstream_st;

namespace cortado {

class SourceInfo;

namespace gpu {
class TensorList;
struct UpdateHyper;
}  // namespace gpu

/// The most history blobs a rule keeps per parameter (the device's TensorSlot
/// has room for this many).
constexpr int kMaxHistorySlots = 2;

/// Arithmetic that rounds alike on host and device (hd_math.hpp's, and what
/// it lacks).
namespace rule_math {
/// a * b, never contracted into an FMA on the device: hd::mul_rn.
CORTADO_HD inline float mul(float a, float b) { return hd::mul_rn(a, b); }
CORTADO_HD inline double mul(double a, double b) { return hd::mul_rn(a, b); }
/// Correctly rounded on both sides (the device's default -prec-sqrt=true).
CORTADO_HD inline float sqrt(float x) {
#if defined(__CUDA_ARCH__)
  return ::sqrtf(x);
#else
  return std::sqrt(x);
#endif
}
CORTADO_HD inline double sqrt(double x) {
#if defined(__CUDA_ARCH__)
  return ::sqrt(x);
#else
  return std::sqrt(x);
#endif
}
/// -1, 0 or 1 (0 for NaN).
template <typename M> CORTADO_HD inline M sign(M x) { return M((x > 0) - (x < 0)); }
}  // namespace rule_math

/// What a rule's per-iteration scalars come from (host).
struct RuleContext {
  const SolverParameter& param;
  int iter = 0;           // the iteration being taken, from 0 (Adam's t is iter + 1)
  double momentum = 0;    // the iteration's momentum, momentum_policy applied
  Type data_type = FLOAT; // the solver data type: weights and history
};

/// A rule's view of the solver prototxt when it validates its fields.
struct RuleFields {
  const SolverParameter& param;
  const SourceInfo& info;
  /// Throws cortado::Error naming the file, the field's line and the field:
  /// "solver.prototxt:4: momentum: <msg>".
  [[noreturn]] void Fail(const std::string& field, const std::string& msg) const;
};

/// The defaults a rule may hide.
struct UpdateRuleBase {
  static constexpr bool kDecoupledDecay = false;
  static constexpr bool kMomentumPolicy = false;
  static void Validate(const RuleFields&) {}
};

/// M(T(x)): x as storage type T gives it back (the host's rounding hook).
template <typename T> struct HostRound {
  math_t<T> operator()(math_t<T> x) const { return math_t<T>(T(x)); }
};

/// One parameter's host update.
struct CpuParamStep {
  int64_t count = 0;
  const float* grad = nullptr;              // g as described above
  double rate = 0, decay = 0;
  void* weight = nullptr;                   // in RuleContext::data_type
  void* hist[kMaxHistorySlots] = {};        // likewise; the rule's slots only
};

/// The host loop of a rule: every value of one parameter, in order.
template <typename Rule>
void CpuRuleUpdate(const RuleContext& c, const CpuParamStep& p) {
  const typename Rule::Hyper hyper = Rule::MakeHyper(c);
  dispatch_type(c.data_type, [&](auto z) {
    using T = decltype(z);
    using M = math_t<T>;
    const auto s = Rule::template Prepare<M>(hyper, p.rate, p.decay);
    T* w = static_cast<T*>(p.weight);
    T* h[kMaxHistorySlots] = {};
    for (int k = 0; k < Rule::kSlots; ++k) h[k] = static_cast<T*>(p.hist[k]);
    const HostRound<T> round;
    for (int64_t i = 0; i < p.count; ++i) {
      M hv[Rule::kSlots > 0 ? Rule::kSlots : 1];
      for (int k = 0; k < Rule::kSlots; ++k) hv[k] = M(h[k][i]);
      const M wn = Rule::Step(s, M(p.grad[i]), M(w[i]), hv, round);
      for (int k = 0; k < Rule::kSlots; ++k) h[k][i] = T(hv[k]);
      w[i] = T(wn);
    }
  });
}

/// A rule as the Solver sees it (MakeUpdateRule fills it).
struct UpdateRuleInfo {
  /// The fused update of one tensor list on the device: every slot's values,
  /// the working copies, the cleared gradients (device_update.hpp's contract).
  using GpuUpdate = void (*)(const RuleContext& c, Type grad_type, const gpu::TensorList& list,
                             const gpu::UpdateHyper& hyper, const double* trust, CUstream_st* stream);
  std::string type;
  int history_slots = 0;
  bool decoupled_decay = false;
  bool momentum_policy = false;
  void (*validate)(const RuleFields&) = nullptr;
  void (*update_cpu)(const RuleContext&, const CpuParamStep&) = nullptr;
  GpuUpdate update_gpu = nullptr;  // null: the host update runs, on a GPU context too
};

template <typename Rule>
UpdateRuleInfo MakeUpdateRule(UpdateRuleInfo::GpuUpdate gpu = nullptr) {
  static_assert(std::is_base_of_v<UpdateRuleBase, Rule>, "a rule derives from UpdateRuleBase");
  static_assert(Rule::kSlots >= 0 && Rule::kSlots <= kMaxHistorySlots, "a rule keeps at most kMaxHistorySlots");
  static_assert(std::is_trivially_copyable_v<typename Rule::Hyper>, "Hyper is a kernel argument");
  UpdateRuleInfo r;
  r.type = Rule::kType;
  r.history_slots = Rule::kSlots;
  r.decoupled_decay = Rule::kDecoupledDecay;
  r.momentum_policy = Rule::kMomentumPolicy;
  r.validate = &Rule::Validate;
  r.update_cpu = &CpuRuleUpdate<Rule>;
  r.update_gpu = gpu;
  return r;
}

/// A type list of rules (solvers/builtin_rules.hpp lists the built-in ones).
template <typename... R> struct RuleList {};

/// Adds a rule (thread-safe). A type that is already known is an error.
void RegisterUpdateRule(const UpdateRuleInfo& rule);
/// The rule of a solver type; false if none has that type.
bool FindUpdateRule(const std::string& type, UpdateRuleInfo* rule);
/// Every known solver type, sorted.
std::vector<std::string> UpdateRuleTypes();

}  // namespace cortado
