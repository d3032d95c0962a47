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
// - Threads (LocalGroup(n)): n ranks in one process, one thread each
//   (`trainer train --gpu=0,1,...`, RunRanks in run_ranks.hpp). The
//   collectives work on host memory, through memory the ranks share.
// - NCCL (builds where CUDA and NCCL are found). Gradients are summed in
//   device memory, on the calling thread's stream; the host collectives
//   (Max, Broadcast) go through a host engine beside it:
//   - NcclGroup(devices): one rank per GPU of this process, beside the
//     threads engine (`trainer train --gpu=0,1,...`);
//   - NcclOverHost(host, device): one rank per process, beside MPI, which
//     also hands rank 0's NCCL id to the others (`mpirun -np N trainer
//     train --gpu=...`, on one machine or several).
//
// Sums are taken in the values' own type (float16 and bfloat16 gradients are
// summed in their type, each addition rounded once, as NCCL does), and every rank ends
// with the same bits: the ranks' weights never drift apart.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cortado/common.hpp"
#include "cortado/types.hpp"

struct CUstream_st;

namespace cortado {

/// What a collective throws on a rank that stops because another rank of
/// its job failed (or the job was aborted): not the cause of the failure.
class RankStopped : public Error {
 public:
  using Error::Error;
};

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

  /// A buffer of `count` values.
  struct Span {
    void* data;
    int64_t count;
  };
  /// Whether AllReduceSum(spans, ...) takes device memory (summed on the
  /// `stream` it is given) rather than host memory.
  virtual bool reduces_device_memory() const { return false; }
  /// Sums each span (values of `type`) over all ranks, in place: the
  /// gradients of one type, in one collective. Host engines pack them into
  /// one buffer; NCCL reduces them in place, in one group, on `stream` (the
  /// compute stream of the caller's Context, which wrote them; host engines
  /// ignore it).
  virtual void AllReduceSum(const std::vector<Span>& spans, Type type, CUstream_st* stream);
  /// Whether StartAllReduceSum returns before the sum is done (NCCL: it
  /// runs on a stream of its own), so that the Solver sums gradients in
  /// buckets during backward.
  virtual bool asynchronous() const { return false; }
  /// Starts AllReduceSum(spans, type) after the work queued so far on
  /// `stream`; the spans must not be written until WaitSums. Synchronous
  /// engines sum at once.
  virtual void StartAllReduceSum(const std::vector<Span>& spans, Type type, CUstream_st* stream) {
    AllReduceSum(spans, type, stream);
  }
  /// Makes `stream` wait for every sum started (work queued on it later
  /// sees the sums). NCCL waits on the host too, polling
  /// its asynchronous errors: a sum that fails, or does not finish within
  /// timeout() seconds, throws Error with the cause instead of hanging, as
  /// its device AllReduceSum does.
  virtual void WaitSums(CUstream_st* stream) {}
  /// Copies `bytes` bytes at `data` from rank `root` to every rank.
  virtual void Broadcast(void* data, int64_t bytes, int root) = 0;
  /// The largest of the ranks' values (agreeing on an action or a seed).
  virtual int64_t Max(int64_t value) = 0;

  /// The most seconds a rank waits in one collective for the others (the
  /// solver's collective_timeout; 0: no limit). Past it the collective
  /// throws Error naming what it waited for, and the caller ends the job
  /// (Abort): a rank that died or stopped calling the collectives ends the
  /// job instead of hanging it. Engines that wrap another pass it on.
  virtual void set_timeout(double seconds) { timeout_ = seconds; }
  double timeout() const { return timeout_; }

  /// Ends every rank of the job with `status`, after an error on this rank
  /// (which the others would otherwise wait for in their next collective).
  /// `reason` says which rank failed, at which iteration, and why; the
  /// other ranks end with it in their message:
  /// - threads: every rank throws Error (in its current or next collective,
  ///   and this one here), the others' naming `reason`;
  /// - MPI: `reason` goes to every other rank, which prints it, at once if
  ///   it waits in a collective; then the job's processes end (MPI_Abort,
  ///   the launcher ends the rest);
  /// - NCCL: its communicators are aborted, then its host engine ends the
  ///   job as above.
  [[noreturn]] virtual void Abort(int status, const std::string& reason) = 0;
  [[noreturn]] void Abort(int status) { Abort(status, std::string()); }

 protected:
  double timeout_ = 600;

 private:
  std::vector<char> packed_;  // AllReduceSum(spans)'s buffer on host engines
};

/// n ranks in this process, for n threads: element r is rank r's
/// communicator, to be used by one thread only.
std::vector<std::shared_ptr<Communicator>> LocalGroup(int n);

/// Whether this build has the NCCL engine.
bool NcclBuilt();
/// One rank per CUDA device of `devices` (distinct ids), all in this
/// process: element r is rank r's communicator, to be used by the thread
/// that trains on devices[r]. Error in a build without NCCL.
std::vector<std::shared_ptr<Communicator>> NcclGroup(const std::vector<int>& devices);
/// This process's rank of an NCCL communicator over the ranks of `host` (an
/// MPI world: one rank per process, each on its own GPU; NCCL refuses two
/// ranks on one GPU), training on CUDA device `device`: rank 0 makes the
/// NCCL id and `host` broadcasts it. A collective: every rank of `host`
/// calls it. The result sums gradients with NCCL and does the rest through
/// `host` (same rank and size). Error in a build without NCCL.
std::shared_ptr<Communicator> NcclOverHost(std::shared_ptr<Communicator> host, int device);

/// Whether this build has the MPI engine.
bool MpiBuilt();
/// How many ranks the MPI launcher that started this process (mpirun,
/// mpiexec, srun with PMIx or PMI) started, from the environment it leaves
/// (OMPI_COMM_WORLD_SIZE, PMI_SIZE, or PMIX_RANK with Slurm's
/// SLURM_STEP_NUM_TASKS); 1 without one.
/// A process that is one of several needs MPI; one alone trains without it
/// (`srun trainer train` with one task, a build without MPI).
int LauncherRanks();
/// Fails with the fix where the launcher started several processes that
/// MPI cannot connect (Slurm's srun --mpi=none), which would each train
/// alone.
void CheckLauncher();
/// The rank among this machine's processes of the job, from the launcher's
/// environment (Open MPI's, MPICH's, Slurm's SLURM_LOCALID; 0 when it does
/// not say): the GPU a rank takes, among those --gpu lists (with Slurm's
/// --gpus-per-task=1 each process sees one GPU, and --gpu=all is that one).
int MpiLocalRank();
/// Initializes MPI once and returns the world communicator (MPI_Finalize
/// runs when the last reference goes). Error in a build without MPI.
std::shared_ptr<Communicator> MpiWorld();

}  // namespace cortado
