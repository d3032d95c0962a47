// The fused GPU update (device_update.cu) against the host update (Solver::
// ApplyUpdate and the rules' UpdateParam). Each case trains the same net on
// CUDA device 0 and records, every iteration, the gradients its backward
// produced on the device (and any injected Inf); a CPU solver started from the
// same weights then replays exactly those gradients. Weights and history of
// the two must agree within a few units in the last place of the solver data
// type (the GPU kernels reproduce the host arithmetic operation for operation;
// only reductions — the clipping norm, LARC's norms — sum in another order).
// Skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/context.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/util/rng.hpp"
#include "test_scopes.hpp"
#include "test_util.hpp"
#ifdef CORTADO_USE_CUDA
#include "cortado/solvers/device_update.hpp"
#include "cortado/util/cuda.hpp"
#endif

namespace cortado {
namespace {

using test::RestoreStream;

// W1 (64, 300) spans two chunks of the multi-tensor kernels; b2 is frozen
// (lr_mult 0) and must stay untouched; lr_mult and decay_mult vary.
std::string GpuNet(Type t, const std::string& extra = "") {
  return str_cat("default_forward_type: ", type_name(t), " default_backward_type: ", type_name(t), " ", extra, R"(
  layer { name: "x" type: "DummyData" top: "x"
    dummy_data_param { shape { dim: 4 dim: 300 } data_filler { type: "uniform" min: -1 max: 1 } } }
  layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
    param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
    inner_product_param { num_output: 64 weight_filler { type: "uniform" min: -0.3 max: 0.3 }
                          bias_filler { type: "constant" value: 0.1 } } }
  layer { name: "tanh" type: "TanH" bottom: "h" top: "h" }
  layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y"
    param { lr_mult: 0.5 decay_mult: 2 } param { lr_mult: 0 }
    inner_product_param { num_output: 3 weight_filler { type: "uniform" min: -0.5 max: 0.5 }
                          bias_filler { type: "constant" value: 0.2 } } }
  layer { name: "l" type: "Flatten" bottom: "y" top: "loss" loss_weight: 1 })");
}

std::unique_ptr<Solver> MakeSolver(const std::string& solver_text, const std::string& net_text,
                                   std::shared_ptr<const Context> ctx) {
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto(solver_text, "solver.prototxt", &sp, &info);
  ParseTextProto(net_text, "net.prototxt", sp.mutable_net_param());
  return Solver::Create(sp, info, std::move(ctx));
}

// The bytes of a tensor in its current type.
struct Raw {
  Type type = FLOAT;
  std::vector<char> bytes;
};
Raw Read(const Tensor& t) {
  Raw r;
  r.type = t.type();
  const char* p = static_cast<const char*>(t.data_raw(r.type));
  r.bytes.assign(p, p + t.count() * type_size(r.type));
  return r;
}
void Write(const Raw& r, Tensor* t) {
  std::memcpy(t->mutable_data_raw(r.type), r.bytes.data(), r.bytes.size());
}

// Distance in representable values between a and b (same type, finite).
int64_t Ulps(float a, float b) {
  auto key = [](float x) {
    int32_t i;
    std::memcpy(&i, &x, 4);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  return std::llabs(key(a) - key(b));
}
// float16 and bfloat16: sign-magnitude 16-bit patterns.
template <typename H, typename = std::enable_if_t<is_half_v<H>>>
int64_t Ulps(H a, H b) {
  auto key = [](H x) {
    uint16_t u;
    std::memcpy(&u, &x, 2);
    return (u & 0x8000) ? -int64_t(u & 0x7fff) : int64_t(u);
  };
  return std::llabs(key(a) - key(b));
}

// Largest distance over a tensor pair, read in `type`; NaN/Inf must match.
int64_t MaxUlps(const Tensor& gpu, const Tensor& cpu, Type type, const std::string& what) {
  int64_t worst = 0;
  dispatch_type(type, [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_same_v<T, double>) {
      ADD_FAILURE() << "DOUBLE is not compared here";
    } else {
      const T* g = gpu.data<T>();
      const T* c = cpu.data<T>();
      for (size_t i = 0; i < cpu.count(); ++i) {
        const float gf = float(g[i]), cf = float(c[i]);
        if (!std::isfinite(gf) || !std::isfinite(cf)) {
          EXPECT_TRUE((std::isnan(gf) && std::isnan(cf)) || gf == cf)
              << what << " index " << i << ": GPU " << gf << " CPU " << cf;
          continue;
        }
        const int64_t u = Ulps(g[i], c[i]);
        if (u > worst) worst = u;
      }
    }
  });
  return worst;
}

