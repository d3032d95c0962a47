// Data-parallel training in one process (run_ranks.hpp): the threads engine's
// collectives on real threads, RunRanks' error handling, and the step of R
// in-process ranks against one solver with their batches together, on the
// CPU and, where a device exists, on the GPU (two ranks sharing device 0
// through the threads engine; NCCL over every device).
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cortado/comm/communicator.hpp"
#include "cortado/comm/rank_phase.hpp"
#include "cortado/comm/run_ranks.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/util/device.hpp"
#include "cortado/util/logging.hpp"
#include "command.hpp"
#include "data_parallel_util.hpp"
#include "datum_db.hpp"
#include "hdf5_util.hpp"
#include "log_lines.hpp"
#include "test_paths.hpp"

#ifdef CORTADO_USE_CUDA
#include "cortado/util/cuda.hpp"
#endif
#ifdef CORTADO_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#endif

namespace cortado {
namespace {

namespace fs = std::filesystem;

// Runs fn(comm) for every rank of a LocalGroup(n) on its own thread.
void OnThreads(int n, const std::function<void(Communicator&)>& fn) {
  std::vector<std::shared_ptr<Communicator>> comms = LocalGroup(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { fn(*comms[static_cast<size_t>(r)]); });
  for (std::thread& t : threads) t.join();
}

TEST(LocalCommunicator, SumsEveryTypeInPlaceInRankOrder) {
  const int n = 3;
  std::atomic<int> checked{0};
  OnThreads(n, [&](Communicator& comm) {
    const int r = comm.rank();
    EXPECT_EQ(comm.size(), n);
    EXPECT_STREQ(comm.engine(), "threads");
    // 1003 values: the slices of 3 ranks are uneven.
    std::vector<float> f(1003);
    std::vector<double> d(1003);
    for (size_t i = 0; i < f.size(); ++i) f[i] = d[i] = 1000.0 * r + static_cast<double>(i);
    comm.AllReduceSum(f.data(), static_cast<int64_t>(f.size()), FLOAT);
    comm.AllReduceSum(d.data(), static_cast<int64_t>(d.size()), DOUBLE);
    for (size_t i = 0; i < f.size(); ++i) {
      ASSERT_EQ(f[i], static_cast<float>(3000.0 + n * static_cast<double>(i))) << i;
      ASSERT_EQ(d[i], 3000.0 + n * static_cast<double>(i)) << i;
    }
    // float16 sums in rank order, each rounded: (2048 + 1) + 1 rounds to
    // 2048 twice; Inf and NaN reach every rank.
    std::vector<float16> h = {float16(0.25f * (r + 1)), float16(r == 0 ? 2048.0f : 1.0f),
                              float16(r == 1 ? std::numeric_limits<float>::infinity() : 1.0f),
                              float16(r == 2 ? std::numeric_limits<float>::quiet_NaN() : 1.0f)};
    comm.AllReduceSum(h.data(), static_cast<int64_t>(h.size()), FLOAT16);
    EXPECT_EQ(static_cast<float>(h[0]), 1.5f);
    EXPECT_EQ(static_cast<float>(h[1]), 2048.0f);
    EXPECT_TRUE(isinf(h[2]));
    EXPECT_TRUE(isnan(h[3]));
    // bfloat16 likewise: (256 + 1) + 1 rounds to 256 twice (258 if the two
    // ones were added first).
    std::vector<bfloat16> bf = {bfloat16(0.25f * (r + 1)), bfloat16(r == 0 ? 256.0f : 1.0f),
                                bfloat16(r == 1 ? std::numeric_limits<float>::infinity() : 1.0f),
                                bfloat16(r == 2 ? std::numeric_limits<float>::quiet_NaN() : 1.0f)};
    comm.AllReduceSum(bf.data(), static_cast<int64_t>(bf.size()), BFLOAT16);
    EXPECT_EQ(static_cast<float>(bf[0]), 1.5f);
    EXPECT_EQ(static_cast<float>(bf[1]), 256.0f);
    EXPECT_TRUE(isinf(bf[2]));
    EXPECT_TRUE(isnan(bf[3]));
    // Spans: several buffers in one collective (the solver's gradients).
    std::vector<float> a(5, 1.0f + r), b(7, 10.0f * r);
    comm.AllReduceSum({{a.data(), 5}, {b.data(), 7}}, FLOAT, nullptr);
    EXPECT_EQ(a, std::vector<float>(5, 6.0f));
    EXPECT_EQ(b, std::vector<float>(7, 30.0f));
    ++checked;
  });
  EXPECT_EQ(checked.load(), n);
}

// mpirun's GPU ranks keep the host engine where NCCL cannot take them:
// repeated ids, or a machine with more ranks than ids (here the threads
// engine stands in for MPI; no GPU is touched on these paths).
TEST(GpuProcessRank, KeepsTheHostEngineWhenRanksCouldShareAGpu) {
  std::vector<std::shared_ptr<Communicator>> world = LocalGroup(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto& w = world[static_cast<size_t>(r)];
      EXPECT_EQ(GpuProcessRank(w, {0, 0}, r), w) << "rank " << r;  // --gpu=0,0
      EXPECT_EQ(GpuProcessRank(w, {3}, r), w) << "rank " << r;     // two ranks, one id: rank 1 wraps
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(LocalCommunicator, BroadcastAndMax) {
  OnThreads(3, [](Communicator& comm) {
    const int r = comm.rank();
    std::vector<int32_t> v(257, r == 2 ? 7 : -1);
    comm.Broadcast(v.data(), static_cast<int64_t>(v.size() * sizeof(int32_t)), 2);
    for (int32_t x : v) ASSERT_EQ(x, 7);
    EXPECT_EQ(comm.Max(r), 2);
    EXPECT_EQ(comm.Max(-r), 0);
    for (int k = 0; k < 100; ++k) ASSERT_EQ(comm.Max(r * 100 + k), 200 + k);  // back to back: no generation mixed up
  });
}

TEST(LocalCommunicator, AnAbortEndsTheOthersWaitInsteadOfHangingIt) {
  std::atomic<int> stopped{0};
  OnThreads(3, [&](Communicator& comm) {
    if (comm.rank() == 1) {
      EXPECT_THROW(comm.Abort(1), Error);
      return;
    }
    try {
      comm.Max(0);  // rank 1 never comes
      ADD_FAILURE() << "rank " << comm.rank() << " passed a collective that rank 1 never joined";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("another rank"), std::string::npos) << e.what();
      ++stopped;
    }
  });
  EXPECT_EQ(stopped.load(), 2);
}

// A hung run ended by SIGTERM (the trainer installs this) says where each
// rank was, then ends as the signal's earlier handler would have it.
TEST(RankPhase, SigtermWritesEveryRanksLastPhaseThenEndsTheProcess) {
  EXPECT_EXIT(
      {
        set_rank_phase(0, "the gradient sums", 7);
        set_rank_phase(1, "a snapshot", 8);
        dump_rank_phases_on(SIGTERM);
        std::raise(SIGTERM);
        std::exit(0);  // not reached when the dump passes the signal on
      },
      ::testing::KilledBySignal(SIGTERM),
      "Where the ranks of this process were:\n  rank 0: iteration 7, the gradient sums\n  rank 1: iteration 8, a snapshot");
}

// The Solver marks its phases as it trains; Solve ends on every rank, the
// final display's collective included (rank 1, which logs no INFO lines,
// once skipped it inside a log statement and rank 0 waited for ever: the
// alarm ends such a hang).
TEST(RankPhase, TheSolverMarksItsRanksPhaseAndEveryRankFinishesSolve) {
  EXPECT_EXIT(
      {
        alarm(60);
        set_rank_phase(0, "not yet", -1);
        RunRanks({-1, -1}, [&](const Rank& rank) {
          SolverSetup setup(rank.ctx);
          setup.comm = rank.comm;
          SolverParameter sp;
          ParseTextProto("base_lr: 0.01 lr_policy: 'fixed' max_iter: 2 display: 1 snapshot_after_train: false",
                         "solver.prototxt", &sp);
          ParseTextProto(R"(layer { name: "x" type: "DummyData" top: "x"
                              dummy_data_param { shape { dim: 2 dim: 3 } data_filler { type: "uniform" } } }
                            layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
                              inner_product_param { num_output: 1 weight_filler { type: "uniform" } } }
                            layer { name: "l" type: "Reduction" bottom: "y" top: "loss" loss_weight: 1 })",
                         "net.prototxt", sp.mutable_net_param());
          std::unique_ptr<Solver> solver = Solver::Create(sp, SourceInfo(), setup);
          solver->Step(1);
          if (rank.rank == 0) dump_rank_phases(STDERR_FILENO);
          solver->Solve();
        });
        dump_rank_phases(STDERR_FILENO);
        _exit(0);  // no exit handlers: a forked child of a process that used CUDA may crash in them
      },
      ::testing::ExitedWithCode(0),
      "rank 0: iteration 1, waiting for the device after the last step\n(.|\n)*"
      "rank 0: iteration 2, done\n  rank 1: iteration 2, done");
}

