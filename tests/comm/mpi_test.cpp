// Data-parallel training over real MPI ranks. This binary is its own MPI
// program: ctest starts it with `mpirun -np 2`, every rank runs every test
// in the same order (the collectives inside must match), and the exit
// status is the worst rank's.
//
// What it shows:
// - the MPI engine's sums (float, double, float16 with one rounding per
//   sum, Inf and NaN carried), broadcast and max;
// - a solver step on R ranks with batch B each equals the step of one
//   solver with batch R * B, for FP32, for FP16 storage with FP32 master
//   weights, with iter_size, and with dynamic loss scaling and clipping,
//   and leaves the ranks with the same bits;
// - the same with NCCL over MPI on GPU ranks (one GPU per rank; skipped
//   without them);
// - every rank tests its share, rank 0 alone snapshots; a signal seen by
//   one rank stops all at the same iteration; an unset random_seed is
//   shared; a resumed run is bit-identical on every rank, dropout included.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "cortado/comm/communicator.hpp"
#include "cortado/context.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/util/device.hpp"
#include "data_parallel_util.hpp"
#include "datum_db.hpp"

namespace cortado {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<Communicator> world() { return MpiWorld(); }

TEST(MpiCommunicator, SumsEveryTypeInPlace) {
  auto comm = world();
  const int r = comm->rank(), n = comm->size();
  std::vector<float> f(1003);
  std::vector<double> d(1003);
  for (size_t i = 0; i < f.size(); ++i) f[i] = d[i] = 1000.0 * r + static_cast<double>(i);
  comm->AllReduceSum(f.data(), static_cast<int64_t>(f.size()), FLOAT);
  comm->AllReduceSum(d.data(), static_cast<int64_t>(d.size()), DOUBLE);
  const double ranks_sum = 1000.0 * n * (n - 1) / 2;
  for (size_t i = 0; i < f.size(); ++i) {
    ASSERT_EQ(f[i], static_cast<float>(ranks_sum + n * static_cast<double>(i))) << i;
    ASSERT_EQ(d[i], ranks_sum + n * static_cast<double>(i)) << i;
  }
  // float16: exact sums, one rounding per sum (2048 + 1 is not a float16:
  // it rounds to even, 2048), and Inf and NaN carried to every rank.
  std::vector<float16> h = {float16(0.25f * (r + 1)), float16(r == 0 ? 2048.0f : 1.0f / (n - 1)),
                            float16(r == 0 ? std::numeric_limits<float>::infinity() : 1.0f),
                            float16(r == n - 1 ? std::numeric_limits<float>::quiet_NaN() : 1.0f)};
  comm->AllReduceSum(h.data(), static_cast<int64_t>(h.size()), FLOAT16);
  EXPECT_EQ(static_cast<float>(h[0]), 0.25f * n * (n + 1) / 2);
  if (n == 2) EXPECT_EQ(static_cast<float>(h[1]), 2048.0f);  // 2048 + 1 rounds to 2048 in float16
  EXPECT_TRUE(isinf(h[2]));
  EXPECT_TRUE(isnan(h[3]));
  // bfloat16 likewise (256 + 1 rounds to 256).
  std::vector<bfloat16> bf = {bfloat16(0.25f * (r + 1)), bfloat16(r == 0 ? 256.0f : 1.0f / (n - 1)),
                              bfloat16(r == 0 ? std::numeric_limits<float>::infinity() : 1.0f),
                              bfloat16(r == n - 1 ? std::numeric_limits<float>::quiet_NaN() : 1.0f)};
  comm->AllReduceSum(bf.data(), static_cast<int64_t>(bf.size()), BFLOAT16);
  EXPECT_EQ(static_cast<float>(bf[0]), 0.25f * n * (n + 1) / 2);
  if (n == 2) EXPECT_EQ(static_cast<float>(bf[1]), 256.0f);
  EXPECT_TRUE(isinf(bf[2]));
  EXPECT_TRUE(isnan(bf[3]));
}

TEST(MpiCommunicator, BroadcastAndMax) {
  auto comm = world();
  const int r = comm->rank(), n = comm->size();
  std::vector<int32_t> v(257, r == n - 1 ? 7 : -1);
  comm->Broadcast(v.data(), static_cast<int64_t>(v.size() * sizeof(int32_t)), n - 1);
  for (int32_t x : v) ASSERT_EQ(x, 7);
  EXPECT_EQ(comm->Max(r), n - 1);
  EXPECT_EQ(comm->Max(-r), 0);
}

// A small LMDB written by rank 0 into a directory every rank agrees on.
class SharedDb {
 public:
  SharedDb() {
    auto comm = world();
    const int64_t pid = comm->Max(comm->rank() == 0 ? ::getpid() : 0);
    dir_ = fs::path(::testing::TempDir()) / ("cortado_mpi_test_" + std::to_string(pid));
    if (comm->rank() == 0) {
      fs::remove_all(dir_);
      fs::create_directories(dir_);
      uint32_t state = 12345;  // a linear congruential sequence: noise-like pixels
      test::WriteRawDatumDb((dir_ / "db").string(), 32, 1, 6, 6, [&](int, int) {
        state = state * 1664525u + 1013904223u;
        return static_cast<uint8_t>(state >> 24);
      }, [](int i) { return i % 5; });
    }
    comm->Max(0);  // a barrier: the database is complete before anyone opens it
  }
  ~SharedDb() {
    world()->Max(0);  // everyone is done with it
    std::error_code ec;
    if (world()->rank() == 0) fs::remove_all(dir_, ec);
  }
  std::string db() const { return (dir_ / "db").string(); }
  std::string prefix() const { return (dir_ / "snap").string(); }