struct Options {
  int steps = 4;
  int inject_at = -1;        // iteration whose gradient gets an Inf (param 2, value 5)
  // Allowed distance, weights and history: the kernels repeat the host's
  // arithmetic exactly, so 0 unless a reduction's order enters (clip, LARC).
  int64_t max_ulps = 0;
};

// Trains on the device, replays the device's gradients on the CPU, compares.
// Returns the GPU solver for further checks.
std::unique_ptr<Solver> CompareGpuWithCpu(const std::string& solver_text, const std::string& net_text,
                                          const Options& o) {
  auto gpu = MakeSolver(solver_text, net_text, Context::Create(0));
  auto cpu = MakeSolver(solver_text, net_text, Context::Cpu());
  const std::vector<Blob*>& gp = gpu->net()->learnable_params();
  const std::vector<Blob*>& cp = cpu->net()->learnable_params();
  EXPECT_EQ(gp.size(), cp.size());
  for (size_t i = 0; i < gp.size(); ++i) Write(Read(gp[i]->data()), &cp[i]->data());

  std::vector<std::vector<Raw>> grads;  // [iteration][param]
  gpu->set_after_backward([&](Solver& s) {
    if (s.iter() == o.inject_at) {
      Blob* p = s.net()->learnable_params()[2];
      dispatch_type(p->diff().type(), [&](auto z) {
        using T = decltype(z);
        p->mutable_cpu_diff<T>()[5] = T(std::numeric_limits<float>::infinity());
      });
      // Upload now and wait: SyncedMemory lets a later host write (the next
      // ClearParamDiffs) race a pending host-to-device copy, and without
      // skipping or clipping the update has no wait of its own.
      p->diff().gpu_data_raw(p->diff().type());
      s.net()->context().Synchronize();
    }
    std::vector<Raw> g;
    for (const Blob* p : s.net()->learnable_params()) g.push_back(Read(p->diff()));
    grads.push_back(std::move(g));
  });
  gpu->Step(o.steps);
  // The update ran on the device: the weights it wrote live there.
  for (size_t i = 0; i < gp.size(); ++i)
    if (gpu->net()->params_lr()[i] != 0) EXPECT_TRUE(gp[i]->data().head_on_gpu()) << "param " << i;
  cpu->set_after_backward([&](Solver& s) {
    const std::vector<Raw>& g = grads.at(s.iter());
    for (size_t i = 0; i < g.size(); ++i) Write(g[i], &s.net()->learnable_params()[i]->diff());
  });
  cpu->Step(o.steps);

  EXPECT_EQ(gpu->loss_scale(), cpu->loss_scale());
  EXPECT_EQ(gpu->skipped_iterations(), cpu->skipped_iterations());
  const Type dt = cpu->data_type();
  int64_t worst = 0;  // reported as the test property max_ulps
  for (size_t i = 0; i < cp.size(); ++i) {
    // A frozen parameter keeps its type; the others are current in dt.
    const Type wt = cp[i]->data().type();
    EXPECT_EQ(gp[i]->data().type(), wt) << "param " << i;
    const std::string w = str_cat("param ", i, " weights");
    const int64_t wu = MaxUlps(gp[i]->data(), cp[i]->data(), wt, w);
    EXPECT_LE(wu, o.max_ulps) << w;
    worst = std::max(worst, wu);
    const std::string rule = cpu->type();
    const int slots = rule == "Adam" || rule == "AdamW" || rule == "AdaDelta" ? 2 : 1;
    for (int k = 0; k < slots; ++k) {
      const std::string h = str_cat("param ", i, " history ", k);
      const int64_t hu = MaxUlps(gpu->history(int(i), k).data(), cpu->history(int(i), k).data(), dt, h);
      EXPECT_LE(hu, o.max_ulps) << h;
      worst = std::max(worst, hu);
    }
  }
  ::testing::Test::RecordProperty("max_ulps", std::to_string(worst));
  return gpu;
}

