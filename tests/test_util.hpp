#pragma once
// Shared helpers for the layer tests: the typed-test list of (Ftype, Btype)
// pairs, parameter parsing, deterministic fills, the finite-difference
// gradient checker, the 16-bit-against-double reference check, and the
// value and in-place checks of elementwise layers.
//
// How a layer test uses them:
//   template <typename P> class ReLULayerTest : public ::testing::Test {};
//   TYPED_TEST_SUITE(ReLULayerTest, test::AllPairs, test::PairNames);
//   TYPED_TEST(ReLULayerTest, Gradient) {
//     auto fill = [](int, Blob* b) { test::FillUniform(b, -1, 1, 3); };
//     test::CheckLayer<TypeParam>("type: 'ReLU'", {{2, 3, 4}}, fill,
//                                 test::GradientSettings().eltwise().kink(0, 2e-2), {1, 1});
//   }
// CheckLayer runs finite differences for (double, double) and (float, float)
// and, for every pair with float16 or bfloat16, the same inputs against a
// (double, double) reference (CheckAgainstDouble) with the stated tolerance,
// counted in the epsilon of the pair's coarser type.

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cortado/blob.hpp"
#include "cortado/config.hpp"
#include "cortado/context.hpp"
#include "cortado/layer.hpp"
#include "cortado/layer_registry.hpp"
#include "cortado/types.hpp"
#include "cortado/util/rng.hpp"
#include "test_scopes.hpp"

#ifdef CORTADO_USE_CUDA
#include "cortado/util/cuda.hpp"
#endif

namespace cortado::test {

// ---- type pairs ---------------------------------------------------------------

template <typename F, typename B>
struct TypePair {
  using Ftype = F;
  using Btype = B;
};

using AllPairs = ::testing::Types<TypePair<double, double>, TypePair<float, float>,
                                  TypePair<float, float16>, TypePair<float16, float>,
                                  TypePair<float16, float16>, TypePair<bfloat16, bfloat16>>;

/// Names typed-test instances "CPU_f64_f64", "CPU_f32_f16", ...
struct PairNames {
  template <typename P>
  static std::string GetName(int) {
    return std::string("CPU_") + type_short(type_of<typename P::Ftype>()) + "_" +
           type_short(type_of<typename P::Btype>());
  }
};

/// Whether the pair is one the finite-difference checker runs on.
template <typename P>
constexpr bool is_fd_pair() {
  return !is_half_v<typename P::Ftype> && !is_half_v<typename P::Btype>;
}

/// Whichever of the pair's two types is less precise: the unit for values
/// that pass through both (a backward reads forward outputs).
template <typename P>
using Coarser = std::conditional_t<(type_epsilon<typename P::Ftype>() >= type_epsilon<typename P::Btype>()),
                                   typename P::Ftype, typename P::Btype>;

/// Whether either type of the pair is a 16-bit storage type.
template <typename P>
constexpr bool is_half_pair() {
  return !is_fd_pair<P>();
}

// ---- parameters ---------------------------------------------------------------

/// Parses a LayerParameter from prototxt text and sets the pair's types.
/// A parse error fails the test (and returns what was parsed).
template <typename P>
LayerParameter MakeParam(const std::string& prototxt_text) {
  LayerParameter p;
  if (!google::protobuf::TextFormat::ParseFromString(prototxt_text, &p)) {
    ADD_FAILURE() << "cannot parse LayerParameter: " << prototxt_text;
  }
  if (!p.has_name()) p.set_name("layer");
  p.set_forward_type(type_of<typename P::Ftype>());
  p.set_backward_type(type_of<typename P::Btype>());
  return p;
}

/// Creates the layer through the factory (which throws for an unknown type).
inline std::unique_ptr<LayerBase> NewLayer(const LayerParameter& p) {
  std::unique_ptr<LayerBase> layer = CreateLayer(p);
  CORTADO_CHECK(layer != nullptr);
  return layer;
}
/// NewLayer(MakeParam<P>(prototxt_text)).
template <typename P>
std::unique_ptr<LayerBase> NewLayer(const std::string& prototxt_text) {
  return NewLayer(MakeParam<P>(prototxt_text));
}

// ---- reading and writing blobs in double -----------------------------------------

/// Blob values (data or diff) as doubles, whatever the tensor's current type.
inline std::vector<double> GetData(const Blob& b) {
  const double* p = b.cpu_data<double>();
  return std::vector<double>(p, p + b.count());
}
inline std::vector<double> GetDiff(const Blob& b) {
  const double* p = b.cpu_diff<double>();
  return std::vector<double>(p, p + b.count());
}

/// Writes values into the tensor in type t (rounding to nearest).
inline void SetTensor(Tensor* t, Type type, const std::vector<double>& v) {
  CORTADO_CHECK_EQ(v.size(), t->count());
  dispatch_type(type, [&](auto tag) {
    using T = decltype(tag);
    T* p = t->mutable_data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(v[i]);
  });
}
/// Writes data in the blob's own data type (the type the blob was created with).
inline void SetData(Blob* b, const std::vector<double>& v) { SetTensor(&b->data(), b->data_type(), v); }
inline void SetDiff(Blob* b, const std::vector<double>& v, Type type) { SetTensor(&b->diff(), type, v); }

/// The double nearest to v after rounding through T.
template <typename T>
double RoundTo(double v) {
  return static_cast<double>(static_cast<math_t<T>>(static_cast<T>(v)));
}
inline double RoundTo(Type t, double v) {
  return dispatch_type(t, [&](auto tag) { return RoundTo<decltype(tag)>(v); });
}

/// Expects |got - want| <= ulps * epsilon(T) * max(1, |want|) for every
/// element: for hand-computed values stored in T.
template <typename T>
void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double ulps,
                const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = ulps * type_epsilon<T>() * std::max(1.0, std::fabs(want[i]));
    EXPECT_LE(std::fabs(got[i] - want[i]), tol) << what << " index " << i << ": got " << got[i] << " want " << want[i];
  }
}

