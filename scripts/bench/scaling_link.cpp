// The MPI link as Cortado's MPI engine uses it (scripts/bench/scaling_check.sh
// builds this with mpicxx and runs it under mpirun): the time of an in-place
// MPI_Allreduce of FLOAT sums against the message size, and the host copy
// rate of the engine's packing (one buffer per gradient type, copied in and
// out; communicator.hpp). Rank 0 prints, per size, the median over REPS
// calls, each after a barrier:
//   link: ranks=R bytes=B ms=T
//   copy: bytes=B ms=T
// scripts/bench/scaling_model.py --link-fit reads these lines.
//
//   mpirun -np R scaling_link [MAX_BYTES] [REPS] [blocking|polled|gated]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Polls `request` to completion as MpiCommunicator's Complete does:
// yielding the core between polls and, once 2 ms have passed, sleeping
// 100 us every 16th poll (it watches for failure notices and its timeout
// between polls; Open MPI moves a non-blocking collective on only inside
// such calls).
void poll(MPI_Request* request) {
  const double start = now_ms();
  for (int polls = 0;; ++polls) {
    int done = 0;
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (polls % 16 != 15) {
      std::this_thread::yield();
      continue;
    }
    if (now_ms() - start > 2.0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

enum Mode { kBlocking, kPolled, kGated };

// The sum as an engine makes it. blocking: MPI_Allreduce. polled:
// MPI_Iallreduce completed by poll() (the MPI engine before it was gated).
// gated: MPI_Ibarrier completed by poll(), then MPI_Allreduce (the MPI
// engine: it waits for the other ranks where it can watch for failures,
// then moves the data with Open MPI's tuned blocking algorithm).
void sum(float* data, int count, Mode mode) {
  if (mode == kPolled) {
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
    poll(&request);
    return;
  }
  if (mode == kGated) {
    MPI_Request request;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    poll(&request);
  }
  MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const long max_bytes = argc > 1 ? std::atol(argv[1]) : 64L << 20;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 9;
  const std::string mode_name = argc > 3 ? argv[3] : "blocking";
  const Mode mode = mode_name == "polled" ? kPolled : mode_name == "gated" ? kGated : kBlocking;
  std::vector<float> data(static_cast<size_t>(max_bytes / 4) + 1, 1.0f), copy(data.size());
  // 8 bytes (a tiny collective, as the step's agreement on the signals'
  // action), then sizes from 4 KiB to max_bytes, two per octave from 64 KiB
  // (where the bandwidth term starts to count).
  std::vector<long> sizes = {8};
  for (long b = 4096; b < 65536; b *= 4) sizes.push_back(b);
  for (double b = 65536; b <= static_cast<double>(max_bytes) * 1.0001; b *= 1.41421356) sizes.push_back(static_cast<long>(b) / 4 * 4);
  for (long bytes : sizes) {
    const int count = static_cast<int>(bytes / 4);
    std::vector<double> t;
    sum(data.data(), count, mode);  // warm
    for (int r = 0; r < reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now_ms();
      sum(data.data(), count, mode);
      t.push_back(now_ms() - t0);
    }
    // The slowest rank's time: the collective ends for the job when it ends there.
    double mine = median(t), slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) std::printf("link: ranks=%d bytes=%ld ms=%.6f mode=%s\n", ranks, bytes, slowest, mode_name.c_str());
    std::fill(data.begin(), data.end(), 1.0f);  // keep the sums finite
  }
  // The engine's packing: one copy in and one out per sum; all ranks copy
  // at once, as they do in a step.
  for (long bytes : {max_bytes / 4, max_bytes}) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now_ms();
      std::memcpy(copy.data(), data.data(), static_cast<size_t>(bytes));
      t.push_back(now_ms() - t0);
      data[static_cast<size_t>(r) % data.size()] += copy[0];  // the copy is used
    }
    double mine = median(t), slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) std::printf("copy: bytes=%ld ms=%.6f\n", bytes, slowest);
  }
  MPI_Finalize();
  return 0;
}