// For cases whose factor or rate comes from a sum (clipping, LARC).
Options Reduced() {
  Options o;
  o.max_ulps = 2;
  return o;
}

struct RuleCase {
  const char* name;
  const char* solver;
};
const RuleCase kRules[] = {
    {"SGD", "type: 'SGD' base_lr: 0.05 momentum: 0.9 weight_decay: 0.01"},
    {"Nesterov", "type: 'Nesterov' base_lr: 0.05 momentum: 0.9 weight_decay: 0.01"},
    {"AdaGrad", "type: 'AdaGrad' base_lr: 0.05 delta: 1e-6 weight_decay: 0.01"},
    {"RMSProp", "type: 'RMSProp' base_lr: 0.01 rms_decay: 0.9 delta: 1e-6 weight_decay: 0.01"},
    {"AdaDelta", "type: 'AdaDelta' base_lr: 1 momentum: 0.95 delta: 1e-5 weight_decay: 0.01"},
    {"Adam", "type: 'Adam' base_lr: 0.01 momentum: 0.9 momentum2: 0.999 weight_decay: 0.01"},
    {"AdamW", "type: 'AdamW' base_lr: 0.01 momentum: 0.9 momentum2: 0.999 weight_decay: 0.1"},
};
// (layer types, solver data type)
struct TypeCase {
  Type net;
  Type data;
};
const TypeCase kTypes[] = {{FLOAT, FLOAT}, {FLOAT16, FLOAT}, {FLOAT16, FLOAT16}, {BFLOAT16, FLOAT}};

const char* kSchedule = " lr_policy: 'step' stepsize: 2 gamma: 0.5 random_seed: 11 max_iter: 100";

class SolverGpuRules : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(SolverGpuRules, MatchesCpu) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
  RestoreStream restore;
  const RuleCase& r = kRules[std::get<0>(GetParam())];
  const TypeCase& t = kTypes[std::get<1>(GetParam())];
  const std::string solver = str_cat(r.solver, kSchedule, " solver_data_type: ", type_name(t.data));
  // A static loss scale that the device must divide out.
  CompareGpuWithCpu(solver, GpuNet(t.net, "global_grad_scale: 64"), Options());
}

INSTANTIATE_TEST_SUITE_P(All, SolverGpuRules, ::testing::Combine(::testing::Range(0, 7), ::testing::Range(0, 4)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
                           const TypeCase& t = kTypes[std::get<1>(info.param)];
                           return str_cat(kRules[std::get<0>(info.param)].name, "_net_", type_short(t.net), "_data_",
                                          type_short(t.data));
                         });

// The pairs the fused update takes; the Solver updates any other on the host.
TEST(SolverGpu, UpdatePairs) {
  EXPECT_TRUE(gpu::update_supported(BFLOAT16, FLOAT));
  EXPECT_FALSE(gpu::update_supported(BFLOAT16, FLOAT16));
  EXPECT_FALSE(gpu::update_supported(FLOAT, BFLOAT16));
  EXPECT_FALSE(gpu::update_supported(FLOAT, DOUBLE));
  for (Type g : {FLOAT, FLOAT16})
    for (Type d : {FLOAT, FLOAT16}) EXPECT_TRUE(gpu::update_supported(g, d));
}

// A BFLOAT16 net with FLOAT16 solver data: no fused update for the pair, so
// the host update runs on the GPU context, as on the CPU.
TEST(SolverGpu, Bf16WithFp16SolverDataUpdatesOnTheHost) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
  RestoreStream restore;
  const std::string solver = str_cat("type: 'SGD' base_lr: 0.05 momentum: 0.9 solver_data_type: FLOAT16", kSchedule);
  auto gpu = MakeSolver(solver, GpuNet(BFLOAT16), Context::Create(0));
  auto cpu = MakeSolver(solver, GpuNet(BFLOAT16), Context::Cpu());
  const Blob& g = *gpu->net()->learnable_params()[0];
  const Blob& c = *cpu->net()->learnable_params()[0];
  const std::vector<float> before(g.cpu_data<float>(), g.cpu_data<float>() + g.count());
  // DummyData refills its top every forward from the thread's generator: the
  // CPU run starts from the state the GPU run started from, so that both
  // train on the same inputs (without this the CPU's are the next draws, and
  // the weights differ by up to 0.1).
  const std::string inputs = rng_state();
  gpu->Step(3);
  set_rng_state(inputs);
  cpu->Step(3);
  int moved = 0;
  for (size_t k = 0; k < g.count(); ++k) {
    ASSERT_TRUE(std::isfinite(g.cpu_data<float>()[k]));
    // The layers ran on different devices: close, not equal.
    EXPECT_NEAR(g.cpu_data<float>()[k], c.cpu_data<float>()[k], 0.02) << k;
    moved += g.cpu_data<float>()[k] != before[k];
  }
  EXPECT_GT(moved, 0);
}