// ---- fills --------------------------------------------------------------------

/// Uniform values in [lo, hi], drawn in double from a generator of its own
/// (the process RNG is untouched), stored in the blob's data type.
inline void FillUniform(Blob* b, double lo, double hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(b->count());
  for (double& x : v) x = dist(gen);
  SetData(b, v);
}

inline void FillGaussian(Blob* b, double mean, double std, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(mean, std);
  std::vector<double> v(b->count());
  for (double& x : v) x = dist(gen);
  SetData(b, v);
}

/// Integer labels uniform in [0, num_classes).
inline void FillLabels(Blob* b, int num_classes, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(0, num_classes - 1);
  std::vector<double> v(b->count());
  for (double& x : v) x = dist(gen);
  SetData(b, v);
}

inline std::vector<double> RandomVector(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

/// Owns a list of blobs and hands out the raw BlobVec the layer API takes.
struct Blobs {
  std::vector<std::unique_ptr<Blob>> owned;
  BlobVec vec;
  Blob* add(const std::vector<int>& shape, Type t) {
    owned.push_back(std::make_unique<Blob>(shape, t));
    vec.push_back(owned.back().get());
    return vec.back();
  }
  /// A blob of that shape and type holding `values` (rounded to the type).
  Blob* add(const std::vector<int>& shape, Type t, const std::vector<double>& values) {
    Blob* b = add(shape, t);
    SetData(b, values);
    return b;
  }
  Blob* add(Type t) {
    owned.push_back(std::make_unique<Blob>(t));
    vec.push_back(owned.back().get());
    return vec.back();
  }
  Blob* operator[](size_t i) const { return vec[i]; }
  size_t size() const { return vec.size(); }
};

/// Expects SetUp of the layer of prototxt_text (one bottom of 2 values, one
/// top) to throw a FieldError naming `field`.
template <typename P>
void ExpectSetUpFieldError(const std::string& prototxt_text, const std::string& field) {
  auto layer = NewLayer<P>(prototxt_text);
  Blobs bottom, top;
  bottom.add({2}, type_of<typename P::Ftype>());
  top.add(type_of<typename P::Ftype>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "accepted: " << prototxt_text;
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), field) << e.what();
  }
}

// ---- finite-difference gradient checker ------------------------------------------

/// Finite-difference checker, on layers of (double, double) or (float, float).
/// Objective: L = sum_k w_k * top_k over all tops with fixed random w in
/// [-1, 1]: one backward gives the analytic gradient of every bottom and
/// parameter element, two forwards per element give the central difference.
/// The process RNG is reseeded before every forward so that stochastic layers
/// draw the same numbers each time. Calls layer.SetUp first (as Caffe does);
/// parameters already present are kept by the layer.
class GradientChecker {
 public:
  GradientChecker& step(double s) { step_ = s; return *this; }
  GradientChecker& threshold(double t) { threshold_ = t; return *this; }
  GradientChecker& kink(double at, double range) { kink_ = at; kink_range_ = range; return *this; }
  GradientChecker& seed(uint32_t s) { seed_ = s; return *this; }

