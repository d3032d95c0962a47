// The mixed-precision method: overflow skipping, dynamic and static loss
// scaling, global clipping after unscaling, FP32 master weights, FP16 solver
// data that keeps small updates alive, mixed type pairs in one net, and
// bfloat16 storage (FP32 master weights, boundaries to the other types).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "cortado/io/proto_io.hpp"
#include "cortado/solvers/solver.hpp"

namespace cortado {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<Solver> make_solver(const std::string& solver_text, const std::string& net_text) {
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto(solver_text, "solver.prototxt", &sp, &info);
  ParseTextProto(net_text, "net.prototxt", sp.mutable_net_param());
  return Solver::Create(sp, info);
}

std::string classifier(const std::string& types, const std::string& extra_net = "") {
  return types + " " + extra_net + R"(
  layer { name: "x" type: "DummyData" top: "x" top: "label"
    dummy_data_param { shape { dim: 8 dim: 6 } shape { dim: 8 } data_filler { type: "gaussian" } data_filler { type: "constant" value: 1 } } }
  layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h" inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
  layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
  layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y" inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "y" bottom: "label" top: "loss" })";
}
const char* kHalf = "default_forward_type: FLOAT16 default_backward_type: FLOAT16";
const char* kBf16 = "default_forward_type: BFLOAT16 default_backward_type: BFLOAT16";

std::vector<float> values(const Blob& b, bool diff = false) {
  const float* p = diff ? b.cpu_diff<float>() : b.cpu_data<float>();
  return std::vector<float>(p, p + b.count());
}

std::vector<std::vector<float>> weights(Solver& s) {
  std::vector<std::vector<float>> w;
  for (const Blob* p : s.net()->learnable_params()) w.push_back(values(*p));
  return w;
}

TEST(MixedPrecision, OverflowIsSkippedAndScaleBacksOff) {
  auto s = make_solver("base_lr: 0.1 lr_policy: 'fixed' momentum: 0.9 random_seed: 3 max_iter: 10 "
                       "dynamic_loss_scale: true loss_scale_init: 1024",
                       classifier(kHalf));
  s->Step(3);
  EXPECT_EQ(s->loss_scale(), 1024.f);
  const auto before = weights(*s);
  const auto history_before = values(s->history(0));
  s->set_after_backward([](Solver& solver) {
    if (solver.iter() == 3) solver.net()->learnable_params()[2]->mutable_cpu_diff<float>()[1] = INFINITY;
  });
  s->Step(1);
  EXPECT_TRUE(s->last_step_skipped());
  EXPECT_EQ(s->iter(), 4);
  EXPECT_EQ(s->loss_scale(), 512.f);
  EXPECT_EQ(s->skipped_iterations(), 1);
  EXPECT_EQ(weights(*s), before);  // bit-identical
  EXPECT_EQ(values(s->history(0)), history_before);
  s->Step(1);  // clean again: the update applies
  EXPECT_FALSE(s->last_step_skipped());
  EXPECT_NE(weights(*s), before);
}

TEST(MixedPrecision, NaNIsSkippedUnderStaticScaleToo) {
  auto s = make_solver("base_lr: 0.1 lr_policy: 'fixed' random_seed: 3 max_iter: 10", classifier(kHalf));
  s->Step(1);
  const auto before = weights(*s);
  s->set_after_backward([](Solver& solver) { solver.net()->learnable_params()[0]->mutable_cpu_diff<float16>()[0] = float16(NAN); });
  s->Step(1);
  EXPECT_TRUE(s->last_step_skipped());
  EXPECT_EQ(s->loss_scale(), 1.f);
  EXPECT_EQ(weights(*s), before);
}

TEST(MixedPrecision, ScaleGrowsAfterCleanWindowWithinBounds) {
  auto s = make_solver("base_lr: 0.01 lr_policy: 'fixed' random_seed: 3 max_iter: 20 dynamic_loss_scale: true "
                       "loss_scale_init: 4 loss_scale_window: 3 loss_scale_max: 16",
                       classifier(kHalf));
  s->Step(2);
  EXPECT_EQ(s->loss_scale(), 4.f);
  s->Step(1);
  EXPECT_EQ(s->loss_scale(), 8.f);
  s->Step(3);
  EXPECT_EQ(s->loss_scale(), 16.f);
  s->Step(3);
  EXPECT_EQ(s->loss_scale(), 16.f);  // loss_scale_max
  EXPECT_EQ(s->skipped_iterations(), 0);
}

TEST(MixedPrecision, StaticScaleGivesTheSameWeightsInFp32) {
  // Each run draws its data from the generator its solver seeds, so the two
  // runs go one after the other.
  struct Run {
    double loss, grad_asum;
    std::vector<std::vector<float>> w;
    float scale;
  };
  auto run = [](const std::string& extra) {
    auto s = make_solver("base_lr: 0.1 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.01 random_seed: 5 max_iter: 5",
                         classifier("", extra));
    Run r;
    r.loss = s->net()->ForwardBackward();
    r.grad_asum = s->net()->learnable_params()[0]->asum_diff();
    s->Step(5);
    r.w = weights(*s);
    r.scale = s->loss_scale();
    return r;
  };
  const Run plain = run(""), scaled = run("global_grad_scale: 1024");
  EXPECT_EQ(scaled.scale, 1024.f);
  EXPECT_NEAR(plain.loss, scaled.loss, 1e-6);  // the reported loss does not carry S
  EXPECT_NEAR(scaled.grad_asum, 1024 * plain.grad_asum, 1e-4 * scaled.grad_asum);
  for (size_t i = 0; i < plain.w.size(); ++i)
    for (size_t k = 0; k < plain.w[i].size(); ++k)
      EXPECT_NEAR(plain.w[i][k], scaled.w[i][k], 1e-5 * (1 + std::abs(plain.w[i][k])));
}

// loss = sum(W x + b), x = 0: dL/db = 2 per output (N = 2), dL/dW = 0.
const char* kLinear = R"(
  layer { name: "x" type: "DummyData" top: "x" dummy_data_param { shape { dim: 2 dim: 3 } data_filler { type: "constant" value: 0 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
    inner_product_param { num_output: 2 weight_filler { type: "constant" value: 0.5 } bias_filler { type: "constant" value: 1 } } }
  layer { name: "l" type: "Flatten" bottom: "y" top: "loss" loss_weight: 1 })";

TEST(MixedPrecision, ClippingUsesOneGlobalNormAfterUnscaling) {
  for (const char* scale : {"", "global_grad_scale: 8"}) {
    auto s = make_solver("base_lr: 0.5 lr_policy: 'fixed' clip_gradients: 1 max_iter: 1", std::string(scale) + kLinear);
    s->Step(1);
    // Global norm = sqrt(2^2 + 2^2) over both parameters; clipped to 1.
    const double factor = 1 / std::sqrt(8.0);
    EXPECT_NEAR(s->net()->learnable_params()[1]->cpu_data<float>()[0], 1 - 0.5 * 2 * factor, 1e-6) << scale;
    EXPECT_NEAR(s->net()->learnable_params()[0]->cpu_data<float>()[0], 0.5, 1e-7) << scale;
  }
}

TEST(MixedPrecision, MasterWeightsStayFp32) {
  auto s = make_solver("base_lr: 0.001 lr_policy: 'fixed' random_seed: 1 max_iter: 3", classifier(kHalf));
  s->Step(3);
  const Blob& w = *s->net()->learnable_params()[0];
  EXPECT_EQ(w.data_type(), FLOAT);
  int not_half = 0;
  for (size_t k = 0; k < w.count(); ++k) not_half += float(float16(w.cpu_data<float>()[k])) != w.cpu_data<float>()[k];
  EXPECT_GT(not_half, static_cast<int>(w.count()) / 2);  // FP32 values, not rounded to FP16
  // The layers read the rounded FP16 copy.
  EXPECT_EQ(float(w.cpu_data<float16>()[0]), float(float16(w.cpu_data<float>()[0])));
  // Snapshots store the master values.
  NetParameter snap;
  s->net()->ToProto(&snap);
  EXPECT_EQ(snap.layer(1).blobs(0).data(0), w.cpu_data<float>()[0]);
}

TEST(MixedPrecision, Fp16SolverDataStoresHalves) {
  auto s = make_solver("base_lr: 0.001 lr_policy: 'fixed' momentum: 0.9 random_seed: 1 max_iter: 3 solver_data_type: FLOAT16",
                       classifier(kHalf));
  s->Step(3);
  EXPECT_EQ(s->data_type(), FLOAT16);
  EXPECT_EQ(s->net()->learnable_params()[0]->data_type(), FLOAT16);
  EXPECT_EQ(s->history(0).data_type(), FLOAT16);
}

// g = 1e-5 every step, lr = 1e-3: lr * g = 1e-8 is below half of FP16's
// smallest subnormal, so plain FP16 momentum (H = m H + lr g) never moves;
// accumulating gradients (H = m H + g, W -= lr H in FP32) follows FP32.
TEST(MixedPrecision, Fp16HistorySchemeKeepsSmallUpdatesAlive) {
  const char* net = R"(
    layer { name: "x" type: "DummyData" top: "x" dummy_data_param { shape { dim: 1 dim: 1 } data_filler { type: "constant" value: 1e-5 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
      inner_product_param { num_output: 1 bias_term: false weight_filler { type: "constant" value: 0 } } }
    layer { name: "l" type: "Flatten" bottom: "y" top: "loss" loss_weight: 1 })";
  const std::string base = "base_lr: 0.001 lr_policy: 'fixed' momentum: 0.9 max_iter: 100 ";
  auto fp32 = make_solver(base, net);
  auto kept = make_solver(base + "solver_data_type: FLOAT16", net);
  auto plain = make_solver(base + "solver_data_type: FLOAT16 half_update_scheme: ACCUMULATE_UPDATES", net);
  fp32->Step(100);
  kept->Step(100);
  plain->Step(100);
  const double ref = fp32->net()->learnable_params()[0]->cpu_data<float>()[0];
  const double k = kept->net()->learnable_params()[0]->cpu_data<float>()[0];
  const double p = plain->net()->learnable_params()[0]->cpu_data<float>()[0];
  EXPECT_LT(ref, -5e-6);
  EXPECT_EQ(p, 0.0);                           // lost
  // Alive: W moves by about 1e-7 per step, a couple of FP16 subnormal units,
  // so each rounding is coarse; the sum still tracks FP32 within 25%.
  EXPECT_NEAR(k, ref, 0.25 * std::abs(ref));
}

TEST(MixedPrecision, MixedPairsInOneNetTrain) {
  // FP16 storage with an FP32 loss layer, and (FLOAT, FLOAT16) / (FLOAT16, FLOAT) layers.
  std::string net = classifier(kHalf);
  net.replace(net.find("type: \"SoftmaxWithLoss\""), 23, "type: \"SoftmaxWithLoss\" forward_type: FLOAT backward_type: FLOAT");
  net.replace(net.find("type: \"ReLU\""), 12, "type: \"ReLU\" forward_type: FLOAT backward_type: FLOAT16");
  net.replace(net.find("name: \"ip2\" type: \"InnerProduct\""), 32,
              "name: \"ip2\" type: \"InnerProduct\" forward_type: FLOAT16 backward_type: FLOAT");
  auto s = make_solver("base_lr: 0.1 lr_policy: 'fixed' momentum: 0.9 random_seed: 2 max_iter: 60", net);
  EXPECT_EQ(s->net()->layer_by_name("loss")->forward_type(), FLOAT);
  EXPECT_EQ(s->net()->layer_by_name("relu")->backward_type(), FLOAT16);
  const double first = s->net()->Forward();
  s->Step(60);
  // Labels are all 1: the net learns to predict class 1.
  EXPECT_LT(s->net()->Forward(), 0.2 * first);
}

TEST(MixedPrecision, Bf16NetKeepsFp32MasterWeightsAndLearns) {
  auto s = make_solver("base_lr: 0.1 lr_policy: 'fixed' momentum: 0.9 random_seed: 2 max_iter: 60", classifier(kBf16));
  EXPECT_EQ(s->net()->layer_by_name("ip1")->forward_type(), BFLOAT16);
  EXPECT_EQ(s->data_type(), FLOAT);
  const double first = s->net()->Forward();
  s->Step(60);
  EXPECT_LT(s->net()->Forward(), 0.2 * first);
  const Blob& w = *s->net()->learnable_params()[0];
  EXPECT_EQ(w.data_type(), FLOAT);
  int not_bf16 = 0;
  for (size_t k = 0; k < w.count(); ++k) not_bf16 += float(bfloat16(w.cpu_data<float>()[k])) != w.cpu_data<float>()[k];
  EXPECT_GT(not_bf16, static_cast<int>(w.count()) / 2);  // FP32 values, not rounded to bfloat16
  // The layers read the rounded bfloat16 copy; the gradients are bfloat16.
  EXPECT_EQ(float(w.cpu_data<bfloat16>()[0]), float(bfloat16(w.cpu_data<float>()[0])));
  EXPECT_EQ(w.diff().type(), BFLOAT16);
}

TEST(MixedPrecision, Bf16NextToFp16AndFp32Layers) {
  // A bfloat16 net with an FP16 layer and an FP32 loss: every boundary converts.
  std::string net = classifier(kBf16);
  net.replace(net.find("type: \"SoftmaxWithLoss\""), 23, "type: \"SoftmaxWithLoss\" forward_type: FLOAT backward_type: FLOAT");
  net.replace(net.find("type: \"ReLU\""), 12, "type: \"ReLU\" forward_type: FLOAT16 backward_type: FLOAT16");
  auto s = make_solver("base_lr: 0.1 lr_policy: 'fixed' momentum: 0.9 random_seed: 2 max_iter: 60", net);
  EXPECT_EQ(s->net()->layer_by_name("relu")->forward_type(), FLOAT16);
  const double first = s->net()->Forward();
  s->Step(60);
  EXPECT_LT(s->net()->Forward(), 0.2 * first);
}

TEST(MixedPrecision, Bf16PairsAndSolverDataAreChecked) {
  // bfloat16 pairs only with itself, and is not a solver data type.
  std::string net = classifier(kBf16);
  net.replace(net.find("type: \"ReLU\""), 12, "type: \"ReLU\" forward_type: FLOAT backward_type: BFLOAT16");
  try {
    make_solver("base_lr: 0.1 lr_policy: 'fixed'", net);
    FAIL() << "(FLOAT, BFLOAT16) accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("relu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("BFLOAT16"), std::string::npos) << e.what();
  }
  try {
    make_solver("base_lr: 0.1 lr_policy: 'fixed'\nsolver_data_type: BFLOAT16", classifier(kBf16));
    FAIL() << "BFLOAT16 solver data accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("solver.prototxt:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("solver_data_type"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("FLOAT"), std::string::npos) << e.what();
  }
}

TEST(MixedPrecision, ResumeRestoresTheLossScale) {
  const fs::path dir = fs::temp_directory_path() / str_cat("cortado_scale_", getpid());
  fs::create_directories(dir);
  const std::string solver = str_cat("base_lr: 0.1 lr_policy: 'fixed' random_seed: 3 max_iter: 6 snapshot: 4 ",
                                     "dynamic_loss_scale: true loss_scale_init: 256 loss_scale_window: 3 snapshot_prefix: '",
                                     (dir / "s").string(), "'");
  auto a = make_solver(solver, classifier(kHalf));
  a->set_after_backward([](Solver& s) {
    if (s.iter() == 1) s.net()->learnable_params()[0]->mutable_cpu_diff<float>()[0] = NAN;
  });
  a->Solve();
  auto b = make_solver(solver, classifier(kHalf));
  b->Restore((dir / "s_iter_4.solverstate").string());
  EXPECT_EQ(b->skipped_iterations(), 1);
  // 256 -> 128 at iteration 1; iterations 2 and 3 are clean (2 of the 3 the window needs).
  EXPECT_EQ(b->loss_scale(), 128.f);
  b->Solve();
  EXPECT_EQ(weights(*a), weights(*b));
  EXPECT_EQ(a->loss_scale(), b->loss_scale());
  EXPECT_EQ(b->loss_scale(), 256.f);  // grown back after the third clean step
  fs::remove_all(dir);
}

TEST(MixedPrecision, AdaptiveScaleIsRejected) {
  try {
    make_solver("base_lr: 0.1 lr_policy: 'fixed'", classifier("global_grad_scale_adaptive: true"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("global_grad_scale_adaptive"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dynamic_loss_scale"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cortado
