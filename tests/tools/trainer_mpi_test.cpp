// `mpirun -np 2 trainer train`: the real launcher, the real trainer, a real
// LMDB. The ranks train together (rank 0 logs the images/s of both), one
// snapshot is written, and a bad solver file ends the whole job with the
// file:line message and a non-zero status instead of a hang. Skipped in a
// build without MPI. (The arithmetic of the ranks' step is checked in
// mpi_test.cpp, which runs under mpirun itself.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "cortado/comm/communicator.hpp"
#include "cortado/comm/machine_ranks.hpp"
#include "cortado/config.hpp"
#include "command.hpp"
#include "datum_db.hpp"
#include "test_paths.hpp"

namespace cortado {
namespace {

namespace fs = std::filesystem;

// `ranks` ranks of the trainer under Open MPI's mpirun (as root it needs the
// two variables; --oversubscribe lets the ranks share a small machine).
test::CommandRun mpirun(const std::string& args, int ranks = 2) {
#ifdef CORTADO_MPIRUN
  return test::RunCommand(std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GLOG_logtostderr=1 ") +
                          "timeout 300 '" + CORTADO_MPIRUN + "' --oversubscribe -np " + std::to_string(ranks) + " '" +
                          test::TrainerPath() + "' " + args);
#else
  (void)args, (void)ranks;
  return {};
#endif
}

class TrainerMpi : public ::testing::Test {
 protected:
  void SetUp() override {
#if !defined(CORTADO_MPIRUN) || !defined(CORTADO_USE_MPI)
    GTEST_SKIP() << "built without MPI (or without mpirun)";
#else
    // A copy of the tests on a machine without Open MPI (the GPU bundle).
    if (!fs::exists(CORTADO_MPIRUN)) GTEST_SKIP() << CORTADO_MPIRUN << " not found on this machine";
#endif
    dir_ = fs::path(::testing::TempDir()) / ("cortado_trainer_mpi_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    test::WriteRawDatumDb((dir_ / "db").string(), 40, 1, 4, 4,
                          [](int i, int k) { return static_cast<uint8_t>((i * 37 + k * 11) % 256); },
                          [](int i) { return i % 3; });
    std::ofstream(dir_ / "net.prototxt") << "layer { name: 'data' type: 'Data' top: 'data' top: 'label'\n"
                                         << "  transform_param { scale: 0.00390625 }\n"
                                         << "  data_param { source: '" << (dir_ / "db").string()
                                         << "' batch_size: 4 } }\n"
                                         << "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'\n"
                                         << "  inner_product_param { num_output: 3 weight_filler { type: 'xavier' } } }\n"
                                         << "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' "
                                         << "top: 'loss' }\n";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(TrainerMpi, TwoRanksTrainTogetherAndRankZeroSnapshots) {
  std::ofstream(path("solver.prototxt")) << "net: '" << path("net.prototxt") << "'\n"
                                         << "base_lr: 0.1 lr_policy: 'fixed' momentum: 0.9 max_iter: 20\n"
                                         << "display: 10 snapshot: 10 snapshot_prefix: '" << path("snap") << "'\n";
  const test::CommandRun r = mpirun("train --solver=" + path("solver.prototxt"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Training on 2 ranks (MPI)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("shard 0 of 2"), std::string::npos) << r.output;  // rank 1 logs warnings only
  EXPECT_NE(r.output.find("Iteration 10, loss = "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Optimization Done."), std::string::npos) << r.output;
  int snapshots = 0;
  for (const auto& e : fs::directory_iterator(dir_)) snapshots += e.path().extension() == ".caffemodel";
  EXPECT_EQ(snapshots, 2) << "iterations 10 and 20, written once each";
  EXPECT_TRUE(fs::exists(path("snap_iter_20.solverstate")));
}

TEST_F(TrainerMpi, ABadSolverEndsTheJobWithTheMessage) {
  std::ofstream(path("solver.prototxt")) << "net: '" << path("net.prototxt") << "'\n"
                                         << "base_lr: 0.1\nlr_policy: 'sometimes'\nmax_iter: 5\n";
  const test::CommandRun r = mpirun("train --solver=" + path("solver.prototxt"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "the job hung: " << r.output;
  EXPECT_NE(r.output.find("solver.prototxt:3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("unknown policy 'sometimes'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" of 2): error:"), std::string::npos) << "the failing rank names itself: " << r.output;
}

// A job of 3 ranks fails as a whole (comm/injected_fault.hpp, DESIGN
// "Across devices"): whatever ends rank 1 (or 2) at iteration 7 of 12, the
// other ranks end soon after, naming it and the iteration, with a non-zero
// status, and the snapshot of iteration 5 stays whole. Each fault is timed:
// the test prints how long the job took to end.
class TrainerMpiFailure : public TrainerMpi {
 protected:
  void SetUp() override {
    TrainerMpi::SetUp();
    if (IsSkipped()) return;
    // Rank r of 3 reads records 3p + r: at iteration 7, rank 1 reads its
    // positions 28..31, records 85, 88, 91, 94.
    WriteDb();
    std::string net;
    {
      std::ifstream in(dir_ / "net.prototxt");
      net.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    const std::string from = (dir_ / "db").string(), to = (dir_ / "db3").string();
    net.replace(net.find(from), from.size(), to);
    std::ofstream(dir_ / "net3.prototxt") << net;
  }
  // Record corrupt_ (if any) is not a Datum.
  void WriteDb() {
    fs::remove_all(dir_ / "db3");
    test::WriteRawDatumDb((dir_ / "db3").string(), 120, 1, 4, 4,
                          [](int i, int k) { return static_cast<uint8_t>((i * 37 + k * 11) % 256); },
                          [](int i) { return i % 3; }, [this](int i) { return i == corrupt_; });
  }
  // Trains 3 ranks for 12 iterations (snapshots at 5 and 10); the run and
  // its seconds.
  std::pair<test::CommandRun, double> Train(const std::string& flags, double timeout = 60) {
    std::ofstream(path("solver3.prototxt")) << "net: '" << path("net3.prototxt") << "'\n"
                                            << "base_lr: 0.1 lr_policy: 'fixed' momentum: 0.9 max_iter: 12\n"
                                            << "display: 1 snapshot: 5 snapshot_prefix: '" << path("snap") << "'\n"
                                            << "collective_timeout: " << timeout << "\n";
    const auto start = std::chrono::steady_clock::now();
    test::CommandRun r = mpirun("train --solver=" + path("solver3.prototxt") + " " + flags, 3);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "[ job      ] " << flags << ": ended with status " << r.status << " after " << seconds << " s\n";
    return {r, seconds};
  }
  // The job ended, non-zero, in time, and the last snapshot resumes.
  void ExpectEndedAsAWhole(const test::CommandRun& r, double seconds, double limit = 60) {
    EXPECT_NE(r.status, 0) << r.output;
    EXPECT_NE(r.status, 124) << "the job hung: " << r.output;
    EXPECT_LT(seconds, limit) << r.output;
    EXPECT_TRUE(fs::exists(path("snap_iter_5.caffemodel"))) << r.output;
    EXPECT_FALSE(fs::exists(path("snap_iter_10.caffemodel"))) << r.output;
    for (const auto& e : fs::directory_iterator(dir_))
      EXPECT_NE(e.path().extension(), ".tmp") << "a partial snapshot: " << e.path();
    if (corrupt_ >= 0) {
      corrupt_ = -1;
      WriteDb();  // the record mended
    }
    const test::CommandRun resumed =
        mpirun("train --solver=" + path("solver3.prototxt") + " --snapshot=" + path("snap_iter_5.solverstate"), 3);
    EXPECT_EQ(resumed.status, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("Optimization Done."), std::string::npos) << resumed.output;
  }

  int corrupt_ = -1;
};

TEST_F(TrainerMpiFailure, ARankThatThrowsInBackwardEndsTheJob) {
  const auto [r, seconds] = Train("--inject_fault=1:7:throw");
  EXPECT_NE(r.output.find("rank 1 of 3 failed at iteration 7 (forward and backward): the injected fault (1:7:throw)"),
            std::string::npos)
      << r.output;
  for (int k : {0, 2})
    EXPECT_NE(r.output.find(str_cat("rank ", k, " of 3 stopped at iteration 7 (")), std::string::npos)
        << "rank " << k << " names where it stopped: " << r.output;
  EXPECT_NE(r.output.find("because rank 1 of 3 failed at iteration 7"), std::string::npos) << r.output;
  ExpectEndedAsAWhole(r, seconds);
}

TEST_F(TrainerMpiFailure, ARankKilledWithSigkillEndsTheJob) {
  const auto [r, seconds] = Train("--inject_fault=1:7:kill");
  // Nothing runs on the killed rank: the launcher ends the others, which
  // say where they were.
  EXPECT_NE(r.output.find("ended by the launcher"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 0: iteration 7, "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  ExpectEndedAsAWhole(r, seconds);
}

TEST_F(TrainerMpiFailure, ACorruptRecordInOneRanksShardEndsTheJob) {
  corrupt_ = 85;
  WriteDb();
  const auto [r, seconds] = Train("");
  EXPECT_NE(r.output.find("rank 1 of 3 failed at iteration 7 (forward and backward): "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("record '00000085': not a Datum"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 0 of 3 stopped at iteration 7"), std::string::npos) << r.output;
  ExpectEndedAsAWhole(r, seconds);
}

TEST_F(TrainerMpiFailure, ARankThatHangsEndsTheJobAfterTheCollectiveTimeout) {
  const auto [r, seconds] = Train("--inject_fault=2:7:hang", /*timeout=*/3);
  EXPECT_NE(r.output.find(" of 3 waited 3 s (collective_timeout) in "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("at iteration 7 ("), std::string::npos) << r.output;
  ExpectEndedAsAWhole(r, seconds, 30);
}

// The launchers' variables, unset for one scope and restored after.
class LauncherEnv {
 public:
  LauncherEnv() {
    for (const char* n : kNames) {
      if (const char* v = std::getenv(n)) saved_.emplace_back(n, v);
      ::unsetenv(n);
    }
  }
  ~LauncherEnv() {
    for (const char* n : kNames) ::unsetenv(n);
    for (const auto& [n, v] : saved_) ::setenv(n.c_str(), v.c_str(), 1);
  }
  static constexpr const char* kNames[] = {
      "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_SIZE", "PMI_RANK",
      "PMI_LOCAL_RANK", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMIX_RANK", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS",
      "SLURM_LOCALID", "SLURM_NODEID", "SLURM_STEP_TASKS_PER_NODE"};

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

// The trainer needs MPI only when the launcher started several ranks: a
// single task (srun with one task, mpirun -np 1) trains alone, even in a
// build without MPI.
TEST(LauncherRanks, ReadsTheLaunchersEnvironment) {
  LauncherEnv clean;
  EXPECT_EQ(LauncherRanks(), 1);
  ::setenv("SLURM_NTASKS", "4", 1);
  EXPECT_EQ(LauncherRanks(), 1) << "a Slurm allocation alone launches nothing";
  ::setenv("PMIX_RANK", "0", 1);
  EXPECT_EQ(LauncherRanks(), 4);
  ::setenv("SLURM_STEP_NUM_TASKS", "16", 1);
  EXPECT_EQ(LauncherRanks(), 16) << "srun's step, not the allocation";
  ::setenv("PMI_SIZE", "2", 1);
  EXPECT_EQ(LauncherRanks(), 2);
  ::setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
  EXPECT_EQ(LauncherRanks(), 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
  EXPECT_EQ(LauncherRanks(), 8);
}

// Where a rank is on its machine, as srun (with PMIx) and mpirun say it,
// set by hand: two nodes of 8 tasks, this one task 13, the 6th of node 1.
TEST(LauncherRanks, SrunAndMpirunPlaceARankOnItsMachine) {
  LauncherEnv clean;
  EXPECT_EQ(MpiLocalRank(), 0);
  ::setenv("PMIX_RANK", "13", 1);
  ::setenv("SLURM_STEP_NUM_TASKS", "16", 1);
  ::setenv("SLURM_LOCALID", "5", 1);
  ::setenv("SLURM_NODEID", "1", 1);
  ::setenv("SLURM_STEP_TASKS_PER_NODE", "8(x2)", 1);
  EXPECT_EQ(LauncherRanks(), 16);
  EXPECT_EQ(MpiLocalRank(), 5) << "its GPU: the 6th of --gpu's list";
  EXPECT_EQ(RanksOnThisMachine(), 8) << "the cores are shared by 8";
  ::setenv("SLURM_STEP_TASKS_PER_NODE", "8,4(x2),3", 1);
  ::setenv("SLURM_NODEID", "2", 1);
  EXPECT_EQ(RanksOnThisMachine(), 4);
  ::setenv("SLURM_NODEID", "3", 1);
  EXPECT_EQ(RanksOnThisMachine(), 3);
  ::setenv("SLURM_STEP_TASKS_PER_NODE", "eight", 1);
  EXPECT_EQ(RanksOnThisMachine(), 1) << "what it cannot read, it does not guess";
  // mpirun's own variables win, under Slurm too.
  ::setenv("OMPI_COMM_WORLD_SIZE", "16", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "8", 1);
  EXPECT_EQ(MpiLocalRank(), 2);
  EXPECT_EQ(RanksOnThisMachine(), 8);
  EXPECT_NO_THROW(CheckLauncher());
}

// srun --mpi=none starts copies MPI cannot connect: refused, with the fix.
TEST(LauncherRanks, SrunWithoutMpiWireUpIsRefusedWithTheFix) {
  LauncherEnv clean;
  EXPECT_NO_THROW(CheckLauncher());
  ::setenv("SLURM_NTASKS", "4", 1);
  EXPECT_NO_THROW(CheckLauncher()) << "sbatch's allocation, the trainer started once in the batch script";
  ::setenv("SLURM_STEP_NUM_TASKS", "1", 1);
  EXPECT_NO_THROW(CheckLauncher()) << "srun with one task";
  ::setenv("SLURM_STEP_NUM_TASKS", "4", 1);
  try {
    CheckLauncher();
    ADD_FAILURE() << "4 unconnected tasks were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("srun started 4 tasks but gave them no MPI wire-up"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("srun --mpi=pmix"), std::string::npos) << e.what();
  }
  ::setenv("PMIX_RANK", "3", 1);
  EXPECT_NO_THROW(CheckLauncher());
  EXPECT_EQ(LauncherRanks(), 4);
}

}  // namespace
}  // namespace cortado
