// The communicator engines (communicator.hpp). MPI is compiled in only with
// CORTADO_USE_MPI; the launcher checks work in every build, so that a
// binary built without MPI and started by mpirun can say so.
#include "cortado/comm/communicator.hpp"
#include "cortado/comm/rank_phase.hpp"
#include "cortado/util/env.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#ifdef CORTADO_USE_MPI
#include <mpi.h>
#endif

namespace cortado {


void Communicator::AllReduceSum(const std::vector<Span>& spans, Type type, CUstream_st*) {
  const size_t bytes = type_size(type);
  int64_t total = 0;
  for (const Span& s : spans) total += s.count;
  if (total == 0) return;
  packed_.resize(static_cast<size_t>(total) * bytes);
  char* at = packed_.data();
  for (const Span& s : spans) {
    std::memcpy(at, s.data, static_cast<size_t>(s.count) * bytes);
    at += s.count * bytes;
  }
  AllReduceSum(packed_.data(), total, type);
  at = packed_.data();
  for (const Span& s : spans) {
    std::memcpy(s.data, at, static_cast<size_t>(s.count) * bytes);
    at += s.count * bytes;
  }
}

bool MpiBuilt() {
#ifdef CORTADO_USE_MPI
  return true;
#else
  return false;
#endif
}

namespace {

// Slurm's task count of this job step (srun), or 0 outside one.
int SlurmStepTasks() {
  for (const char* name : {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"})
    if (const char* v = env_value(name)) return std::max(0, std::atoi(v));
  return 0;
}

}  // namespace

int LauncherRanks() {
  // Open MPI's mpirun (also under Slurm), MPICH's Hydra and srun --mpi=pmi2
  // (PMI), and srun --mpi=pmix: Slurm says the step's task count.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = env_value(name)) return std::max(1, std::atoi(v));
  if (env_value("PMIX_RANK") && SlurmStepTasks() > 0) return SlurmStepTasks();
  return 1;
}

void CheckLauncher() {
  // srun --mpi=none starts N copies that MPI cannot connect: each would
  // train alone, and all would write the same snapshots.
  const char* step_tasks = env_value("SLURM_STEP_NUM_TASKS");  // srun's, not sbatch's
  const int tasks = step_tasks ? std::atoi(step_tasks) : 0;
  if (tasks > 1 && LauncherRanks() == 1 && !env_value("PMIX_RANK") && !env_value("PMI_RANK"))
    fail("srun started ", tasks, " tasks but gave them no MPI wire-up (no PMIx or PMI in their environment): each "
         "would train alone. Launch with srun --mpi=pmix (or --mpi=pmi2, as your Slurm offers: srun --mpi=list), or "
         "with mpirun");
}

int MpiLocalRank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "SLURM_LOCALID"})
    if (const char* v = env_value(name)) return std::atoi(v);
  return 0;
}

