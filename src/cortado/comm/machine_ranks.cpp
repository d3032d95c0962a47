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

// Slurm's tasks on node `node` of a step, from its tasks-per-node list
// ("8(x2),4": 8 on nodes 0 and 1, 4 on node 2); 0 when it cannot tell.
int slurm_tasks_on_node(const char* list, int node) {
  const char* p = list;
  int index = 0;
  while (*p) {
    char* end = nullptr;
    const long tasks = std::strtol(p, &end, 10);
    if (end == p || tasks < 1) return 0;
    long repeat = 1;
    p = end;
    if (*p == '(') {
      if (p[1] != 'x') return 0;
      repeat = std::strtol(p + 2, &end, 10);
      if (end == p + 2 || *end != ')' || repeat < 1) return 0;
      p = end + 1;
    }
    if (node < index + repeat) return static_cast<int>(tasks);
    index += static_cast<int>(repeat);
    if (*p == ',') ++p;
    else if (*p) return 0;
  }
  return 0;
}

int launcher_local_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    const char* v = std::getenv(name);
    if (v && *v) return std::max(1, std::atoi(v));
  }
  // srun with PMIx or PMI (mpirun sets Open MPI's variables even under Slurm).
  const char* list = std::getenv("SLURM_STEP_TASKS_PER_NODE");
  const char* node = std::getenv("SLURM_NODEID");
  if (list && node && (std::getenv("PMIX_RANK") || std::getenv("PMI_RANK"))) {
    const int n = slurm_tasks_on_node(list, std::atoi(node));
    if (n > 0) return n;
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
