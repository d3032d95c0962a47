// `mpirun -np 2 trainer train`: the real launcher, the real trainer, a real
// LMDB. The ranks train together (rank 0 logs the images/s of both), one
// snapshot is written, and a bad solver file ends the whole job with the
// file:line message and a non-zero status instead of a hang. Skipped in a
// build without MPI. (The arithmetic of the ranks' step is checked in
// mpi_test.cpp, which runs under mpirun itself.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "cortado/comm/communicator.hpp"
#include "cortado/config.hpp"
#include "command.hpp"
#include "datum_db.hpp"
#include "test_paths.hpp"

namespace cortado {
namespace {

namespace fs = std::filesystem;

// Two ranks of the trainer under Open MPI's mpirun (as root it needs the two
// variables; --oversubscribe lets 2 ranks share a 1-core machine).
test::CommandRun mpirun(const std::string& args) {
#ifdef CORTADO_MPIRUN
  return test::RunCommand(std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GLOG_logtostderr=1 ") +
                          "timeout 300 '" + CORTADO_MPIRUN + "' --oversubscribe -np 2 '" + test::TrainerPath() + "' " + args);
#else
  (void)args;
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

// The trainer needs MPI only when the launcher started several ranks: a
// single task (srun with one task, mpirun -np 1) trains alone, even in a
// build without MPI.
TEST(LauncherRanks, ReadsTheLaunchersEnvironment) {
  const char* names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS"};
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* n : names) {
    if (const char* v = std::getenv(n)) saved.emplace_back(n, v);
    ::unsetenv(n);
  }
  EXPECT_EQ(LauncherRanks(), 1);
  ::setenv("SLURM_NTASKS", "4", 1);
  EXPECT_EQ(LauncherRanks(), 1) << "a Slurm allocation alone launches nothing";
  ::setenv("PMIX_RANK", "0", 1);
  EXPECT_EQ(LauncherRanks(), 4);
  ::setenv("PMI_SIZE", "2", 1);
  EXPECT_EQ(LauncherRanks(), 2);
  ::setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
  EXPECT_EQ(LauncherRanks(), 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
  EXPECT_EQ(LauncherRanks(), 8);
  for (const char* n : names) ::unsetenv(n);
  for (const auto& [n, v] : saved) ::setenv(n.c_str(), v.c_str(), 1);
}

}  // namespace
}  // namespace cortado