TEST(SolverGpu, HalfUpdateSchemes) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
  RestoreStream restore;
  for (const char* scheme : {"ACCUMULATE_GRADIENTS", "ACCUMULATE_UPDATES"}) {
    SCOPED_TRACE(scheme);
    CompareGpuWithCpu(str_cat("type: 'SGD' base_lr: 0.05 momentum: 0.9 weight_decay: 0.01 solver_data_type: FLOAT16 "
                              "half_update_scheme: ",
                              scheme, kSchedule),
                      GpuNet(FLOAT16), Options());
  }
}

TEST(SolverGpu, L1DecayMatchesCpu) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
  RestoreStream restore;
  for (const char* type : {"SGD", "AdamW"}) {
    SCOPED_TRACE(type);
    CompareGpuWithCpu(str_cat("type: '", type, "' base_lr: 0.01 momentum: 0.9 weight_decay: 0.05 "
                              "regularization_type: 'L1'", kSchedule),
                      GpuNet(FLOAT16), Options());
  }
}

TEST(SolverGpu, OverflowIsSkippedAndScaleHalves) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
  RestoreStream restore;
  const std::string solver = str_cat("type: 'SGD' base_lr: 0.05 momentum: 0.9 dynamic_loss_scale: true "
                                     "loss_scale_init: 1024 loss_scale_window: 3",
                                     kSchedule);
  Options o;
  o.steps = 6;
  o.inject_at = 2;
  auto gpu = CompareGpuWithCpu(solver, GpuNet(FLOAT16), o);
  // 1024 for iterations 0-1, halved by the skip at 2, doubled after three
  // clean steps (3, 4, 5).
  EXPECT_EQ(gpu->skipped_iterations(), 1);
  EXPECT_EQ(gpu->loss_scale(), 1024.f);
  EXPECT_FALSE(gpu->last_step_skipped());

  // The skipped step leaves weights and history bit for bit.
  auto s = MakeSolver(solver, GpuNet(FLOAT16), Context::Create(0));
  s->Step(2);
  std::vector<Raw> before, history_before;
  for (const Blob* p : s->net()->learnable_params()) before.push_back(Read(p->data()));
  for (size_t i = 0; i < before.size(); ++i) history_before.push_back(Read(s->history(int(i)).data()));
  s->set_after_backward([](Solver& solver) {
    solver.net()->learnable_params()[0]->mutable_cpu_diff<float16>()[7] = float16(NAN);
  });
  s->Step(1);
  EXPECT_TRUE(s->last_step_skipped());
  EXPECT_EQ(s->loss_scale(), 512.f);
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(Read(s->net()->learnable_params()[i]->data()).bytes, before[i].bytes) << "param " << i;
    EXPECT_EQ(Read(s->history(int(i)).data()).bytes, history_before[i].bytes) << "history " << i;
  }
}

TEST(SolverGpu, StaticScaleOverflowWithoutSkippingMatchesCpu) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
  RestoreStream restore;
  Options o;
  o.steps = 3;
  o.inject_at = 1;
  auto gpu = CompareGpuWithCpu(str_cat("type: 'SGD' base_lr: 0.05 skip_nonfinite_steps: false", kSchedule),
                               GpuNet(FLOAT), o);
  EXPECT_EQ(gpu->skipped_iterations(), 0);
}

TEST(SolverGpu, ClippingMatchesCpu) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
  RestoreStream restore;
  // A threshold below the gradient norm (the clip applies) and one above.
  for (const char* clip : {"0.05", "1000"}) {
    for (Type t : {FLOAT, FLOAT16}) {
      SCOPED_TRACE(str_cat("clip ", clip, " net ", type_name(t)));
      CompareGpuWithCpu(str_cat("type: 'SGD' base_lr: 0.05 momentum: 0.9 iter_size: 2 clip_gradients: ", clip,
                                kSchedule),
                        GpuNet(t, "global_grad_scale: 8"), Reduced());
    }
  }
}