  /// Checks d/d(bottom[i]) for every bottom i (or only check_bottom if >= 0)
  /// and every parameter blob.
  void CheckGradient(LayerBase& layer, const BlobVec& bottom, const BlobVec& top, int check_bottom = -1) {
    Run(layer, bottom, top, check_bottom, false);
  }
  /// For layers whose top k depends elementwise on bottom k only: all
  /// elements of a bottom are perturbed at once (two forwards per bottom).
  /// Parameters, if any, are still checked element by element.
  void CheckEltwise(LayerBase& layer, const BlobVec& bottom, const BlobVec& top) {
    Run(layer, bottom, top, -1, true);
  }

 private:
  void Run(LayerBase& layer, const BlobVec& bottom, const BlobVec& top, int check_bottom, bool eltwise) {
    const Type f = layer.forward_type(), b = layer.backward_type();
    if (f != b || f == FLOAT16) {
      ADD_FAILURE() << "GradientChecker runs on (double, double) or (float, float) layers only";
      return;
    }
    if (f == DOUBLE) {
      RunTyped<double>(layer, bottom, top, check_bottom, eltwise);
    } else {
      RunTyped<float>(layer, bottom, top, check_bottom, eltwise);
    }
  }

  template <typename T>
  double Objective(LayerBase& layer, const BlobVec& bottom, const BlobVec& top,
                   const std::vector<std::vector<double>>& w) {
    set_random_seed(seed_);
    layer.Forward(bottom, top);
    double l = 0;
    for (size_t k = 0; k < top.size(); ++k) {
      const T* y = top[k]->cpu_data<T>();
      for (size_t j = 0; j < top[k]->count(); ++j) l += w[k][j] * static_cast<double>(y[j]);
    }
    return l;
  }

  bool Skip(double x) const { return kink_range_ >= 0 && std::fabs(x - kink_) <= kink_range_; }

  void Compare(const std::string& what, size_t j, double analytic, double numeric, int* failures) {
    const double scale = std::max({1.0, std::fabs(analytic), std::fabs(numeric)});
    if (!(std::fabs(analytic - numeric) <= threshold_ * scale)) {
      if (++*failures <= 10) {
        ADD_FAILURE() << what << " index " << j << ": analytic " << analytic << " numeric " << numeric
                      << " (threshold " << threshold_ * scale << ")";
      }
    }
  }

  template <typename T>
  void RunTyped(LayerBase& layer, const BlobVec& bottom, const BlobVec& top, int check_bottom, bool eltwise) {
    layer.SetUp(bottom, top);
    set_random_seed(seed_);
    layer.Forward(bottom, top);
    std::vector<std::vector<double>> w(top.size());
    for (size_t k = 0; k < top.size(); ++k) w[k] = RandomVector(top[k]->count(), seed_ + 101 * k + 7);

    // Analytic gradients: one backward with top diff = w.
    for (auto& p : layer.blobs()) p->diff().set_zero();
    for (size_t k = 0; k < top.size(); ++k) SetTensor(&top[k]->diff(), type_of<T>(), w[k]);
    std::vector<bool> propagate(bottom.size(), check_bottom < 0);
    if (check_bottom >= 0) propagate[check_bottom] = true;
    layer.Backward(top, propagate, bottom);

    struct Target { Blob* blob; std::string what; std::vector<double> analytic; bool is_bottom; int index; };
    std::vector<Target> targets;
    for (size_t i = 0; i < bottom.size(); ++i) {
      if (propagate[i]) targets.push_back({bottom[i], "bottom " + std::to_string(i), GetDiff(*bottom[i]), true, static_cast<int>(i)});
    }
    for (size_t i = 0; i < layer.blobs().size(); ++i) {
      Blob* p = layer.blobs()[i].get();
      targets.push_back({p, "param " + std::to_string(i), GetDiff(*p), false, static_cast<int>(i)});
    }

    int failures = 0;
    for (Target& t : targets) {
      if (eltwise && t.is_bottom) {
        CheckBottomEltwise<T>(layer, bottom, top, t.index, t.analytic, w, &failures);
        continue;
      }
      T* x = t.blob->template mutable_cpu_data<T>();
      for (size_t j = 0; j < t.blob->count(); ++j) {
        const T saved = x[j];
        if (t.is_bottom && Skip(static_cast<double>(saved))) continue;
        x[j] = static_cast<T>(static_cast<double>(saved) + step_);
        const double lp = Objective<T>(layer, bottom, top, w);
        x = t.blob->template mutable_cpu_data<T>();
        x[j] = static_cast<T>(static_cast<double>(saved) - step_);
        const double lm = Objective<T>(layer, bottom, top, w);
        x = t.blob->template mutable_cpu_data<T>();
        x[j] = saved;
        Compare(t.what, j, t.analytic[j], (lp - lm) / (2 * step_), &failures);
      }
    }
    // Leave the layer in the state of the unperturbed inputs.
    set_random_seed(seed_);
    layer.Forward(bottom, top);
  }