 private:
  fs::path dir_;
};

using test::MakeSolver;
using test::Recipe;
using test::Weights;

std::string NetText(const std::string& db, int batch, Type storage = FLOAT, bool dropout = false) {
  return test::DataParallelNet(db, batch, storage, dropout);
}

class DataParallel : public ::testing::TestWithParam<Recipe> {
 protected:
  // Trains the recipe on this rank (with `comm`, on `ctx`) and checks the
  // ranks' step against one solver with their batches together.
  void ExpectRanksStepTogether(std::shared_ptr<Communicator> comm, std::shared_ptr<const Context> ctx = nullptr);
};

TEST_P(DataParallel, StepOfTheRanksIsTheStepOfTheirBatchTogether) { ExpectRanksStepTogether(world()); }

// mpirun's GPU ranks: NCCL sums the gradients (bootstrapped through MPI,
// which carries the host collectives), each rank on the GPU at its place
// among its machine's ranks.
TEST_P(DataParallel, NcclOverMpiStepIsTheStepOfTheirBatchTogether) {
  auto host = world();
  if (!NcclBuilt()) GTEST_SKIP() << "no NCCL in this build";
  // Each rank takes the GPU at its place on its machine; all skip or none.
  const int device = MpiLocalRank();
  if (host->Max(device < DeviceCount() ? 0 : 1) != 0) GTEST_SKIP() << "needs a CUDA device per rank of a machine";
  auto ctx = Context::Create(device);
  auto comm = NcclOverHost(host, device);
  EXPECT_STREQ(comm->engine(), "NCCL");
  EXPECT_EQ(comm->rank(), host->rank());
  EXPECT_TRUE(comm->reduces_device_memory());
  ExpectRanksStepTogether(comm, ctx);
}

void DataParallel::ExpectRanksStepTogether(std::shared_ptr<Communicator> comm, std::shared_ptr<const Context> ctx) {
  const int n = comm->size();
  const Recipe& recipe = GetParam();
  SharedDb db;
  const int B = 3, steps = 4;
  auto ranked = MakeSolver(test::DataParallelSolver(recipe.iter_size, recipe.solver), NetText(db.db(), B, recipe.storage),
                           comm, std::move(ctx));
  ranked->SyncParameters();
  const std::vector<float> before = Weights(ranked.get());
  ranked->Step(steps);
  const std::vector<float> mine = Weights(ranked.get());

  // Every rank ends with the last rank's bits.
  std::vector<float> last = mine;
  comm->Broadcast(last.data(), static_cast<int64_t>(last.size() * sizeof(float)), n - 1);
  EXPECT_EQ(mine, last) << "rank " << comm->rank() << " drifted from rank " << n - 1;

  // One solver alone, batch n * B * iter_size, same seed: the same steps
  // (rank r's k-th batch of a step holds the positions that are r mod n in
  // the k-th n * B of the big batch).
  test::ExpectStepOfTheirBatchTogether(recipe, db.db(), n, B, steps, before, mine);
}

INSTANTIATE_TEST_SUITE_P(Recipes, DataParallel, ::testing::ValuesIn(test::DataParallelRecipes()),
                         [](const ::testing::TestParamInfo<Recipe>& i) { return i.param.name; });

TEST(DataParallelSolver, EveryRankTestsAndRankZeroAloneSnapshots) {
  auto comm = world();
  SharedDb db;
  const std::string net = NetText(db.db(), 2);
  const std::string solver = str_cat("base_lr: 0.01 lr_policy: 'fixed' max_iter: 2 display: 0 snapshot: 2 "
                                     "snapshot_prefix: '", db.prefix(), "' test_iter: 1 test_interval: 2 "
                                     "random_seed: 3 test_net_param { ",
                                     "layer { name: 'data' type: 'Data' top: 'data' top: 'label' "
                                     "data_param { source: '", db.db(), "' batch_size: 4 } } "
                                     "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' "
                                     "inner_product_param { num_output: 5 } } "
                                     "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' "
                                     "top: 'loss' } }");
  auto s = MakeSolver(solver, net, comm);
  EXPECT_EQ(s->test_nets().size(), 1u);
  s->Solve();
  const std::string model = db.prefix() + "_iter_2.caffemodel";
  comm->Max(0);
  EXPECT_TRUE(fs::exists(model)) << model;
  EXPECT_EQ(s->Snapshot().empty(), comm->rank() != 0);
}

TEST(DataParallelSolver, ASignalOnOneRankStopsEveryRankAtTheSameIteration) {
  auto comm = world();
  SharedDb db;
  auto s = MakeSolver("base_lr: 0.01 lr_policy: 'fixed' max_iter: 10 display: 0 random_seed: 5",
                      NetText(db.db(), 2), comm);
  int calls = 0;
  const bool signalled = comm->rank() == comm->size() - 1;
  s->set_action_function([&] { return signalled && ++calls == 3 ? SolverAction::STOP : SolverAction::NONE; });
  s->Step(10);
  EXPECT_EQ(s->iter(), 3);
  EXPECT_TRUE(s->requested_early_exit());
}

// A run resumed from a snapshot is bit for bit the run that never stopped,
// on every rank, with dropout drawing each rank's own masks: the snapshot
// keeps every rank's generator.
TEST(DataParallelSolver, ResumeIsBitIdenticalOnEveryRankWithDropout) {
  auto comm = world();
  SharedDb db;
  const std::string solver = str_cat("base_lr: 0.05 lr_policy: 'fixed' momentum: 0.9 max_iter: 4 display: 0 "
                                     "random_seed: 9 snapshot: 2 snapshot_prefix: '", db.prefix(), "'");
  const std::string net = NetText(db.db(), 3, FLOAT, /*dropout=*/true);
  auto through = MakeSolver(solver, net, comm);
  through->Solve();
  const std::vector<float> want = Weights(through.get());
  auto resumed = MakeSolver(solver, net, comm);
  resumed->Solve(db.prefix() + "_iter_2.solverstate");
  EXPECT_EQ(resumed->iter(), 4);
  EXPECT_EQ(Weights(resumed.get()), want);
}

TEST(DataParallelSolver, AnUnsetSeedIsRankZerosAndTheWeightsStartEqual) {
  auto comm = world();
  SharedDb db;
  auto s = MakeSolver("base_lr: 0.01 lr_policy: 'fixed' max_iter: 1 display: 0", NetText(db.db(), 2), comm);
  const int64_t seed = s->param().random_seed();
  EXPECT_GE(seed, 0);
  EXPECT_EQ(comm->Max(seed), -comm->Max(-seed)) << "the ranks disagree on the seed";
  s->SyncParameters();
  std::vector<float> mine = Weights(s.get()), first = mine;
  comm->Broadcast(first.data(), static_cast<int64_t>(first.size() * sizeof(float)), 0);
  EXPECT_EQ(mine, first);
}

}  // namespace
}  // namespace cortado

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_minloglevel = google::WARNING;
  std::shared_ptr<cortado::Communicator> comm = cortado::MpiWorld();
  if (comm->size() < 2) {
    std::fprintf(stderr, "%s: start it with mpirun -np 2 (or more)\n", argv[0]);
    return 1;
  }
  const int failed = RUN_ALL_TESTS();
  // Every rank ran the same tests; the job fails if any rank failed.
  return static_cast<int>(comm->Max(failed));
}