TEST(RunRanks, RethrowsTheFirstErrorNamingItsRankAndLogsOnRankZeroOnly) {
  std::atomic<int> logging{0};
  try {
    RunRanks({-1, -1, -1}, [&](const Rank& rank) {
      EXPECT_EQ(rank.ranks, 3);
      EXPECT_FALSE(rank.ctx->on_gpu());
      if (thread_logs_info()) logging += 1 + rank.rank;
      if (rank.rank == 2) fail("rank two's own trouble");
      rank.comm->Max(0);  // ranks 0 and 1 wait here for rank 2, which is gone
      ADD_FAILURE() << "rank " << rank.rank << " went on";
    });
    FAIL() << "RunRanks returned after a rank failed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "rank 2 of 3 failed: rank two's own trouble") << "no Solver marked a phase";
  }
  EXPECT_EQ(logging.load(), 1) << "only rank 0 logs INFO";
  EXPECT_TRUE(thread_logs_info()) << "the calling thread still logs";
}

TEST(RunRanks, ChoosesTheEngine) {
  EXPECT_EQ(ResolveEngine({-1, -1}), RankEngine::kThreads);
  EXPECT_EQ(ResolveEngine({0, 0}), RankEngine::kThreads) << "NCCL takes one rank per device";
  EXPECT_EQ(ResolveEngine({0, 1}), NcclBuilt() ? RankEngine::kNccl : RankEngine::kThreads);
  EXPECT_THROW(ResolveEngine({-1, -1}, RankEngine::kNccl), Error);
  EXPECT_THROW(ResolveEngine({0, 0}, RankEngine::kNccl), Error);
  EXPECT_THROW(ResolveEngine({}), Error);
}