  template <typename T>
  void CheckBottomEltwise(LayerBase& layer, const BlobVec& bottom, const BlobVec& top, int i,
                          const std::vector<double>& analytic, const std::vector<std::vector<double>>& w,
                          int* failures) {
    if (i >= static_cast<int>(top.size()) || top[i]->count() != bottom[i]->count()) {
      ADD_FAILURE() << "CheckEltwise: top " << i << " does not match bottom " << i;
      return;
    }
    const std::vector<double> saved = GetData(*bottom[i]);
    std::vector<double> shifted(saved.size());
    std::vector<double> yp, ym;
    for (int sign : {1, -1}) {
      for (size_t j = 0; j < saved.size(); ++j) shifted[j] = saved[j] + sign * step_;
      SetTensor(&bottom[i]->data(), type_of<T>(), shifted);
      set_random_seed(seed_);
      layer.Forward(bottom, top);
      (sign > 0 ? yp : ym) = GetData(*top[i]);
    }
    SetTensor(&bottom[i]->data(), type_of<T>(), saved);
    for (size_t j = 0; j < saved.size(); ++j) {
      if (Skip(saved[j])) continue;
      Compare("bottom " + std::to_string(i), j, analytic[j], w[i][j] * (yp[j] - ym[j]) / (2 * step_), failures);
    }
  }

  double step_ = 1e-2;
  double threshold_ = 1e-3;
  double kink_ = 0;
  double kink_range_ = -1;
  uint32_t seed_ = 1701;
};

// ---- 16-bit pairs against (double, double) ---------------------------------------

/// Relative tolerance in units of the epsilon of the pair's coarser type
/// (Coarser<P>: 2^-10 for float16 pairs, 2^-7 for bfloat16):
/// |x - ref| <= eps * epsilon * max(1, |ref|).
struct ReferenceTolerance {
  double forward_eps = 4;
  double backward_eps = 8;
};

namespace detail {
inline void CompareToReference(const std::string& what, const std::vector<double>& got,
                               const std::vector<double>& ref, double eps, double unit, int* failures) {
  if (got.size() != ref.size()) {
    ADD_FAILURE() << what << ": count " << got.size() << " vs reference " << ref.size();
    return;
  }
  for (size_t j = 0; j < got.size(); ++j) {
    const double tol = eps * unit * std::max(1.0, std::fabs(ref[j]));
    if (!(std::fabs(got[j] - ref[j]) <= tol)) {
      if (++*failures <= 10) {
        ADD_FAILURE() << what << " index " << j << ": got " << got[j] << " reference " << ref[j]
                      << " (tolerance " << tol << ")";
      }
    }
  }
}
}  // namespace detail