#ifdef CORTADO_USE_MPI
namespace {

// float16 and bfloat16 have no MPI type: their values travel as 16-bit words
// and are summed by these operations, each sum rounded once to the type
// (commutative: IEEE addition is, so every rank gets the same bits).
template <typename T>
void sum_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = T(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}

// Every collective first waits, polling, for all ranks to reach it (a
// non-blocking barrier completed by Gate), and beside it for the job's
// notices: a rank that fails sends its message ("rank 1 of 3 failed at
// iteration 12 (...): ...") to every other rank on a communicator of their
// own before it ends the job, so that the ranks waiting for it print who
// failed and where, then end, instead of waiting for a sum that never
// comes. A wait longer than timeout() ends the job the same way. (MPI's own
// blocking calls cannot do either: they wait for ever for a rank that
// stopped calling them, unless the launcher ends the job.) Once every rank
// is there, the data moves with MPI's blocking collective: Open MPI's tuned
// algorithms, which its non-blocking ones, moved on only by polling, are
// not (a 47 MB float sum on 2 ranks of a 2-core machine took 60 ms polled
// against 22 ms blocking). A rank that dies inside that collective is the
// launcher's to end the job for (mpirun and srun do).
class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      // Only the thread that runs the solver calls MPI (the data readers never do).
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      owns_init_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Op_create(&sum_16bit<float16>, /*commute=*/1, &sum_half_);
    MPI_Op_create(&sum_16bit<bfloat16>, /*commute=*/1, &sum_bfloat_);
    MPI_Comm_dup(MPI_COMM_WORLD, &notices_);
    PostNoticeReceive();
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (notice_request_ != MPI_REQUEST_NULL) {
      MPI_Cancel(&notice_request_);
      MPI_Wait(&notice_request_, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&notices_);
    MPI_Op_free(&sum_half_);
    MPI_Op_free(&sum_bfloat_);
    if (owns_init_) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* engine() const override { return "MPI"; }

  using Communicator::AllReduceSum;

  void AllReduceSum(void* data, int64_t count, Type type) override {
    MPI_Datatype dt = MPI_FLOAT;
    MPI_Op op = MPI_SUM;
    switch (type) {
      case DOUBLE: dt = MPI_DOUBLE; break;
      case FLOAT: dt = MPI_FLOAT; break;
      case FLOAT16: dt = MPI_UINT16_T; op = sum_half_; break;
      case BFLOAT16: dt = MPI_UINT16_T; op = sum_bfloat_; break;
    }
    char* p = static_cast<char*>(data);
    const size_t bytes = type_size(type);
    Gate("a sum");
    for (int64_t done = 0; done < count;) {
      const int n = static_cast<int>(std::min<int64_t>(count - done, kChunk));
      MPI_Allreduce(MPI_IN_PLACE, p + done * bytes, n, dt, op, MPI_COMM_WORLD);
      done += n;
    }
  }

  void Broadcast(void* data, int64_t bytes, int root) override {
    char* p = static_cast<char*>(data);
    Gate("a broadcast");
    for (int64_t done = 0; done < bytes;) {
      const int n = static_cast<int>(std::min<int64_t>(bytes - done, kChunk));
      MPI_Bcast(p + done, n, MPI_BYTE, root, MPI_COMM_WORLD);
      done += n;
    }
  }

  int64_t Max(int64_t value) override {
    int64_t out = value;
    MPI_Request request;
    MPI_Iallreduce(&value, &out, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD, &request);
    Complete(&request, "the ranks' agreement");
    return out;
  }

  using Communicator::Abort;
  [[noreturn]] void Abort(int status, const std::string& reason) override {
    if (!reason.empty() && !notified_) {
      // Tell every other rank why, then give the ranks that wait in a
      // collective (they poll every millisecond or so) a moment to print
      // it before the launcher ends them.
      notified_ = true;
      std::string text = reason.substr(0, kNoticeBytes - 1);
      text.resize(kNoticeBytes, '\0');
      std::vector<MPI_Request> sends;
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        sends.emplace_back();
        MPI_Isend(text.data(), kNoticeBytes, MPI_CHAR, r, kNoticeTag, notices_, &sends.back());
      }
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      int all = 0;
      while (!all && std::chrono::steady_clock::now() < until) {
        MPI_Testall(static_cast<int>(sends.size()), sends.data(), &all, MPI_STATUSES_IGNORE);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    } else if (following_) {
      // This rank stops because another failed: that rank ends the job once
      // the others have printed why; end it here only if it does not.
      std::this_thread::sleep_for(std::chrono::seconds(3));
    }
    MPI_Abort(MPI_COMM_WORLD, status);
    std::_Exit(status);
  }

 private:
  void PostNoticeReceive() {
    notice_.assign(kNoticeBytes, '\0');
    MPI_Irecv(notice_.data(), kNoticeBytes, MPI_CHAR, MPI_ANY_SOURCE, kNoticeTag, notices_, &notice_request_);
  }

  // Returns once every rank has reached the collective `what`.
  void Gate(const char* what) {
    MPI_Request request;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    Complete(&request, what);
  }

  // Waits for `request` (the collective `what`), polling the notices and
  // the timeout. Yields the core between polls: ranks may share cores.
  void Complete(MPI_Request* request, const char* what) {
    const auto start = std::chrono::steady_clock::now();
    for (int polls = 0;; ++polls) {
      int done = 0;
      MPI_Test(request, &done, MPI_STATUS_IGNORE);
      if (done) return;
      if (polls % 16 != 15) {
        std::this_thread::yield();
        continue;
      }
      int noticed = 0;
      MPI_Test(&notice_request_, &noticed, MPI_STATUS_IGNORE);
      if (noticed) {
        following_ = true;
        notice_request_ = MPI_REQUEST_NULL;
        throw RankStopped(str_cat("rank ", rank_, " of ", size_, " stopped", at_rank_phase(rank_), " because ",
                                  notice_.c_str()));
      }
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (timeout_ > 0 && waited > timeout_) {
        fail("rank ", rank_, " of ", size_, " waited ", timeout_, " s (collective_timeout) in ", what,
             at_rank_phase(rank_), " for the other ranks, which never came (one of them hangs or died): the job is ended");
      }
      // Past the first milliseconds, sleep between polls: a rank that waits
      // long leaves the cores to the ranks still computing.
      if (waited > 0.002) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  static constexpr int64_t kChunk = INT_MAX / 8;  // elements (or bytes) per MPI call: its counts are int
  static constexpr int kNoticeBytes = 1024;
  static constexpr int kNoticeTag = 7;
  int rank_ = 0, size_ = 1;
  bool owns_init_ = false;
  MPI_Op sum_half_ = MPI_OP_NULL;
  MPI_Op sum_bfloat_ = MPI_OP_NULL;
  MPI_Comm notices_ = MPI_COMM_NULL;  // the failure notices, apart from the collectives
  MPI_Request notice_request_ = MPI_REQUEST_NULL;
  std::string notice_;
  bool notified_ = false;   // this rank told the others why the job ends
  bool following_ = false;  // this rank stops because another rank failed
};

}  // namespace

std::shared_ptr<Communicator> MpiWorld() {
  // One world per process: MPI cannot be initialized again once finalized,
  // so the communicator lives until the process ends.
  static std::mutex mutex;
  static std::shared_ptr<Communicator> world;
  std::lock_guard<std::mutex> lock(mutex);
  if (!world) world = std::make_shared<MpiCommunicator>();
  return world;
}
#else
std::shared_ptr<Communicator> MpiWorld() {
  fail("this build has no MPI communicator: install Open MPI (libopenmpi-dev, as scripts/install_deps.sh does) and "
       "rebuild with USE_MPI=AUTO or ON");
}
#endif

}  // namespace cortado