// A small LMDB for the solver tests.
class ParallelSolverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("cortado_parallel_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    uint32_t state = 12345;  // a linear congruential sequence: noise-like pixels
    test::WriteRawDatumDb(db(), 32, 1, 6, 6, [&](int, int) {
      state = state * 1664525u + 1013904223u;
      return static_cast<uint8_t>(state >> 24);
    }, [](int i) { return i % 5; });
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string db() const { return (dir_ / "db").string(); }
  std::string prefix() const { return (dir_ / "snap").string(); }

  // Trains the recipe on the ranks of `devices` and checks every rank
  // against one solver alone with their batches together (on the CPU).
  void ExpectRanksStepTogether(const test::Recipe& recipe, const std::vector<int>& devices,
                               RankEngine engine = RankEngine::kAuto, bool defer_host_steps = false) {
    const int n = static_cast<int>(devices.size()), B = 3, steps = 4;
    std::vector<std::vector<float>> before(devices.size()), after(devices.size());
    RunRanks(devices, [&](const Rank& rank) {
      auto s = test::MakeSolver(test::DataParallelSolver(recipe.iter_size, recipe.solver),
                                test::DataParallelNet(db(), B, recipe.storage), rank.comm, rank.ctx, defer_host_steps);
      s->SyncParameters();
      before[static_cast<size_t>(rank.rank)] = test::Weights(s.get());
      s->Step(steps);
      // Deferred: every step but with clipping (its norm is the ranks' mean).
      const bool clips = std::string(recipe.solver).find("clip_gradients") != std::string::npos;
      if (defer_host_steps) EXPECT_EQ(s->deferred_steps(), clips ? 0 : steps);
      after[static_cast<size_t>(rank.rank)] = test::Weights(s.get());
    }, engine);
    for (int r = 1; r < n; ++r) EXPECT_EQ(after[static_cast<size_t>(r)], after[0]) << "rank " << r << " drifted";
    test::ExpectStepOfTheirBatchTogether(recipe, db(), n, B, steps, before[0], after[0]);
  }

 private:
  fs::path dir_;
};

class InProcessRanks : public ParallelSolverTest, public ::testing::WithParamInterface<test::Recipe> {};