/// Runs the layer described by param_text (without forward_type/backward_type)
/// in (double, double) and in pair P on the same inputs and compares tops,
/// bottom diffs (where propagate_down) and parameter diffs.
/// fill(i, blob) fills bottom i of the double run; those values are rounded
/// to P's Ftype and the rounded values feed both runs. The double layer's
/// parameters are rounded to the pair's coarser type and copied into P's layer.
/// num_top: how many tops to give the layer; -1 means ExactNumTopBlobs(), else
/// max(1, MinTopBlobs()) (pass it for Split or an optional second top).
template <typename P>
void CheckAgainstDouble(const std::string& param_text, const std::vector<std::vector<int>>& shapes,
                        const std::function<void(int, Blob*)>& fill, ReferenceTolerance tol,
                        std::vector<bool> propagate_down = {}, int num_top = -1) {
  using F = typename P::Ftype;
  using B = typename P::Btype;
  const uint32_t kSeed = 1701;
  if (propagate_down.empty()) propagate_down.assign(shapes.size(), true);
  ASSERT_EQ(propagate_down.size(), shapes.size());

  auto ref_layer = NewLayer(MakeParam<TypePair<double, double>>(param_text));
  auto layer = NewLayer(MakeParam<P>(param_text));

  Blobs ref_bottom, ref_top, bottom, top;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Blob* rb = ref_bottom.add(shapes[i], DOUBLE);
    fill(static_cast<int>(i), rb);
    std::vector<double> v = GetData(*rb);
    for (double& x : v) x = RoundTo<F>(x);
    SetData(rb, v);
    SetData(bottom.add(shapes[i], type_of<F>()), v);
  }
  if (num_top < 0) {
    num_top = layer->ExactNumTopBlobs() >= 0 ? layer->ExactNumTopBlobs() : std::max(1, layer->MinTopBlobs());
  }
  for (int k = 0; k < num_top; ++k) {
    ref_top.add(DOUBLE);
    top.add(type_of<F>());
  }

  const double unit = type_epsilon<Coarser<P>>();
  ref_layer->SetUp(ref_bottom.vec, ref_top.vec);
  layer->SetUp(bottom.vec, top.vec);
  auto& ref_params = ref_layer->blobs();
  auto& params = layer->blobs();
  ASSERT_EQ(ref_params.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_EQ(ref_params[i]->shape(), params[i]->shape()) << "param " << i;
    std::vector<double> v = GetData(*ref_params[i]);
    for (double& x : v) x = RoundTo<Coarser<P>>(x);
    SetData(ref_params[i].get(), v);
    SetData(params[i].get(), v);
  }

  set_random_seed(kSeed);
  ref_layer->Forward(ref_bottom.vec, ref_top.vec);
  set_random_seed(kSeed);
  layer->Forward(bottom.vec, top.vec);

  int failures = 0;
  for (int k = 0; k < num_top; ++k) {
    ASSERT_EQ(top[k]->shape(), ref_top[k]->shape()) << "top " << k;
    detail::CompareToReference("top " + std::to_string(k), GetData(*top[k]), GetData(*ref_top[k]),
                               tol.forward_eps, unit, &failures);
  }

  for (int k = 0; k < num_top; ++k) {
    std::vector<double> d = RandomVector(top[k]->count(), kSeed + 31 * k);
    for (double& x : d) x = RoundTo<B>(x);
    SetDiff(ref_top[k], d, DOUBLE);
    SetDiff(top[k], d, type_of<B>());
  }
  for (auto& p : ref_params) p->diff().set_zero();
  for (auto& p : params) p->diff().set_zero();
  ref_layer->Backward(ref_top.vec, propagate_down, ref_bottom.vec);
  layer->Backward(top.vec, propagate_down, bottom.vec);
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!propagate_down[i]) continue;
    detail::CompareToReference("bottom diff " + std::to_string(i), GetDiff(*bottom[i]), GetDiff(*ref_bottom[i]),
                               tol.backward_eps, unit, &failures);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    detail::CompareToReference("param diff " + std::to_string(i), GetDiff(*params[i]), GetDiff(*ref_params[i]),
                               tol.backward_eps, unit, &failures);
  }
}

// ---- GPU against CPU, same pair -------------------------------------------------

/// Tolerance of CheckGpuAgainstCpu, in units of the epsilon of the type the
/// compared values are stored in (float16: 2^-10, float: 2^-23, double:
/// 2^-52), relative to max(1, |cpu|):
///   tops:             forward_ulps  * eps(top's stored type; float for loss
///                     and accuracy tops)
///   bottom and param diffs: backward_ulps * eps(coarser of the diff's stored
///                     type and the pair's Ftype), because a backward reads
///                     forward values that may already differ by a unit of Ftype.
/// Elementwise layers that compute the same float expression on both sides
/// can expect 0-1; reductions whose summation order differs need more.
struct GpuTolerance {
  double forward_ulps = 4;
  double backward_ulps = 8;
};

namespace detail {
inline void CompareGpuToCpu(const std::string& what, const std::vector<double>& gpu,
                            const std::vector<double>& cpu, double unit, int* failures) {
  if (gpu.size() != cpu.size()) {
    ADD_FAILURE() << what << ": GPU count " << gpu.size() << " vs CPU " << cpu.size();
    return;
  }
  for (size_t j = 0; j < gpu.size(); ++j) {
    const double tol = unit * std::max(1.0, std::fabs(cpu[j]));
    const bool both_nan = std::isnan(gpu[j]) && std::isnan(cpu[j]);
    if (!both_nan && !(std::fabs(gpu[j] - cpu[j]) <= tol) && !(gpu[j] == cpu[j])) {
      if (++*failures <= 10) {
        ADD_FAILURE() << what << " index " << j << ": GPU " << gpu[j] << " CPU " << cpu[j]
                      << " (tolerance " << tol << ")";
      }
    }
  }
}
inline double TypeEps(Type t) {
  return dispatch_type(t, [](auto tag) { return type_epsilon<decltype(tag)>(); });
}
}  // namespace detail

