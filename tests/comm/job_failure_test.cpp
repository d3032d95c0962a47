// A job of thread ranks fails as a whole (run_ranks.hpp, comm/
// injected_fault.hpp): when one rank throws in its backward, when its data
// source holds a corrupt record, or when it hangs outside the collectives,
// every other rank stops within seconds naming the failing rank and its
// iteration, RunRanks throws the cause, nothing waits for ever, and the
// snapshot written before the fault still resumes. (The same faults under
// mpirun, kill -9 included: tools/trainer_mpi_test.cpp.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "cortado/comm/communicator.hpp"
#include "cortado/comm/injected_fault.hpp"
#include "cortado/comm/run_ranks.hpp"
#include "cortado/solvers/solver.hpp"
#include "data_parallel_util.hpp"
#include "datum_db.hpp"

namespace cortado {
namespace {

namespace fs = std::filesystem;

class JobFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("cortado_job_failure_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // 60 records of 6x6; `corrupt` (if >= 0) is not a Datum.
  std::string Db(int corrupt = -1) {
    const std::string path = (dir_ / ("db" + std::to_string(corrupt))).string();
    uint32_t state = 777;
    test::WriteRawDatumDb(path, 60, 1, 6, 6, [&](int, int) {
      state = state * 1664525u + 1013904223u;
      return static_cast<uint8_t>(state >> 24);
    }, [](int i) { return i % 5; }, [corrupt](int i) { return i == corrupt; });
    return path;
  }
  std::string prefix() const { return (dir_ / "snap").string(); }
  std::string Solver(int max_iter, double timeout) const {
    return str_cat("base_lr: 0.05 lr_policy: 'fixed' momentum: 0.9 max_iter: ", max_iter,
                   " display: 1 random_seed: 5 snapshot: 3 snapshot_prefix: '", prefix(),
                   "' collective_timeout: ", timeout);
  }

  // Trains 3 CPU ranks; the message RunRanks throws ("" if none) and the
  // seconds it took.
  std::pair<std::string, double> Train(const std::string& solver_text, const std::string& db,
                                       const std::string& fault, double stop_seconds = 60,
                                       const std::string& resume = "") {
    const auto start = std::chrono::steady_clock::now();
    std::string error;
    try {
      RunRanks({-1, -1, -1}, [&](const Rank& rank) {
        SolverParameter sp;
        SourceInfo info;
        ParseTextProto(solver_text, "solver.prototxt", &sp, &info);
        ParseTextProto(test::DataParallelNet(db, 4, FLOAT), "net.prototxt", sp.mutable_net_param());
        SolverSetup setup(rank.ctx);
        setup.comm = rank.comm;
        setup.fault = ParseInjectedFault(fault);
        auto s = Solver::Create(sp, info, setup);
        s->Solve(resume);
      }, RankEngine::kThreads, stop_seconds);
    } catch (const Error& e) {
      error = e.what();
    }
    return {error, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  }

  fs::path dir_;
};

TEST_F(JobFailure, ARankThatThrowsInBackwardEndsTheJobAndTheSnapshotResumes) {
  const std::string db = Db();
  const auto [error, seconds] = Train(Solver(8, 60), db, "1:4:throw");
  EXPECT_NE(error.find("rank 1 of 3 failed at iteration 4 (forward and backward): "), std::string::npos) << error;
  EXPECT_NE(error.find("the injected fault (1:4:throw) in the backward of layer 'relu'"), std::string::npos) << error;
  EXPECT_LT(seconds, 60) << error;
  EXPECT_EQ(ranks_left_running(), 0);
  // The snapshot of iteration 3 was written whole, and none after.
  EXPECT_TRUE(fs::exists(prefix() + "_iter_3.caffemodel"));
  EXPECT_FALSE(fs::exists(prefix() + "_iter_6.caffemodel"));
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << "a partial file: " << e.path();
  const auto [resumed, _] = Train(Solver(6, 60), db, "", 60, prefix() + "_iter_3.solverstate");
  EXPECT_EQ(resumed, "") << "the job resumes from the last snapshot";
  EXPECT_TRUE(fs::exists(prefix() + "_iter_6.caffemodel"));
}

TEST_F(JobFailure, ACorruptRecordInOneRanksShardEndsTheJobNamingIt) {
  // Rank r of 3 reads records 3p + r; batch 4 of rank 1 (iteration 4) reads
  // its positions 16..19, records 49, 52, 55, 58.
  const auto [error, seconds] = Train(Solver(8, 60), Db(52), "");
  EXPECT_NE(error.find("rank 1 of 3 failed at iteration 4 (forward and backward): "), std::string::npos) << error;
  EXPECT_NE(error.find("record '00000052': not a Datum"), std::string::npos) << error;
  EXPECT_LT(seconds, 60) << error;
}

TEST_F(JobFailure, ARankThatHangsEndsTheOthersAfterTheCollectiveTimeout) {
  const auto [error, seconds] = Train(Solver(8, 2), Db(), "2:4:hang", /*stop_seconds=*/2);
  // Ranks 0 and 1 wait for rank 2 in the display's mean (display: 1),
  // the first collective after backward; the first to give up names where
  // rank 2 is, and rank 2, stuck, is left running.
  EXPECT_NE(error.find(" of 3 waited 2 s (collective_timeout) in a collective at iteration 4 (the display"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("for rank 2 at iteration 4 (forward and backward), which never came: the job is ended"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("rank 2 did not stop within 2 s (it is at iteration 4 (forward and backward)) and is left "
                       "running"),
            std::string::npos)
      << error;
  EXPECT_EQ(ranks_left_running(), 1);
  EXPECT_GE(seconds, 2);
  EXPECT_LT(seconds, 30) << error;
}

TEST(InjectedFault, ParsesTheFlagAndRefusesWhatItIsNot) {
  const InjectedFault f = ParseInjectedFault("1:12:kill");
  EXPECT_EQ(f.rank, 1);
  EXPECT_EQ(f.iteration, 12);
  EXPECT_EQ(f.action, InjectedFault::kKill);
  EXPECT_FALSE(ParseInjectedFault("").armed());
  for (const char* bad : {"1:12", "1:12:explode", "-1:3:throw", "a:3:throw", "1:3:throw:4"}) {
    try {
      ParseInjectedFault(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(str_cat("--inject_fault=", bad, ": expected RANK:ITERATION:ACTION")),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace cortado