TEST_P(InProcessRanks, StepOfTwoCpuRanksIsTheStepOfTheirBatchTogether) { ExpectRanksStepTogether(GetParam(), {-1, -1}); }

// The same with the deferred steps' bookkeeping (as the GPU runs it, here on
// the host): the ranks agree on every collective and step alike.
TEST_P(InProcessRanks, DeferredStepOfTwoCpuRanksIsTheStepOfTheirBatchTogether) {
  ExpectRanksStepTogether(GetParam(), {-1, -1}, RankEngine::kAuto, true);
}

// Two ranks on one GPU (threads engine, host sums): two streams allocate on
// one device, which the allocator's per-stream pools keep apart.
TEST_P(InProcessRanks, StepOfTwoRanksSharingGpu0IsTheStepOfTheirBatchTogether) {
  if (DeviceCount() < 1) GTEST_SKIP() << "no CUDA device";
  ExpectRanksStepTogether(GetParam(), {0, 0});
}

// NCCL over every device (one device: a group of one, whose sums go
// through NCCL all the same).
TEST_P(InProcessRanks, StepOfNcclRanksIsTheStepOfTheirBatchTogether) {
  if (!NcclBuilt()) GTEST_SKIP() << "no NCCL in this build";
  if (DeviceCount() < 1) GTEST_SKIP() << "no CUDA device";
  std::vector<int> devices;
  for (int d = 0; d < DeviceCount(); ++d) devices.push_back(d);
  ExpectRanksStepTogether(GetParam(), devices, RankEngine::kNccl);
}

INSTANTIATE_TEST_SUITE_P(Recipes, InProcessRanks, ::testing::ValuesIn(test::DataParallelRecipes()),
                         [](const ::testing::TestParamInfo<test::Recipe>& i) { return i.param.name; });

// The threads engine presented as an asynchronous one (as NCCL is): the
// Solver then sums in buckets, starting each during backward as soon as it
// is complete. This engine sums at once, in the order the buckets start, so
// the plan and its order show on the CPU.
class StartedSums : public Communicator {
 public:
  explicit StartedSums(std::shared_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const char* engine() const override { return "threads, as asynchronous"; }
  using Communicator::AllReduceSum;
  void AllReduceSum(void* data, int64_t count, Type type) override { inner_->AllReduceSum(data, count, type); }
  bool asynchronous() const override { return true; }
  void StartAllReduceSum(const std::vector<Span>& spans, Type type, CUstream_st* stream) override {
    int64_t n = 0;
    for (const Span& sp : spans) n += sp.count;
    started.push_back(n);
    inner_->AllReduceSum(spans, type, stream);
  }
  void WaitSums(CUstream_st*) override { ++waits; }
  void Broadcast(void* data, int64_t bytes, int root) override { inner_->Broadcast(data, bytes, root); }
  int64_t Max(int64_t value) override { return inner_->Max(value); }
  using Communicator::Abort;
  [[noreturn]] void Abort(int status, const std::string& reason) override {
    inner_->Abort(status, reason);  // throws
    std::abort();                   // not reached
  }

  std::vector<int64_t> started;  // the values of each bucket, in order
  int waits = 0;

 private:
  std::shared_ptr<Communicator> inner_;
};

// reduce_buckets: 3 over the net's 225 trained values (ip weights 180 and
// bias 5, conv weights 36 and bias 4) makes buckets of at least 75: the ip
// weights fill one and start during backward; the ip bias and the conv's 40
// go after it. The steps are still those of one
// solver with the ranks' batches together, in every recipe.
TEST_F(ParallelSolverTest, BucketsStartDuringBackwardInReverseLayerOrder) {
  for (const test::Recipe& recipe : test::DataParallelRecipes()) {
    SCOPED_TRACE(recipe.name);
    const int B = 3, steps = 4;
    std::vector<std::shared_ptr<Communicator>> local = LocalGroup(2);
    std::vector<std::shared_ptr<StartedSums>> comms = {std::make_shared<StartedSums>(local[0]),
                                                       std::make_shared<StartedSums>(local[1])};
    std::vector<std::vector<float>> before(2), after(2);
    std::vector<std::vector<int64_t>> in_backward(2);  // buckets started when each backward ended
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        auto s = test::MakeSolver(test::DataParallelSolver(recipe.iter_size, str_cat(recipe.solver, " reduce_buckets: 3")),
                                  test::DataParallelNet(db(), B, recipe.storage), comms[static_cast<size_t>(r)]);
        s->set_after_backward([&, r](Solver&) {
          in_backward[static_cast<size_t>(r)].push_back(static_cast<int64_t>(comms[static_cast<size_t>(r)]->started.size()));
        });
        s->SyncParameters();
        before[static_cast<size_t>(r)] = test::Weights(s.get());
        s->Step(steps);
        after[static_cast<size_t>(r)] = test::Weights(s.get());
        EXPECT_EQ(s->gradient_sums(), 2 * steps);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < 2; ++r) {
      const StartedSums& c = *comms[static_cast<size_t>(r)];
      EXPECT_EQ(c.started, (std::vector<int64_t>{180, 45, 180, 45, 180, 45, 180, 45})) << "rank " << r;
      EXPECT_EQ(in_backward[static_cast<size_t>(r)], (std::vector<int64_t>{1, 3, 5, 7}))
          << "rank " << r << ": the ip weights' bucket did not start during backward";
      EXPECT_EQ(c.waits, steps);
    }
    EXPECT_EQ(after[0], after[1]);
    test::ExpectStepOfTheirBatchTogether(recipe, db(), 2, B, steps, before[0], after[0]);
  }
}

