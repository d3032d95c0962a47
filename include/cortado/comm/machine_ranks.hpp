#pragma once
// How many ranks share this machine's cores, for the defaults of work that
// sizes itself from the cores (the Data layer's workers). A machine may run
// several ranks: as threads of one process (RunRanks, run_ranks.hpp: one per
// GPU of `trainer train --gpu=all`), as processes of one mpirun job, or
// both. Each rank's defaults then take its share of the cores instead of all
// of them, so that 8 GPUs in one process on 16 cores run 2 Data workers a
// rank, not 8.
namespace cortado {

/// The ranks on this machine: the thread ranks of this process (1 outside
/// RunRanks) times the launcher's ranks on this machine (Open MPI's
/// OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS, or under srun with
/// PMIx or PMI Slurm's SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID; 1 without
/// a launcher). At least 1.
int RanksOnThisMachine();

/// The machine's cores divided among RanksOnThisMachine(), at least 1.
int CoresPerRank();

/// While it lives, this process runs `ranks` thread ranks (RunRanks sets it).
class ThreadRanksScope {
 public:
  explicit ThreadRanksScope(int ranks);
  ~ThreadRanksScope();
  ThreadRanksScope(const ThreadRanksScope&) = delete;
  ThreadRanksScope& operator=(const ThreadRanksScope&) = delete;

 private:
  int previous_;
};

}  // namespace cortado
