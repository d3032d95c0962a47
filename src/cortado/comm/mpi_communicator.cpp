// The communicator engines (communicator.hpp). MPI is compiled in only with
// CORTADO_USE_MPI; the launcher checks work in every build, so that a
// binary built without MPI and started by mpirun can say so.
#include "cortado/comm/communicator.hpp"
#include "cortado/util/env.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

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

int LauncherRanks() {
  // Open MPI's mpirun, MPICH's Hydra (PMI), and Slurm's srun with PMIx.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = env_value(name)) return std::max(1, std::atoi(v));
  if (env_value("PMIX_RANK") && env_value("SLURM_NTASKS")) return std::max(1, std::atoi(env_value("SLURM_NTASKS")));
  return 1;
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
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
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
    for (int64_t done = 0; done < count;) {
      const int n = static_cast<int>(std::min<int64_t>(count - done, kChunk));
      MPI_Allreduce(MPI_IN_PLACE, p + done * bytes, n, dt, op, MPI_COMM_WORLD);
      done += n;
    }
  }

  void Broadcast(void* data, int64_t bytes, int root) override {
    char* p = static_cast<char*>(data);
    for (int64_t done = 0; done < bytes;) {
      const int n = static_cast<int>(std::min<int64_t>(bytes - done, kChunk));
      MPI_Bcast(p + done, n, MPI_BYTE, root, MPI_COMM_WORLD);
      done += n;
    }
  }

  int64_t Max(int64_t value) override {
    int64_t out = value;
    MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    return out;
  }

  [[noreturn]] void Abort(int status) override {
    MPI_Abort(MPI_COMM_WORLD, status);
    std::_Exit(status);
  }

 private:
  static constexpr int64_t kChunk = INT_MAX / 8;  // elements (or bytes) per MPI call: its counts are int
  int rank_ = 0, size_ = 1;
  bool owns_init_ = false;
  MPI_Op sum_half_ = MPI_OP_NULL;
  MPI_Op sum_bfloat_ = MPI_OP_NULL;
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
