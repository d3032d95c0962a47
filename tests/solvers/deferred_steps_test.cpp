// Deferred steps (Solver::Step): between displays the host neither reads the
// loss nor waits for the overflow check; it reads the steps' records at the
// next display. The CPU cases run the deferred bookkeeping on the host
// (SolverSetup::defer_host_steps) against the eager path; the GPU case runs
// the device's decision against the eager path (the solver field
// defer_steps: false).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cortado/io/proto_io.hpp"
#include "cortado/layer_traits.hpp"
#include "cortado/solvers/deferred_loss.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/solvers/step_graph.hpp"
#include "log_lines.hpp"
#include "model_files.hpp"
#include "test_paths.hpp"
#include "test_scopes.hpp"

#ifdef CORTADO_USE_CUDA
#include "cortado/util/cuda.hpp"
#include "cortado/util/cuda_hold.hpp"
#endif

namespace cortado {
namespace {

std::string NetText(const std::string& types) {
  return types + R"(
  layer { name: "x" type: "DummyData" top: "x" top: "label" top: "target"
    dummy_data_param { shape { dim: 8 dim: 6 } shape { dim: 8 } shape { dim: 8 dim: 4 }
      data_filler { type: "gaussian" } data_filler { type: "constant" value: 2 } data_filler { type: "gaussian" } } }
  layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h" inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
  layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
  layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y" inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "y" bottom: "label" top: "loss" loss_weight: 0.5 }
  layer { name: "reg" type: "EuclideanLoss" bottom: "y" bottom: "target" top: "reg" loss_weight: 0.25 })";
}
const char* kHalf = "default_forward_type: FLOAT16 default_backward_type: FLOAT16";

// Dynamic scaling that grows every 3 clean steps, clipping that bites
// (unless `clip` is false: the device sums the squares in no fixed order, so
// a clipped step's bits may differ from one run to the next there), a
// smoothed loss over 3 iterations, displays every `display`.
std::string SolverText(int display, bool clip = true, const std::string& extra = "") {
  return "base_lr: 0.05 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.001 random_seed: 7 max_iter: 100 "
         "average_loss: 3 dynamic_loss_scale: true loss_scale_init: 64 loss_scale_window: 3 loss_scale_max: 4096 "
         "display: " + std::to_string(display) + (clip ? " clip_gradients: 0.5 " : " ") + extra;
}
const std::string kSolver = SolverText(5);

std::unique_ptr<Solver> MakeSolver(const std::string& solver_text, const std::string& net_text, SolverSetup setup) {
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto(solver_text, "solver.prototxt", &sp, &info);
  ParseTextProto(net_text, "net.prototxt", sp.mutable_net_param());
  return Solver::Create(sp, info, std::move(setup));
}

// Inf in a gradient at these iterations.
bool Overflows(int iter) { return iter == 2 || iter == 7 || iter == 8 || iter == 13; }

void InjectInf(Solver& s) {
  if (!Overflows(s.iter())) return;
  Blob* p = s.net()->learnable_params()[2];
  dispatch_type(p->diff().type(), [&](auto z) {
    using T = decltype(z);
    p->mutable_cpu_diff<T>()[1] = T(INFINITY);
  });
  // On a GPU: upload now and wait (as device_update_test does).
  if (s.net()->context().on_gpu()) {
    p->diff().gpu_data_raw(p->diff().type());
    s.net()->context().Synchronize();
  }
}

struct TrainRun {
  std::vector<std::vector<char>> weights, history;
  double smoothed_loss = 0;
  float scale = 0;
  int skipped = 0;
  int64_t deferred = 0, reads = 0, launches = 0, captures = 0;
  std::vector<std::string> lines;  // the log lines of the steps and displays, sorted
};

std::vector<char> Bytes(const Tensor& t) {
  const char* p = static_cast<const char*>(t.data_raw(t.type()));
  return std::vector<char>(p, p + t.count() * type_size(t.type()));
}

TrainRun Train(const std::string& solver_text, const std::string& net_text, SolverSetup setup, int iters,
               bool inject = true) {
  TrainRun r;
  test::LogLines log;
  auto s = MakeSolver(solver_text, net_text, std::move(setup));
  if (inject) s->set_after_backward(InjectInf);
  s->Step(iters);
  for (const Blob* p : s->net()->learnable_params()) r.weights.push_back(Bytes(p->data()));
  for (size_t i = 0; i < s->net()->learnable_params().size(); ++i)
    r.history.push_back(Bytes(s->history(static_cast<int>(i)).data()));
  r.smoothed_loss = s->smoothed_loss();
  r.scale = s->loss_scale();
  r.skipped = s->skipped_iterations();
  r.deferred = s->deferred_steps();
  r.reads = s->deferred_reads();
  r.launches = s->graph_launches();
  r.captures = s->graph_captures();
  for (const std::string& l : log.lines()) {
    const bool step = l.find("Iteration ") == 0 || l.find("Gradient clipping") == 0 ||
                      l.find("Train net output") != std::string::npos;
    if (step && l.find("images/s") == std::string::npos) r.lines.push_back(l);
  }
  std::sort(r.lines.begin(), r.lines.end());
  return r;
}

size_t Count(const std::vector<std::string>& lines, const std::string& text) {
  return static_cast<size_t>(std::count_if(lines.begin(), lines.end(),
                                           [&](const std::string& l) { return l.find(text) != std::string::npos; }));
}

void ExpectSame(const TrainRun& eager, const TrainRun& deferred) {
  EXPECT_EQ(deferred.weights, eager.weights);  // bit for bit
  EXPECT_EQ(deferred.history, eager.history);
  EXPECT_EQ(deferred.smoothed_loss, eager.smoothed_loss);
  EXPECT_EQ(deferred.scale, eager.scale);
  EXPECT_EQ(deferred.skipped, eager.skipped);
  EXPECT_EQ(deferred.lines, eager.lines);
}

TEST(DeferredSteps, HostDeferredMatchesEagerBitForBit) {
  const TrainRun eager = Train(kSolver, NetText(kHalf), SolverSetup(), 17);
  SolverSetup setup;
  setup.defer_host_steps = true;
  const TrainRun deferred = Train(kSolver, NetText(kHalf), setup, 17);
  ExpectSame(eager, deferred);
  // What the run went through, so that the comparison covers it.
  EXPECT_EQ(eager.skipped, 4);
  EXPECT_GE(Count(eager.lines, "update skipped"), 4u);
  EXPECT_GE(Count(eager.lines, "clean steps, loss scale"), 1u);
  EXPECT_GE(Count(eager.lines, "Gradient clipping"), 1u);
  EXPECT_EQ(Count(eager.lines, ", loss = "), 4u);  // iterations 0, 5, 10, 15
  // Eager: nothing deferred. Deferred: every iteration but the displays
  // (0, 5, 10, 15), read at each display after the first and at the end.
  EXPECT_EQ(eager.deferred, 0);
  EXPECT_EQ(eager.reads, 0);
  EXPECT_EQ(deferred.deferred, 13);
  EXPECT_EQ(deferred.reads, 4);
}

TEST(DeferredSteps, IterSizeAndNoDisplay) {
  // No display: the records are read once, at the end (17 < kMaxDeferredSteps).
  // iter_size 2: the loss sums the passes in another order than the eager
  // path, so the smoothed loss may differ in its last bits; the rest may not.
  const std::string solver = SolverText(0, true, "iter_size: 2");
  const TrainRun eager = Train(solver, NetText(kHalf), SolverSetup(), 17);
  SolverSetup setup;
  setup.defer_host_steps = true;
  const TrainRun deferred = Train(solver, NetText(kHalf), setup, 17);
  EXPECT_EQ(deferred.weights, eager.weights);
  EXPECT_EQ(deferred.history, eager.history);
  EXPECT_NEAR(deferred.smoothed_loss, eager.smoothed_loss, 1e-12 * std::abs(eager.smoothed_loss));
  EXPECT_EQ(deferred.scale, eager.scale);
  EXPECT_EQ(deferred.skipped, eager.skipped);
  EXPECT_EQ(deferred.lines, eager.lines);
  EXPECT_EQ(deferred.deferred, 17);
  EXPECT_EQ(deferred.reads, 1);
}

TEST(DeferredSteps, ManyStepsAreReadEveryKMaxDeferredSteps) {
  const std::string solver = "base_lr: 0.01 lr_policy: 'fixed' random_seed: 7 max_iter: 1000 display: 0";
  SolverSetup setup;
  setup.defer_host_steps = true;
  auto s = MakeSolver(solver, NetText(""), setup);
  s->Step(kMaxDeferredSteps + 10);
  // The ring fills after kMaxDeferredSteps: the next iteration runs eager.
  EXPECT_EQ(s->deferred_steps(), kMaxDeferredSteps + 9);
  EXPECT_EQ(s->deferred_reads(), 2);
}

TEST(DeferredSteps, SwitchesAndPoliciesThatReadEveryStepRunEager) {
  SolverSetup setup;
  setup.defer_host_steps = true;
  {
    auto s = MakeSolver(kSolver + " defer_steps: false", NetText(kHalf), setup);
    s->Step(6);
    EXPECT_EQ(s->deferred_steps(), 0);
  }
  auto plateau = MakeSolver("base_lr: 0.01 lr_policy: 'plateau' gamma: 0.5 plateau_winsize: 3 random_seed: 7 "
                            "max_iter: 100 display: 0", NetText(""), setup);
  plateau->Step(6);
  EXPECT_EQ(plateau->deferred_steps(), 0);
  auto larc = MakeSolver("base_lr: 0.01 lr_policy: 'fixed' larc: true random_seed: 7 max_iter: 100 display: 0",
                         NetText(""), setup);
  larc->Step(6);
  EXPECT_EQ(larc->deferred_steps(), 0);
  // Without the hook the host runs its steps eagerly: nothing to save there.
  auto cpu = MakeSolver(kSolver, NetText(kHalf), SolverSetup());
  cpu->Step(6);
  EXPECT_EQ(cpu->deferred_steps(), 0);
}

TEST(DeferredSteps, SnapshotReadsThePendingSteps) {
  // A snapshot in the middle of deferred steps saves the scale and the
  // skipped steps as the eager run has them.
  const std::string dir = ::testing::TempDir() + "deferred_snapshot_" + std::to_string(::getpid());
  const std::string solver = SolverText(0, true, "snapshot: 9 snapshot_prefix: '" + dir + "'");
  SolverSetup setup;
  setup.defer_host_steps = true;
  auto s = MakeSolver(solver, NetText(kHalf), setup);
  s->set_after_backward(InjectInf);
  s->Step(9);
  auto e = MakeSolver(SolverText(0), NetText(kHalf), SolverSetup());
  e->set_after_backward(InjectInf);
  e->Step(9);
  SolverState state;
  ReadBinaryProto(dir + "_iter_9.solverstate", &state);
  EXPECT_EQ(state.loss_scale(), e->loss_scale());
  EXPECT_EQ(state.skipped_iterations(), e->skipped_iterations());
  EXPECT_EQ(state.skipped_iterations(), 3);  // iterations 2, 7, 8
  std::remove((dir + "_iter_9.solverstate").c_str());
  std::remove((dir + "_iter_9.caffemodel").c_str());
}

TEST(DeferredSteps, LossReadsScope) {
  EXPECT_FALSE(loss_reads_deferred());
  {
    DeferLossReads a;
    EXPECT_TRUE(loss_reads_deferred());
    {
      DeferLossReads b;
      EXPECT_TRUE(loss_reads_deferred());
    }
    EXPECT_TRUE(loss_reads_deferred());
  }
  EXPECT_FALSE(loss_reads_deferred());
}

TEST(DeferredSteps, GpuDeviceDecisionMatchesEager) {
#ifdef CORTADO_USE_CUDA
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device";
  test::RestoreStream restore;
  const TrainRun eager =
      Train(SolverText(5, false, "defer_steps: false"), NetText(kHalf), SolverSetup(Context::Create(0)), 17);
  const TrainRun deferred = Train(SolverText(5, false), NetText(kHalf), SolverSetup(Context::Create(0)), 17);
  ExpectSame(eager, deferred);
  EXPECT_EQ(eager.skipped, 4);
  EXPECT_EQ(eager.deferred, 0);
  EXPECT_EQ(deferred.deferred, 13);
  EXPECT_EQ(deferred.reads, 4);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}


// ---- CUDA graphs of deferred iterations ----------------------------------------

TEST(StepGraph, WhichNetsAndSolversAreCaptured) {
  auto s = MakeSolver(SolverText(0), NetText(kHalf), SolverSetup());
  int head = -1;
  const std::string ok = StepGraphObstacle(*s->net(), s->param(), 1, &head);
#ifdef CORTADO_USE_CUDA
  EXPECT_EQ(ok, "");
  EXPECT_EQ(head, 1);  // the DummyData layer runs before each launch
#else
  EXPECT_NE(ok.find("runs on the CPU"), std::string::npos) << ok;  // no layer has a GPU path
#endif
  EXPECT_NE(StepGraphObstacle(*s->net(), s->param(), 2, &head).find("several ranks"), std::string::npos);
  SolverParameter p = s->param();
  p.set_type("Adam");
  EXPECT_NE(StepGraphObstacle(*s->net(), p, 1, &head).find("the Adam rule"), std::string::npos);
  p = s->param();
  p.set_cuda_graphs(false);
  EXPECT_EQ(StepGraphObstacle(*s->net(), p, 1, &head), "cuda_graphs: false");
  {
    auto off = MakeSolver(SolverText(0, true, "cuda_graphs: false"), NetText(kHalf), SolverSetup());
    EXPECT_EQ(StepGraphObstacle(*off->net(), off->param(), 1, &head), "cuda_graphs: false");
  }
  {
    auto each = MakeSolver(SolverText(0), NetText(kHalf) + " sync_layers: true", SolverSetup());
    EXPECT_NE(StepGraphObstacle(*each->net(), each->param(), 1, &head).find("sync_layers"), std::string::npos);
  }
  // A source after the layers that compute: its batches would be fixed in the graph.
  auto late = MakeSolver(SolverText(0), NetText(kHalf) + R"(
  layer { name: "late" type: "DummyData" top: "z" dummy_data_param { shape { dim: 8 dim: 4 } } }
  layer { name: "zl" type: "EuclideanLoss" bottom: "y" bottom: "z" top: "zl" loss_weight: 0 })", SolverSetup());
  EXPECT_NE(StepGraphObstacle(*late->net(), late->param(), 1, &head).find("layer 'late' (DummyData) has no bottoms"),
            std::string::npos);
}

TEST(StepGraph, ResNet50IsCaptured) {
#ifdef CORTADO_USE_CUDA
  for (const char* model : {"resnet50", "resnet50_nvcaffe"}) {
    NetParameter np = test::SyntheticModelNet(model, Precision::kFp16);
    for (LayerParameter& l : *np.mutable_layer()) SetLayerBatch(&l, 1);
    np.mutable_state()->set_phase(TRAIN);
    cortado::Net net(np);
    SolverParameter sp;
    sp.set_type("SGD");
    int head = -1;
    EXPECT_EQ(StepGraphObstacle(net, sp, 1, &head), "") << model;
    EXPECT_EQ(head, 1) << model;
  }
#else
  GTEST_SKIP() << "built without CUDA: no layer has a GPU path";
#endif
}

TEST(StepGraph, FreesDuringACaptureAreHeldNotPooled) {
#ifdef CORTADO_USE_CUDA
  // While a HoldFrees lives, device_free appends the block to its list and
  // leaves the allocator alone (no device needed: the pointers are only
  // recorded); scopes nest, the inner one's list taking the frees.
  int a = 0, b = 0, c = 0;
  std::vector<void*> outer, inner;
  {
    cuda::HoldFrees hold(&outer);
    cuda::device_free(&a);
    {
      cuda::HoldFrees nested(&inner);
      cuda::device_free(&b);
    }
    cuda::device_free(&c);
    cuda::device_free(nullptr);  // nothing to hold
  }
  EXPECT_EQ(outer, (std::vector<void*>{&a, &c}));
  EXPECT_EQ(inner, (std::vector<void*>{&b}));
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// A small residual net: convolution, BatchNorm with Scale and ReLU (fused),
// an Eltwise SUM with its ReLU, pooling, InnerProduct, SoftmaxWithLoss.
std::string ResidualNet(const std::string& extra = "") {
  return std::string(kHalf) + R"(
  layer { name: "x" type: "DummyData" top: "x" top: "label"
    dummy_data_param { shape { dim: 4 dim: 3 dim: 8 dim: 8 } shape { dim: 4 } data_filler { type: "gaussian" } data_filler { type: "constant" value: 1 } } }
  layer { name: "c1" type: "Convolution" bottom: "x" top: "c1" convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
  layer { name: "b1" type: "BatchNorm" bottom: "c1" top: "c1" }
  layer { name: "s1" type: "Scale" bottom: "c1" top: "c1" scale_param { bias_term: true } }
  layer { name: "r1" type: "ReLU" bottom: "c1" top: "c1" }
  layer { name: "c2" type: "Convolution" bottom: "c1" top: "c2" convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
  layer { name: "b2" type: "BatchNorm" bottom: "c2" top: "c2" }
  layer { name: "sum" type: "Eltwise" bottom: "c1" bottom: "c2" top: "sum" }
  layer { name: "r2" type: "ReLU" bottom: "sum" top: "sum" })" + extra + R"(
  layer { name: "pool" type: "Pooling" bottom: "sum" top: "pool" pooling_param { pool: AVE global_pooling: true } }
  layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "y" inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "y" bottom: "label" top: "loss" })";
}

TEST(StepGraph, GpuReplayGivesTheEagerBits) {
#ifdef CORTADO_USE_CUDA
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device";
  test::RestoreStream restore;
  // No callback (it would keep graphs off); a start scale so large that
  // FP16 overflows, backs off, grows every 3 clean steps and overflows
  // again: steps are skipped inside the replays too.
  const std::string solver =
      "base_lr: 0.05 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.001 random_seed: 7 max_iter: 100 display: 10 "
      "average_loss: 3 dynamic_loss_scale: true loss_scale_init: 1048576 loss_scale_window: 3 loss_scale_max: 1048576";
  // Eager steps, deferred steps without graphs, deferred steps with one.
  const TrainRun eager =
      Train(solver + " defer_steps: false", ResidualNet(), SolverSetup(Context::Create(0)), 30, false);
  const TrainRun plain =
      Train(solver + " cuda_graphs: false", ResidualNet(), SolverSetup(Context::Create(0)), 30, false);
  const TrainRun graph = Train(solver, ResidualNet(), SolverSetup(Context::Create(0)), 30, false);
  ExpectSame(eager, plain);
  ExpectSame(eager, graph);
  // Displays at 0, 10 and 20 run eagerly; of the 27 deferred iterations the
  // first two run without a graph, the third is captured and it and every
  // one after are launches: 25, of one capture.
  EXPECT_EQ(plain.launches, 0);
  EXPECT_EQ(graph.captures, 1);
  EXPECT_EQ(graph.launches, 25);
  EXPECT_EQ(graph.deferred, 27);
  EXPECT_GT(eager.skipped, 2);
  // iter_size 2: a graph of the first pass, one of the second with the step.
  const std::string twice = solver + " iter_size: 2";
  const TrainRun eager2 =
      Train(twice + " defer_steps: false", ResidualNet(), SolverSetup(Context::Create(0)), 30, false);
  const TrainRun graph2 = Train(twice, ResidualNet(), SolverSetup(Context::Create(0)), 30, false);
  EXPECT_EQ(graph2.weights, eager2.weights);
  EXPECT_EQ(graph2.history, eager2.history);
  EXPECT_EQ(graph2.scale, eager2.scale);
  EXPECT_EQ(graph2.skipped, eager2.skipped);
  EXPECT_NEAR(graph2.smoothed_loss, eager2.smoothed_loss, 1e-12 * std::abs(eager2.smoothed_loss));
  EXPECT_EQ(graph2.captures, 2);
  EXPECT_EQ(graph2.launches, 50);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// The graphs hold the stream workspace's address: when work on the solver's
// stream grows it (a test pass, a new shape), the old buffer is freed, and
// the next deferred iteration captures again instead of replaying a graph
// that uses freed memory. The weights stay the eager run's, bit for bit.
TEST(StepGraph, GpuWorkspaceGrowthCapturesAgain) {
#ifdef CORTADO_USE_CUDA
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device";
  test::RestoreStream restore;
  const std::string solver =
      "base_lr: 0.05 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.001 random_seed: 7 max_iter: 100 display: 0";
  const TrainRun eager =
      Train(solver + " defer_steps: false", ResidualNet(), SolverSetup(Context::Create(0)), 20, false);
  auto ctx = Context::Create(0);
  auto s = MakeSolver(solver, ResidualNet(), SolverSetup(ctx));
  s->Step(10);
  EXPECT_EQ(s->graph_captures(), 1);
  ctx->Activate();
  const uint64_t before = cuda::stream_workspace_generation(ctx->stream());
  cuda::stream_workspace(size_t{256} << 20);  // more than any layer of the net asked for
  EXPECT_EQ(cuda::stream_workspace_generation(ctx->stream()), before + 1);
  cuda::stream_workspace(1024);  // less: the same buffer
  EXPECT_EQ(cuda::stream_workspace_generation(ctx->stream()), before + 1);
  s->Step(10);
  EXPECT_EQ(s->graph_captures(), 2) << "the graph was not captured again after the workspace grew";
  std::vector<std::vector<char>> weights;
  for (const Blob* p : s->net()->learnable_params()) weights.push_back(Bytes(p->data()));
  EXPECT_EQ(weights, eager.weights);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TEST(StepGraph, GpuHostDataPerPassIsNotCaptured) {
#ifdef CORTADO_USE_CUDA
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device";
  test::RestoreStream restore;
  // Dropout's mask is drawn on the host and copied up each pass: a graph
  // would replay one mask. The capture is refused and the steps run without.
  const std::string net = ResidualNet(R"(
  layer { name: "drop" type: "Dropout" bottom: "sum" top: "sum" dropout_param { dropout_ratio: 0.5 random_seed: 3 } })");
  test::LogLines log;
  auto s = MakeSolver(SolverText(0, false), net, SolverSetup(Context::Create(0)));
  s->Step(8);
  EXPECT_EQ(s->graph_launches(), 0);
  EXPECT_EQ(s->deferred_steps(), 8);
  EXPECT_EQ(log.with("a copy between host and device memory in a CUDA graph capture").size(), 1u);
  EXPECT_EQ(log.with("the training steps run without a graph").size(), 1u);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

}  // namespace
}  // namespace cortado