TEST_F(ParallelSolverTest, RankZeroAloneSnapshotsAndAResumeIsBitIdentical) {
  const std::string solver = str_cat("base_lr: 0.05 lr_policy: 'fixed' momentum: 0.9 max_iter: 4 display: 0 "
                                     "random_seed: 9 snapshot: 2 snapshot_prefix: '", prefix(), "' "
                                     "test_iter: 1 test_interval: 2 test_net_param { "
                                     "layer { name: 'data' type: 'Data' top: 'data' top: 'label' "
                                     "data_param { source: '", db(), "' batch_size: 4 } } "
                                     "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' "
                                     "inner_product_param { num_output: 5 } } "
                                     "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' "
                                     "top: 'loss' } }");
  const std::string net = test::DataParallelNet(db(), 3, FLOAT, /*dropout=*/true);
  std::vector<std::vector<float>> through(2), resumed(2);
  std::vector<size_t> test_nets(2);
  RunRanks({-1, -1}, [&](const Rank& rank) {
    auto s = test::MakeSolver(solver, net, rank.comm, rank.ctx);
    s->Solve();
    through[static_cast<size_t>(rank.rank)] = test::Weights(s.get());
  });
  EXPECT_TRUE(fs::exists(prefix() + "_iter_2.caffemodel"));
  EXPECT_TRUE(fs::exists(prefix() + "_iter_4.solverstate"));
  RunRanks({-1, -1}, [&](const Rank& rank) {
    auto s = test::MakeSolver(solver, net, rank.comm, rank.ctx);
    test_nets[static_cast<size_t>(rank.rank)] = s->test_nets().size();
    s->Solve(prefix() + "_iter_2.solverstate");
    EXPECT_EQ(s->iter(), 4);
    resumed[static_cast<size_t>(rank.rank)] = test::Weights(s.get());
  });
  EXPECT_EQ(test_nets, (std::vector<size_t>{1, 1})) << "every rank tests its share";
  EXPECT_EQ(through[0], through[1]);
  EXPECT_EQ(resumed[0], through[0]) << "the resumed run left the run that never stopped";
  EXPECT_EQ(resumed[1], through[1]);
}