/// Whether this build has CUDA and the process a usable device (a GPU test
/// skips without one).
inline bool HaveDevice() {
#ifdef CORTADO_USE_CUDA
  return cuda::available();
#else
  return false;
#endif
}

/// For a GPU test: a context on device 0, made the thread's current one;
/// the thread goes back to the CPU context (and its stream) when this goes
/// out of scope, before the context itself is released.
struct ActiveGpuContext {
  std::shared_ptr<Context> ctx = Context::Create(0);
  ActiveGpuContext() { ctx->Activate(); }
  ~ActiveGpuContext() { Context::Cpu()->Activate(); }
  ActiveGpuContext(const ActiveGpuContext&) = delete;
  ActiveGpuContext& operator=(const ActiveGpuContext&) = delete;
};

/// Runs the layer described by param_text (without forward_type /
/// backward_type) in pair P twice, once on the CPU context and once on CUDA
/// device 0 (Context::Create(0)), and compares the GPU run with the CPU run:
/// tops, bottom diffs (where propagate_down) and parameter diffs, within
/// `tol` (see GpuTolerance). Same arguments as CheckAgainstDouble.
/// - fill(i, blob) fills bottom i of the CPU run in Ftype; the GPU run gets
///   the same values. The CPU layer's parameters (after SetUp) are copied
///   bit for bit into the GPU layer.
/// - The process RNG is reseeded identically before each forward, so a
///   stochastic layer that draws on the host (Dropout) draws the same numbers.
/// - Top diffs are the same random values (rounded to Btype) on both sides;
///   parameter diffs start at zero.
/// - Results are read back with cpu_data / cpu_diff after the GPU context's
///   stream has been synchronized.
/// Skips (GTEST_SKIP) in a build without CUDA or where no device is usable.
/// Call it as the only statement of a test (the skip returns from the helper).
template <typename P>
void CheckGpuAgainstCpu(const std::string& param_text, const std::vector<std::vector<int>>& shapes,
                        const std::function<void(int, Blob*)>& fill, GpuTolerance tol = {},
                        std::vector<bool> propagate_down = {}, int num_top = -1, int num_forward = 1) {
#ifndef CORTADO_USE_CUDA
  (void)param_text; (void)shapes; (void)fill; (void)tol; (void)propagate_down; (void)num_top; (void)num_forward;
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  using F = typename P::Ftype;
  using B = typename P::Btype;
  const uint32_t kSeed = 1701;
  if (propagate_down.empty()) propagate_down.assign(shapes.size(), true);
  ASSERT_EQ(propagate_down.size(), shapes.size());

  std::shared_ptr<Context> cpu_ctx = Context::Cpu();
  std::shared_ptr<Context> gpu_ctx = Context::Create(0);
  // Whatever happens below, the thread must not keep the GPU context's
  // stream once the context is gone.
  test::RestoreStream restore;

  auto cpu_layer = NewLayer(MakeParam<P>(param_text));
  // The GPU layer comes from the factory with its context, as the Net makes
  // it, so that a type with a GPU engine (cuDNN Convolution) gets that engine.
  std::unique_ptr<LayerBase> gpu_layer = CreateLayer(MakeParam<P>(param_text), gpu_ctx.get());
  ASSERT_TRUE(gpu_layer != nullptr);
  cpu_layer->set_context(cpu_ctx);
  gpu_layer->set_context(gpu_ctx);

  Blobs cpu_bottom, cpu_top, gpu_bottom, gpu_top;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Blob* cb = cpu_bottom.add(shapes[i], type_of<F>());
    fill(static_cast<int>(i), cb);
    Blob* gb = gpu_bottom.add(shapes[i], cb->data_type());
    SetData(gb, GetData(*cb));
  }
  if (num_top < 0) {
    num_top = cpu_layer->ExactNumTopBlobs() >= 0 ? cpu_layer->ExactNumTopBlobs()
                                                 : std::max(1, cpu_layer->MinTopBlobs());
  }
  for (int k = 0; k < num_top; ++k) {
    cpu_top.add(type_of<F>());
    gpu_top.add(type_of<F>());
  }

  // Reseeded before each SetUp too: a layer may draw at set-up (fillers, a
  // data layer's seed).
  cpu_ctx->Activate();
  set_random_seed(kSeed);
  cpu_layer->SetUp(cpu_bottom.vec, cpu_top.vec);
  gpu_ctx->Activate();
  set_random_seed(kSeed);
  gpu_layer->SetUp(gpu_bottom.vec, gpu_top.vec);
  auto& cpu_params = cpu_layer->blobs();
  auto& gpu_params = gpu_layer->blobs();
  ASSERT_EQ(cpu_params.size(), gpu_params.size());
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    ASSERT_EQ(cpu_params[i]->shape(), gpu_params[i]->shape()) << "param " << i;
    ASSERT_EQ(cpu_params[i]->data_type(), gpu_params[i]->data_type()) << "param " << i;
    SetData(gpu_params[i].get(), GetData(*cpu_params[i]));  // exact: same type on both sides
  }

  int failures = 0;
  for (int f = 0; f < num_forward; ++f) {
    cpu_ctx->Activate();
    set_random_seed(kSeed + f);
    cpu_layer->Forward(cpu_bottom.vec, cpu_top.vec);
    gpu_ctx->Activate();
    set_random_seed(kSeed + f);
    gpu_layer->Forward(gpu_bottom.vec, gpu_top.vec);
    gpu_ctx->Synchronize();
    const std::string when = num_forward > 1 ? " (forward " + std::to_string(f) + ")" : "";
    for (int k = 0; k < num_top; ++k) {
      ASSERT_EQ(gpu_top[k]->shape(), cpu_top[k]->shape()) << "top " << k << when;
      const double unit = tol.forward_ulps * std::max(detail::TypeEps(cpu_top[k]->data_type()),
                                                      detail::TypeEps(gpu_top[k]->data_type()));
      detail::CompareGpuToCpu("top " + std::to_string(k) + when, GetData(*gpu_top[k]), GetData(*cpu_top[k]),
                              unit, &failures);
    }
  }

  for (int k = 0; k < num_top; ++k) {
    std::vector<double> d = RandomVector(cpu_top[k]->count(), kSeed + 31 * k);
    for (double& x : d) x = RoundTo<B>(x);
    SetDiff(cpu_top[k], d, type_of<B>());
    SetDiff(gpu_top[k], d, type_of<B>());
  }
  for (auto& p : cpu_params) p->diff().set_zero();
  for (auto& p : gpu_params) p->diff().set_zero();
  cpu_ctx->Activate();
  cpu_layer->Backward(cpu_top.vec, propagate_down, cpu_bottom.vec);
  gpu_ctx->Activate();
  gpu_layer->Backward(gpu_top.vec, propagate_down, gpu_bottom.vec);
  gpu_ctx->Synchronize();

  const double fwd_eps = type_epsilon<F>();
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!propagate_down[i]) continue;
    const double unit = tol.backward_ulps * std::max(fwd_eps, detail::TypeEps(cpu_bottom[i]->diff().type()));
    detail::CompareGpuToCpu("bottom diff " + std::to_string(i), GetDiff(*gpu_bottom[i]), GetDiff(*cpu_bottom[i]),
                            unit, &failures);
  }
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    const double unit = tol.backward_ulps * std::max(fwd_eps, detail::TypeEps(cpu_params[i]->diff().type()));
    detail::CompareGpuToCpu("param diff " + std::to_string(i), GetDiff(*gpu_params[i]), GetDiff(*cpu_params[i]),
                            unit, &failures);
  }