// NVCaffe's LARC (larc.hpp), turbo included: the device's sums, trust
// ratios and running correlations against the host's.
TEST(SolverGpu, LarcMatchesCpu) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
  RestoreStream restore;
  for (const char* turbo : {"false", "true"}) {
    for (const char* policy : {"scale", "clip"}) {
      for (const char* type : {"SGD", "Adam"}) {
        SCOPED_TRACE(str_cat(type, " larc_policy ", policy, " larc_turbo ", turbo));
        CompareGpuWithCpu(str_cat("type: '", type, "' base_lr: 0.05 momentum: 0.9 weight_decay: 0.01 larc: true "
                                  "larc_eta: 0.02 larc_policy: '", policy, "' larc_turbo: ", turbo, kSchedule),
                          GpuNet(FLOAT16), Reduced());
      }
    }
  }
}

// The momentum and weight-decay policies and the warm-up reach the kernels
// as the host's per-iteration values.
TEST(SolverGpu, SchedulesMatchCpu) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
  RestoreStream restore;
  const char* kPolicies = " momentum: 0.5 momentum_policy: 'poly' max_momentum: 0.95 momentum_power: 2 "
                          "weight_decay: 0.01 weight_decay_policy: 'poly' max_weight_decay: 0.05 "
                          "rampup_interval: 3 rampup_lr: 0.01 min_lr: 0.02";
  for (const char* type : {"SGD", "Nesterov", "Adam"}) {
    SCOPED_TRACE(type);
    CompareGpuWithCpu(str_cat("type: '", type, "' base_lr: 0.05", kPolicies,
                              " lr_policy: 'step' stepsize: 2 gamma: 0.5 random_seed: 11 max_iter: 8"),
                      GpuNet(FLOAT16), Options());
  }
}

// The fused update writes the FP16 working copy next to the FP32 master
// weights and zeroes the gradients: the copy is the master converted (round
// to nearest even, bit for bit), the next forward converts no parameter, and
// every gradient (the frozen one included) is zero after the step.
TEST(SolverGpu, UpdateWritesWorkingCopyAndClearsGradients) {
  if (!test::HaveDevice()) GTEST_SKIP() << "no CUDA device";
  RestoreStream restore;
  for (const char* type : {"SGD", "Adam"}) {
    SCOPED_TRACE(type);
    auto s = MakeSolver(str_cat("type: '", type, "' base_lr: 0.05 momentum: 0.9 momentum2: 0.999 weight_decay: 0.01 ",
                                "solver_data_type: FLOAT", kSchedule),
                        GpuNet(FLOAT16), Context::Create(0));
    s->Step(2);
    Net& net = *s->net();
    const std::vector<Blob*>& params = net.learnable_params();
    std::vector<int64_t> conversions;
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& w = params[i]->data();
      conversions.push_back(w.conversions());
      const float16* copy = w.data<float16>();  // valid: read back, not converted
      EXPECT_EQ(w.conversions(), conversions.back()) << "param " << i;
      if (net.params_lr()[i] == 0) {
        EXPECT_EQ(w.type(), FLOAT16) << "frozen param " << i;
      } else {
        EXPECT_EQ(w.type(), FLOAT) << "param " << i;
        const float* master = w.data<float>();
        for (size_t k = 0; k < w.count(); ++k) {
          const float16 want(master[k]);
          ASSERT_EQ(std::memcmp(&copy[k], &want, sizeof(float16)), 0)
              << "param " << i << " value " << k << ": copy " << float(copy[k]) << ", master " << master[k];
        }
      }
      const float16* g = params[i]->diff().data<float16>();
      for (size_t k = 0; k < params[i]->count(); ++k) ASSERT_EQ(float(g[k]), 0.f) << "param " << i << " grad " << k;
    }
    net.ForwardBackward();
    net.context().Synchronize();
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_EQ(params[i]->data().conversions(), conversions[i]) << "param " << i << " was converted again";
  }
}

}  // namespace
}  // namespace cortado