#ifdef CORTADO_USE_HDF5
// HDF5Data on two ranks: each reads its shard (rank r's row i of a step is
// row 2i + r of one reader with the batch of both), which an HDF5Output on
// each rank records in a file of its own (out.h5, out_rank1.h5); the step
// equals that of the one reader.
TEST_F(ParallelSolverTest, Hdf5DataShardsAcrossRanksAndEachRankWritesItsOwnOutput) {
  const fs::path dir = fs::path(db()).parent_path();
  std::vector<double> x(40 * 3), y(40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * static_cast<double>(i));
  for (size_t r = 0; r < y.size(); ++r) y[r] = static_cast<double>(r);  // a row's label is its index
  test::WriteH5((dir / "xy.h5").string(), {{"x", {40, 3}, x, H5T_IEEE_F32LE}, {"y", {40, 1}, y, H5T_IEEE_F32LE}});
  std::ofstream(dir / "list.txt") << (dir / "xy.h5").string() << "\n";
  auto net = [&](int batch, const std::string& out) {
    return str_cat("layer { name: 'd' type: 'HDF5Data' top: 'x' top: 'y' hdf5_data_param { source: '",
                   (dir / "list.txt").string(), "' batch_size: ", batch, " shuffle: true } } ",
                   "layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'p' inner_product_param { num_output: 1 ",
                   "weight_filler { type: 'gaussian' std: 0.1 } } } ",
                   "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'p' bottom: 'y' top: 'loss' loss_weight: 0.001 } ",
                   "layer { name: 'out' type: 'HDF5Output' bottom: 'x' bottom: 'y' hdf5_output_param { file_name: '",
                   (dir / out).string(), "' } }");
  };
  const std::string solver = test::DataParallelSolver(1, "");
  const int B = 3, steps = 4;
  std::vector<std::vector<float>> after(2);
  RunRanks({-1, -1}, [&](const Rank& rank) {
    auto s = test::MakeSolver(solver, net(B, "out.h5"), rank.comm, rank.ctx);
    s->SyncParameters();
    s->Step(steps);
    after[static_cast<size_t>(rank.rank)] = test::Weights(s.get());
  });
  auto one = test::MakeSolver(solver, net(2 * B, "one.h5"), nullptr);
  one->Step(steps);
  std::vector<hsize_t> dims;
  const std::vector<float> labels = test::ReadH5((dir / "one.h5").string(), "label", &dims);
  ASSERT_EQ(dims, (std::vector<hsize_t>{2 * B * steps, 1}));
  for (int r = 0; r < 2; ++r) {
    const std::string file = (dir / (r == 0 ? "out.h5" : "out_rank1.h5")).string();
    const std::vector<float> mine = test::ReadH5(file, "label", &dims);
    ASSERT_EQ(dims, (std::vector<hsize_t>{B * steps, 1})) << file;
    for (int step = 0; step < steps; ++step)
      for (int i = 0; i < B; ++i)
        EXPECT_EQ(mine[static_cast<size_t>(step * B + i)], labels[static_cast<size_t>(step * 2 * B + 2 * i + r)])
            << "rank " << r << " step " << step << " row " << i;
  }
  EXPECT_EQ(after[0], after[1]);
  const std::vector<float> w = test::Weights(one.get());
  ASSERT_EQ(w.size(), after[0].size());
  for (size_t k = 0; k < w.size(); ++k) EXPECT_NEAR(after[0][k], w[k], 1e-5 * (1 + std::fabs(w[k]))) << "weight " << k;
}
#endif