#endif
}

// ---- one call per layer test ---------------------------------------------------

/// Finite-difference settings for CheckLayer, builder style.
struct GradientSettings {
  double step_ = 1e-2, threshold_ = 1e-3, kink_at_ = 0, kink_range_ = -1;
  bool eltwise_ = false;
  uint32_t seed_ = 1701;
  GradientSettings& step(double s) { step_ = s; return *this; }
  GradientSettings& threshold(double t) { threshold_ = t; return *this; }
  GradientSettings& kink(double at, double range) { kink_at_ = at; kink_range_ = range; return *this; }
  GradientSettings& eltwise(bool e = true) { eltwise_ = e; return *this; }
  GradientSettings& seed(uint32_t s) { seed_ = s; return *this; }
};

/// For (double, double) and (float, float): the GradientChecker (eltwise or
/// full) on bottoms filled by fill(i, blob) in Ftype, for every bottom whose
/// propagate_down is true (default all). For 16-bit pairs: CheckAgainstDouble.
template <typename P>
void CheckLayer(const std::string& param_text, const std::vector<std::vector<int>>& shapes,
                const std::function<void(int, Blob*)>& fill, GradientSettings g, ReferenceTolerance tol,
                std::vector<bool> propagate_down = {}, int num_top = -1) {
  if constexpr (!is_fd_pair<P>()) {
    CheckAgainstDouble<P>(param_text, shapes, fill, tol, propagate_down, num_top);
  } else {
    using F = typename P::Ftype;
    if (propagate_down.empty()) propagate_down.assign(shapes.size(), true);
    ASSERT_EQ(propagate_down.size(), shapes.size());
    auto layer = NewLayer(MakeParam<P>(param_text));
    Blobs bottom, top;
    for (size_t i = 0; i < shapes.size(); ++i) fill(static_cast<int>(i), bottom.add(shapes[i], type_of<F>()));
    if (num_top < 0) {
      num_top = layer->ExactNumTopBlobs() >= 0 ? layer->ExactNumTopBlobs() : std::max(1, layer->MinTopBlobs());
    }
    for (int k = 0; k < num_top; ++k) top.add(type_of<F>());
    GradientChecker checker;
    checker.step(g.step_).threshold(g.threshold_).kink(g.kink_at_, g.kink_range_).seed(g.seed_);
    const bool all = std::find(propagate_down.begin(), propagate_down.end(), false) == propagate_down.end();
    if (all && g.eltwise_) {
      checker.CheckEltwise(*layer, bottom.vec, top.vec);
    } else if (all) {
      checker.CheckGradient(*layer, bottom.vec, top.vec);
    } else {
      for (size_t i = 0; i < shapes.size(); ++i) {
        if (propagate_down[i]) checker.CheckGradient(*layer, bottom.vec, top.vec, static_cast<int>(i));
      }
    }
  }
}

