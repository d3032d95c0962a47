#pragma once
// Data-parallel training across ranks (DESIGN, "Across devices"): each rank
// runs one Solver on its own shard of the data, and after backward the
// ranks sum their gradients, so every rank applies the same update to the
// same weights.
//
// A Communicator is the group of ranks, with the three collectives the
// Solver needs. Every rank must call the same collectives in the same order
// with the same counts and types, or the job hangs (as with MPI itself).
//
// Engines:
// - MPI (MpiWorld(), builds with USE_MPI): `mpirun -np N trainer train ...`
//   runs one rank per process, on one machine or several. The collectives
//   work on host memory; a rank training on a GPU stages its gradients
//   through the host (the Tensor moves them).
// - NCCL for GPU memory (in-process `--gpu=0,1,...`) is not built yet.
//
// Sums are taken in the values' own type (float16 gradients are summed as
// float16, each addition rounded once, as NCCL does), and every rank ends
// with the same bits: the ranks' weights never drift apart.

#include <cstdint>
#include <memory>

#include "cortado/types.hpp"

namespace cortado {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The engine, for logs ("MPI").
  virtual const char* engine() const = 0;
  /// Sums `count` values of `type` at host address `data` over all ranks,
  /// in place.
  virtual void AllReduceSum(void* data, int64_t count, Type type) = 0;
  /// Copies `bytes` bytes at `data` from rank `root` to every rank.
  virtual void Broadcast(void* data, int64_t bytes, int root) = 0;
  /// The largest of the ranks' values (agreeing on an action or a seed).
  virtual int64_t Max(int64_t value) = 0;
  /// Ends every rank of the job with `status` (after an error on one rank,
  /// which the others would otherwise wait for in their next collective).
  [[noreturn]] virtual void Abort(int status) = 0;
};

/// Whether this build has the MPI engine.
bool MpiBuilt();
/// How many ranks the MPI launcher that started this process (mpirun,
/// mpiexec, srun) started, from the environment it leaves; 1 without one.
/// A process that is one of several needs MPI; one alone trains without it
/// (`srun trainer train` with one task, a build without MPI).
int LauncherRanks();
/// The rank among this machine's processes of the job, from the launcher's
/// environment (0 when it does not say): the GPU a rank takes.
int MpiLocalRank();
/// Initializes MPI once and returns the world communicator (MPI_Finalize
/// runs when the last reference goes). Error in a build without MPI.
std::shared_ptr<Communicator> MpiWorld();

}  // namespace cortado