// The ranks share the test: each runs half of test_iter on its shard, and
// together they score what one solver testing alone scores, phase after
// phase (the second phase reads on where the first stopped).
TEST_F(ParallelSolverTest, TheRanksTestTogetherAsOneSolverTestsAlone) {
  const std::string solver = str_cat("base_lr: 0.05 lr_policy: 'fixed' max_iter: 1 display: 0 random_seed: 9 "
                                     "test_iter: 4 test_interval: 100 test_net_param { "
                                     "layer { name: 'data' type: 'Data' top: 'data' top: 'label' "
                                     "data_param { source: '", db(), "' batch_size: 3 } } "
                                     "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' "
                                     "inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 1 } } } "
                                     "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' "
                                     "top: 'loss' } "
                                     "layer { name: 'acc' type: 'Accuracy' bottom: 'ip' bottom: 'label' top: 'acc' } }");
  const std::string net = test::DataParallelNet(db(), 3, FLOAT);
  auto alone = test::MakeSolver(solver, net, nullptr);
  const std::vector<double> want1 = alone->TestAll(), want2 = alone->TestAll();
  ASSERT_EQ(want1.size(), 2u);  // loss, accuracy
  EXPECT_NE(want1, want2) << "both phases read the same records: the second shows nothing";
  std::vector<std::vector<double>> got1(2), got2(2);
  RunRanks({-1, -1}, [&](const Rank& rank) {
    auto s = test::MakeSolver(solver, net, rank.comm, rank.ctx);
    got1[static_cast<size_t>(rank.rank)] = s->TestAll();
    got2[static_cast<size_t>(rank.rank)] = s->TestAll();
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(got1[r].size(), 2u);
    ASSERT_EQ(got2[r].size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_NEAR(got1[r][k], want1[k], 1e-6 * std::fabs(want1[k]) + 1e-9) << "rank " << r << ", output " << k;
      EXPECT_NEAR(got2[r][k], want2[k], 1e-6 * std::fabs(want2[k]) + 1e-9) << "rank " << r << ", output " << k;
    }
  }
  EXPECT_EQ(got1[0], got1[1]) << "the ranks disagree on the scores";
}

// Each rank's BatchNorm gathers running statistics on its own shard; a test
// phase first gives every rank rank 0's, so that the ranks test one model
// (the one rank 0 snapshots).
TEST_F(ParallelSolverTest, TheRanksTestWithRankZerosBatchNormStatistics) {
  auto net = [&](bool test) {
    return str_cat("layer { name: 'data' type: 'Data' top: 'data' top: 'label' data_param { source: '", db(),
                   "' batch_size: 3 } } "
                   "layer { name: 'bn' type: 'BatchNorm' bottom: 'data' top: 'bn' } "
                   "layer { name: 'ip' type: 'InnerProduct' bottom: 'bn' top: 'ip' "
                   "inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 0.1 } } } "
                   "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }",
                   test ? " layer { name: 'acc' type: 'Accuracy' bottom: 'ip' bottom: 'label' top: 'acc' }" : "");
  };
  const std::string solver = str_cat("base_lr: 0.05 lr_policy: 'fixed' max_iter: 2 display: 0 random_seed: 4 "
                                     "test_iter: 2 test_interval: 100 test_net_param { ", net(true), " }");
  // The BatchNorm's blobs (mean, variance, factor), before and after the test.
  std::vector<std::vector<float>> trained(2), tested(2);
  auto statistics = [](Solver* s) {
    std::vector<float> v;
    for (const auto& b : s->net()->layers()[1]->blobs()) {
      const float* p = b->data().data<float>();
      v.insert(v.end(), p, p + b->count());
    }
    return v;
  };
  RunRanks({-1, -1}, [&](const Rank& rank) {
    auto s = test::MakeSolver(solver, net(false), rank.comm, rank.ctx);
    ASSERT_EQ(s->net()->layers()[1]->type(), std::string("BatchNorm"));
    s->Step(2);
    trained[static_cast<size_t>(rank.rank)] = statistics(s.get());
    s->TestAll();
    tested[static_cast<size_t>(rank.rank)] = statistics(s.get());
  });
  EXPECT_NE(trained[0], trained[1]) << "the shards gave the same statistics: the test shows nothing";
  EXPECT_EQ(tested[0], trained[0]);
  EXPECT_EQ(tested[1], trained[0]) << "rank 1 tested with its own statistics";
}

TEST_F(ParallelSolverTest, ASignalSeenByRankZeroStopsEveryRankAtTheSameIteration) {
  std::vector<int> iters(2);
  RunRanks({-1, -1}, [&](const Rank& rank) {
    auto s = test::MakeSolver("base_lr: 0.01 lr_policy: 'fixed' max_iter: 10 display: 0 random_seed: 5",
                              test::DataParallelNet(db(), 2, FLOAT), rank.comm, rank.ctx);
    int calls = 0;
    if (rank.rank == 0) s->set_action_function([&] { return ++calls == 3 ? SolverAction::STOP : SolverAction::NONE; });
    s->Step(10);
    iters[static_cast<size_t>(rank.rank)] = s->iter();
  });
  EXPECT_EQ(iters, (std::vector<int>{3, 3}));
}

#ifdef CORTADO_USE_OPENCV
// The solver shards ImageData layers as it shards Data layers: rank r of R
// reads shard r of R of the list, in training and in testing.
TEST_F(ParallelSolverTest, TheRanksReadTheirShardOfAnImageList) {
  const fs::path dir = fs::path(db()).parent_path();
  {
    std::ofstream list(dir / "list.txt");
    for (int i = 0; i < 4; ++i) {
      cv::imwrite((dir / str_cat(i, ".png")).string(), cv::Mat(6, 6, CV_8UC1, cv::Scalar(40 * i)));
      list << (dir / str_cat(i, ".png")).string() << " " << i << "\n";
    }
  }
  const std::string images = str_cat("layer { name: 'data' type: 'ImageData' top: 'data' top: 'label' "
                                     "image_data_param { source: '", (dir / "list.txt").string(),
                                     "' batch_size: 2 is_color: false } } "
                                     "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' "
                                     "inner_product_param { num_output: 5 } } "
                                     "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' "
                                     "top: 'loss' }");
  std::vector<std::pair<uint32_t, uint32_t>> train(2), test(2);
  RunRanks({-1, -1}, [&](const Rank& rank) {
    auto s = test::MakeSolver(str_cat("base_lr: 0.01 lr_policy: 'fixed' max_iter: 1 display: 0 random_seed: 3 "
                                      "test_iter: 2 test_interval: 1 test_net_param { ", images, " }"),
                              images, rank.comm, rank.ctx);
    const ImageDataParameter& t = s->net()->layers()[0]->layer_param().image_data_param();
    const ImageDataParameter& v = s->test_nets()[0]->layers()[0]->layer_param().image_data_param();
    train[static_cast<size_t>(rank.rank)] = {t.shard_id(), t.num_shards()};
    test[static_cast<size_t>(rank.rank)] = {v.shard_id(), v.num_shards()};
    s->Step(1);
  });
  const std::vector<std::pair<uint32_t, uint32_t>> want = {{0, 2}, {1, 2}};
  EXPECT_EQ(train, want);
  EXPECT_EQ(test, want);
}
#endif

using test::LogLines;

// Rank 0 displays the ranks' mean loss and train outputs, not its own shard's.
TEST_F(ParallelSolverTest, TheDisplayedLossIsTheRanksMean) {
  std::vector<double> own(2);
  std::vector<std::string> lines;
  {
    LogLines log;
    RunRanks({-1, -1}, [&](const Rank& rank) {
      auto s = test::MakeSolver("base_lr: 0.05 lr_policy: 'fixed' max_iter: 3 display: 3 random_seed: 5 "
                                "average_loss: 1 snapshot_after_train: false",
                                test::DataParallelNet(db(), 3, FLOAT), rank.comm, rank.ctx);
      s->Step(4);  // displays at iteration 3, with the loss of that iteration alone (average_loss 1)
      own[static_cast<size_t>(rank.rank)] = s->smoothed_loss();
    });
    lines = log.lines();
  }
  ASSERT_GT(std::fabs(own[0] - own[1]), 1e-3) << "the ranks' shards gave the same loss: the test shows nothing";
  const double mean = (own[0] + own[1]) / 2, tol = 1e-5 * std::fabs(mean);
  int shown = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t at = lines[i].find("Iteration 3, loss = ");
    if (at == std::string::npos) continue;
    ++shown;
    EXPECT_NEAR(std::stod(lines[i].substr(at + 20)), mean, tol) << lines[i];
    // The train net's output is the loss: the next line shows the same mean.
    ASSERT_LT(i + 1, lines.size());
    const size_t out = lines[i + 1].find("Train net output #0: loss = ");
    ASSERT_NE(out, std::string::npos) << lines[i + 1];
    EXPECT_NEAR(std::stod(lines[i + 1].substr(out + 28)), mean, tol) << lines[i + 1];
  }
  EXPECT_EQ(shown, 1) << "rank 0 alone displays";
}