// ---- elementwise layers -------------------------------------------------------

/// For a layer that maps one bottom to one top by y = f(x) elementwise: one
/// forward on x (a blob of `shape` in Ftype) is expected to give f(x) within
/// forward_ulps of Ftype (ExpectNear); one backward with top diff dy (in
/// Btype) to give dy * df(x) within backward_ulps of the coarser of the two
/// types, since the backward may read the stored (rounded) output.
template <typename P>
void CheckEltwiseValues(const std::string& param_text, const std::vector<int>& shape,
                        const std::vector<double>& x, const std::vector<double>& dy,
                        const std::function<double(double)>& f, const std::function<double(double)>& df,
                        double forward_ulps, double backward_ulps) {
  using F = typename P::Ftype;
  using B = typename P::Btype;
  ASSERT_EQ(x.size(), dy.size());
  auto layer = NewLayer<P>(param_text);
  Blobs bottom, top;
  bottom.add(shape, type_of<F>(), x);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  std::vector<double> want(x.size()), dwant(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    want[i] = f(x[i]);
    dwant[i] = dy[i] * df(x[i]);
  }
  ExpectNear<F>(GetData(*top[0]), want, forward_ulps, "top");
  SetDiff(top[0], dy, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  ExpectNear<Coarser<P>>(GetDiff(*bottom[0]), dwant, backward_ulps, "bottom diff");
}

/// Runs two instances of the layer on the same bottom of `shape` (uniform in
/// [lo, hi], seed 11, in Ftype), one out of place (x -> y) and one in place
/// (z -> z), and expects bit-identical tops and, after a backward with the
/// same top diff (RandomVector(count, 5) in Btype), bit-identical bottom diffs.
template <typename P>
void CheckInPlaceMatchesOutOfPlace(const std::string& param_text, const std::vector<int>& shape, double lo,
                                   double hi) {
  using F = typename P::Ftype;
  using B = typename P::Btype;
  auto a = NewLayer<P>(param_text);
  auto b = NewLayer<P>(param_text);
  Blobs x, y, z;
  FillUniform(x.add(shape, type_of<F>()), lo, hi, 11);
  FillUniform(z.add(shape, type_of<F>()), lo, hi, 11);  // same values, computed in place
  y.add(type_of<F>());
  a->SetUp(x.vec, y.vec);
  b->SetUp(z.vec, z.vec);
  a->Forward(x.vec, y.vec);
  b->Forward(z.vec, z.vec);
  EXPECT_EQ(GetData(*y[0]), GetData(*z[0]));
  const std::vector<double> d = RandomVector(x[0]->count(), 5);
  SetDiff(y[0], d, type_of<B>());
  SetDiff(z[0], d, type_of<B>());
  a->Backward(y.vec, {true}, x.vec);
  b->Backward(z.vec, {true}, z.vec);
  EXPECT_EQ(GetDiff(*x[0]), GetDiff(*z[0]));
}

}  // namespace cortado::test
