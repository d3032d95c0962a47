// RanksOnThisMachine and CoresPerRank (comm/machine_ranks.hpp).
#include "cortado/comm/machine_ranks.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

namespace cortado {

namespace {

std::atomic<int>& thread_ranks() {
  static std::atomic<int> n{1};
  return n;
}

int launcher_local_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    const char* v = std::getenv(name);
    if (v && *v) return std::max(1, std::atoi(v));
  }
  return 1;
}

}  // namespace

int RanksOnThisMachine() { return std::max(1, thread_ranks().load()) * launcher_local_ranks(); }

int CoresPerRank() {
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, cores / RanksOnThisMachine());
}

ThreadRanksScope::ThreadRanksScope(int ranks) : previous_(thread_ranks().exchange(std::max(1, ranks))) {}
ThreadRanksScope::~ThreadRanksScope() { thread_ranks().store(previous_); }

}  // namespace cortado