// The trainer's `--gpu=0,0`: two ranks of one process on device 0 (the
// threads engine: NCCL takes one rank per device), rank 0 logging and
// snapshotting.
TEST_F(ParallelSolverTest, TrainerTrainsTwoRanksOnGpu0InOneProcess) {
  if (DeviceCount() < 1) GTEST_SKIP() << "no CUDA device";
  const std::string net = prefix() + "_net.prototxt", solver = prefix() + "_solver.prototxt";
  std::ofstream(net) << test::DataParallelNet(db(), 4, FLOAT16);
  std::ofstream(solver) << "net: '" << net << "'\nbase_lr: 0.05 lr_policy: 'fixed' momentum: 0.9 max_iter: 20\n"
                        << "display: 10 snapshot: 20 snapshot_prefix: '" << prefix() << "'\n";
  const test::CommandRun r = test::RunCommand(str_cat("timeout 100 '", test::TrainerPath(), "' train --solver=", solver, " --gpu=0,0"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Training on 2 GPUs (0,0) in this process, one rank each (threads)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("Iteration 10, loss = "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Optimization Done."), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("shard 1 of 2"), std::string::npos) << "rank 1 logged INFO lines: " << r.output;
  EXPECT_TRUE(fs::exists(prefix() + "_iter_20.caffemodel"));
}

}  // namespace
}  // namespace cortado
