#pragma once
// Data-parallel training in one process (DESIGN, "Across devices"):
// `trainer train --gpu=0,1,2,3` (or --gpu=all on a machine with several
// GPUs) runs one solver per GPU, each on its own thread, as the ranks of one
// group. The Solver does the rest as it does for mpirun's ranks
// (solver.hpp): shards, the gradients' sum, rank 0's tests and snapshots.
//
// The engine: NCCL where the build has it and every rank has a GPU of its
// own (the sums stay on the GPUs); the threads engine otherwise (host
// memory: CPU ranks, a build without NCCL, or two ranks sharing a GPU).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cortado/comm/communicator.hpp"
#include "cortado/context.hpp"

namespace cortado {

/// What one rank of RunRanks gets.
struct Rank {
  int rank = 0;
  int ranks = 1;
  std::shared_ptr<const Context> ctx;  // its device (made on its thread)
  std::shared_ptr<Communicator> comm;
};

enum class RankEngine { kAuto, kThreads, kNccl };

/// The engine RunRanks uses for `devices` under `engine` (kAuto resolved).
/// Error for kNccl where it cannot run (no NCCL, a CPU rank, a repeated GPU).
RankEngine ResolveEngine(const std::vector<int>& devices, RankEngine engine = RankEngine::kAuto);

/// Runs body(rank) for every entry of `devices` (a CUDA device id, or -1 for
/// the CPU) on a thread of its own, and returns when all are done. Rank 0's
/// thread logs INFO; the others log warnings and errors only.
///
/// The job fails as a whole. When a rank throws, the group is aborted with
/// the rank's message ("rank 1 of 3 failed at iteration 12 (the gradient
/// sums): ..."), so that the others stop at once if they wait in a
/// collective, or at their next one; each of them logs an error saying
/// where it stopped and why, and RunRanks throws the failing rank's error.
/// A rank that does not stop within `stop_seconds` of the failure (it hangs
/// outside the collectives) is left running, detached, and named in the
/// error; ranks_left_running() then says so, and the caller should end the
/// process without running its destructors (std::_Exit), which the
/// detached thread may still be using. stop_seconds 0: wait for every rank.
void RunRanks(const std::vector<int>& devices, const std::function<void(const Rank&)>& body,
              RankEngine engine = RankEngine::kAuto, double stop_seconds = 60);

/// How many ranks RunRanks left running after a failure, in this process.
int ranks_left_running();

/// The communicator of one rank of an mpirun job (`world`: MPI) that trains
/// on GPU ids[local_rank % ids.size()]: NCCL over `world` (NcclOverHost) when
/// the build has NCCL and no two ranks of a machine can share a GPU, that is
/// unless the ids repeat or some machine runs more ranks than there are ids;
/// `world` itself (sums through the host) otherwise. A collective: every
/// rank of `world` calls it, with the same ids.
std::shared_ptr<Communicator> GpuProcessRank(std::shared_ptr<Communicator> world, const std::vector<int>& ids,
                                             int local_rank);

}  // namespace cortado
