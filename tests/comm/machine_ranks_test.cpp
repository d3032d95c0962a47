// RanksOnThisMachine / CoresPerRank (comm/machine_ranks.hpp), and the Data
// layer's default workers taking a rank's share of the cores.
#include "cortado/comm/machine_ranks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cortado/comm/run_ranks.hpp"
#include "cortado/data/lmdb.hpp"
#include "cortado/layers/data_layer.hpp"
#include "temp_dir.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

// Sets (or unsets, with nullptr) an environment variable for one scope.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~EnvVar() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

int Cores() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

TEST(MachineRanks, ThreadRanksTimesTheLaunchersLocalRanks) {
  EnvVar ompi("OMPI_COMM_WORLD_LOCAL_SIZE", nullptr), mpich("MPI_LOCALNRANKS", nullptr);
  EXPECT_EQ(RanksOnThisMachine(), 1);
  EXPECT_EQ(CoresPerRank(), Cores());
  {
    ThreadRanksScope scope(4);
    EXPECT_EQ(RanksOnThisMachine(), 4);
    EXPECT_EQ(CoresPerRank(), std::max(1, Cores() / 4));
    EnvVar three("OMPI_COMM_WORLD_LOCAL_SIZE", "3");
    EXPECT_EQ(RanksOnThisMachine(), 12);
  }
  EXPECT_EQ(RanksOnThisMachine(), 1);
  EnvVar two("MPI_LOCALNRANKS", "2");
  EXPECT_EQ(RanksOnThisMachine(), 2);
  EXPECT_EQ(CoresPerRank(), std::max(1, Cores() / 2));
}

TEST(MachineRanks, RunRanksSetsItWhileItsRanksRun) {
  EnvVar ompi("OMPI_COMM_WORLD_LOCAL_SIZE", nullptr), mpich("MPI_LOCALNRANKS", nullptr);
  std::atomic<int> seen_min{100}, seen_max{0};
  RunRanks({-1, -1, -1}, [&](const Rank&) {
    const int r = RanksOnThisMachine();
    seen_min = std::min(seen_min.load(), r);
    seen_max = std::max(seen_max.load(), r);
  });
  EXPECT_EQ(seen_min.load(), 3);
  EXPECT_EQ(seen_max.load(), 3);
  EXPECT_EQ(RanksOnThisMachine(), 1);
}

// A Data layer's default workers: its rank's share of the cores (at most 8,
// at most one per 16 records of its batch); data_param.threads as given.
int DefaultWorkers(const std::string& db, const std::string& data_extra = "") {
  auto layer = std::make_unique<DataLayer<float, float>>(test::MakeParam<test::TypePair<float, float>>(
      str_cat("name: 'data' type: 'Data' top: 'data' top: 'label' data_param { source: '", db,
              "' batch_size: 256 ", data_extra, " } phase: TEST")));
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  return layer->workers();
}

TEST(MachineRanks, DataLayerWorkersTakeTheRanksShareOfTheCores) {
  EnvVar ompi("OMPI_COMM_WORLD_LOCAL_SIZE", nullptr), mpich("MPI_LOCALNRANKS", nullptr);
  test::TempDir dir;
  const std::string db = dir / "db";
  {
    LmdbWriter w(db, 3);
    for (int i = 0; i < 4; ++i) {
      Datum d;
      d.set_channels(1);
      d.set_height(2);
      d.set_width(2);
      d.set_data(std::string(4, static_cast<char>(i)));
      d.set_label(i);
      w.Put(str_cat("k", i), d.SerializeAsString());
    }
    w.Close();
  }
  EXPECT_EQ(DefaultWorkers(db), std::clamp(Cores(), 1, 8));
  {
    ThreadRanksScope many(Cores());  // a rank per core: one worker each
    EXPECT_EQ(DefaultWorkers(db), 1);
    EXPECT_EQ(DefaultWorkers(db, "threads: 3"), 3);  // as given
  }
  {
    EnvVar two("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
    EXPECT_EQ(DefaultWorkers(db), std::clamp(Cores() / 2, 1, 8));
  }
}

}  // namespace
}  // namespace cortado
