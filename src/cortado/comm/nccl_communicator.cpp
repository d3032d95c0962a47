// The NCCL engine (communicator.hpp), built where CUDA and NCCL are found:
// one rank per GPU, of this process (NcclGroup) or of this job's processes
// (NcclOverHost). The gradient sums run on the GPUs, in one NCCL group per
// call; everything else the Solver agrees on (seeds, actions, the weights at
// the start) is small or rare and goes through the host engine beside it:
// the threads engine in one process, MPI across processes.
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cortado/comm/communicator.hpp"
#include "cortado/util/cuda.hpp"
#include "cortado/util/gpu_faults.hpp"

#define CORTADO_NCCL_CHECK(expr)                                                                   \
  do {                                                                                             \
    const ncclResult_t cortado_r_ = (expr);                                                        \
    if (cortado_r_ != ncclSuccess)                                                                 \
      ::cortado::fail(__FILE__, ":", __LINE__, ": ", #expr, ": ", ncclGetErrorString(cortado_r_)); \
  } while (0)

namespace cortado {
namespace {

ncclDataType_t nccl_type(Type t) {
  switch (t) {
    case DOUBLE: return ncclDouble;
    case FLOAT: return ncclFloat;
    case FLOAT16: return ncclHalf;
    case BFLOAT16: return ncclBfloat16;
  }
  fail("no NCCL type for ", type_name(t));
}

// The NCCL communicators of this process (one per rank of NcclGroup; the
// process's one for NcclOverHost), destroyed with the last rank's
// communicator. An abort aborts them all: a peer's kernels that wait for
// the failed rank end, instead of its thread hanging in a synchronize.
struct NcclComms {
  std::mutex mutex;
  std::vector<ncclComm_t> comms;
  std::atomic<bool> aborted{false};  // the ranks check it before each sum they queue
  ~NcclComms() {
    if (!aborted)
      for (ncclComm_t c : comms) ncclCommDestroy(c);
  }
  void Abort() {
    std::lock_guard<std::mutex> lock(mutex);
    if (aborted.exchange(true)) return;
    for (ncclComm_t c : comms) ncclCommAbort(c);
  }
};

class NcclCommunicator : public Communicator {
 public:
  // comm: this rank's communicator among comms->comms.
  NcclCommunicator(std::shared_ptr<NcclComms> comms, std::shared_ptr<Communicator> host, ncclComm_t comm)
      : comms_(std::move(comms)), host_(std::move(host)), comm_(comm) {}
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const char* engine() const override { return "NCCL"; }

  void AllReduceSum(void* data, int64_t count, Type type) override { host_->AllReduceSum(data, count, type); }
  bool reduces_device_memory() const override { return true; }
  // In place, on the compute stream: the sums queue behind the backward
  // that wrote the gradients and ahead of the update, which waits for them
  // as for those of StartAllReduceSum.
  void AllReduceSum(const std::vector<Span>& spans, Type type, CUstream_st* stream) override {
    MakeEvents();
    Sum(spans, type, stream);
    CORTADO_CUDA_CHECK(cudaEventRecord(summed_, stream));
    Await(summed_);
  }

  // The buckets of a backward: on this rank's own stream, after an event
  // recorded on the compute stream, so that they overlap the backward of
  // the layers before them; WaitSums puts the compute stream behind them.
  bool asynchronous() const override { return true; }
  void StartAllReduceSum(const std::vector<Span>& spans, Type type, CUstream_st* stream) override {
    MakeEvents();
    if (!sum_stream_) CORTADO_CUDA_CHECK(cudaStreamCreateWithFlags(&sum_stream_, cudaStreamNonBlocking));
    CORTADO_CUDA_CHECK(cudaEventRecord(queued_, stream));
    CORTADO_CUDA_CHECK(cudaStreamWaitEvent(sum_stream_, queued_, 0));
    Sum(spans, type, sum_stream_);
  }
  void WaitSums(CUstream_st* stream) override {
    if (!sum_stream_) return;
    CORTADO_CUDA_CHECK(cudaEventRecord(summed_, sum_stream_));
    Await(summed_);
    CORTADO_CUDA_CHECK(cudaStreamWaitEvent(stream, summed_, 0));
  }
  ~NcclCommunicator() override {
    if (sum_stream_) {
      cudaStreamSynchronize(sum_stream_);
      cudaStreamDestroy(sum_stream_);
    }
    if (queued_) cudaEventDestroy(queued_);
    if (summed_) cudaEventDestroy(summed_);
  }

  void Broadcast(void* data, int64_t bytes, int root) override { host_->Broadcast(data, bytes, root); }
  int64_t Max(int64_t value) override { return host_->Max(value); }
  void set_timeout(double seconds) override {
    Communicator::set_timeout(seconds);
    host_->set_timeout(seconds);
  }
  using Communicator::Abort;
  [[noreturn]] void Abort(int status, const std::string& reason) override {
    comms_->Abort();
    host_->Abort(status, reason);  // threads: throws on this rank and wakes the others; MPI: ends the job
    std::abort();                  // not reached
  }

 private:
  void MakeEvents() {  // on the rank's thread, its device current
    if (summed_) return;
    CORTADO_CUDA_CHECK(cudaEventCreateWithFlags(&queued_, cudaEventDisableTiming));
    CORTADO_CUDA_CHECK(cudaEventCreateWithFlags(&summed_, cudaEventDisableTiming));
  }

  // Waits on the host for `event` (recorded after sums), polling instead of
  // blocking in a synchronize: a sum that cannot finish (a peer rank died,
  // stopped calling the collectives, or its network broke) would otherwise
  // hang this rank for ever. NCCL's asynchronous error, or no progress in
  // timeout() seconds (the solver's collective_timeout), aborts this process's communicators (the
  // kernels waiting for the peer end) and throws with the cause; the caller
  // ends the job (Abort), which ends the other processes' ranks too. The
  // wait spins, yielding, as a synchronize does by default (the sums are
  // the iteration's critical path), and looks at NCCL and the clock every
  // millisecond. It costs the host the launches it could have queued
  // behind the sums meanwhile (the update's few kernels).
  void Await(cudaEvent_t event) {
    using Clock = std::chrono::steady_clock;
    const double timeout = timeout_;
    const Clock::time_point start = Clock::now();
    Clock::time_point polled = start;
    for (;;) {
      const cudaError_t e = cudaEventQuery(event);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady)
        fail("NCCL rank ", rank(), " of ", size(), ": waiting for the gradient sums: ", cudaGetErrorName(e), ": ",
             cudaGetErrorString(e));
      const Clock::time_point now = Clock::now();
      if (now - polled < std::chrono::milliseconds(1)) {
        std::this_thread::yield();
        continue;
      }
      polled = now;
      ncclResult_t async = ncclSuccess;
      std::string detail;
      {
        // Under the lock that Abort takes: another rank's thread may be
        // aborting (freeing) this communicator.
        std::lock_guard<std::mutex> lock(comms_->mutex);
        if (comms_->aborted)
          throw RankStopped("another rank of this process failed, so this one stopped (see that rank's error)");
        CORTADO_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
        if (async != ncclSuccess && async != ncclInProgress) {
          const char* last = ncclGetLastError(comm_);
          if (last) detail = last;
        }
      }
      if (async != ncclSuccess && async != ncclInProgress) {
        comms_->Abort();
        fail("NCCL rank ", rank(), " of ", size(), ": the gradient sums failed: ", ncclGetErrorString(async),
             detail.empty() ? "" : " (" + detail + ")");
      }
      if (timeout > 0 && std::chrono::duration<double>(now - start).count() > timeout) {
        comms_->Abort();
        fail("NCCL rank ", rank(), " of ", size(), ": the gradient sums did not finish in ", timeout,
             " s (collective_timeout): another rank failed or stopped calling them; the job is aborted");
      }
    }
  }

  void Sum(const std::vector<Span>& spans, Type type, cudaStream_t stream) {
    // After an abort the communicators are gone (a rank racing the abort
    // between this check and its enqueue gets NCCL's error instead).
    if (comms_->aborted)
      throw RankStopped("another rank of this process failed, so this one stopped (see that rank's error)");
    CORTADO_NCCL_CHECK(ncclGroupStart());
    for (const Span& s : spans)
      if (s.count > 0)
        CORTADO_NCCL_CHECK(ncclAllReduce(s.data, s.data, static_cast<size_t>(s.count), nccl_type(type), ncclSum, comm_,
                                         stream));
    CORTADO_NCCL_CHECK(ncclGroupEnd());
  }

  std::shared_ptr<NcclComms> comms_;
  std::shared_ptr<Communicator> host_;
  ncclComm_t comm_;
  cudaStream_t sum_stream_ = nullptr;  // the buckets' stream, made on first use
  cudaEvent_t queued_ = nullptr, summed_ = nullptr;
};

}  // namespace

bool NcclBuilt() { return true; }

std::vector<std::shared_ptr<Communicator>> NcclGroup(const std::vector<int>& devices) {
  const int n = static_cast<int>(devices.size());
  if (n < 1) fail("an NCCL group needs at least one GPU");
  std::vector<ncclComm_t> comms(devices.size());
  CORTADO_NCCL_CHECK(ncclCommInitAll(comms.data(), n, devices.data()));
  auto shared = std::make_shared<NcclComms>();
  shared->comms = std::move(comms);
  std::vector<std::shared_ptr<Communicator>> host = LocalGroup(n), ranks;
  for (int r = 0; r < n; ++r)
    ranks.push_back(std::make_shared<NcclCommunicator>(shared, host[static_cast<size_t>(r)],
                                                       shared->comms[static_cast<size_t>(r)]));
  return ranks;
}

std::shared_ptr<Communicator> NcclOverHost(std::shared_ptr<Communicator> host, int device) {
  ncclUniqueId id{};
  if (host->rank() == 0) CORTADO_NCCL_CHECK(ncclGetUniqueId(&id));
  host->Broadcast(&id, static_cast<int64_t>(sizeof(id)), 0);
  CORTADO_CUDA_CHECK(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  // Blocks until every rank has joined (a rank that never calls it hangs
  // the others, as any collective would).
  CORTADO_NCCL_CHECK(ncclCommInitRank(&comm, host->size(), id, host->rank()));
  auto shared = std::make_shared<NcclComms>();
  shared->comms = {comm};
  return std::make_shared<NcclCommunicator>(shared, std::move(host), comm);
}

}  // namespace cortado
