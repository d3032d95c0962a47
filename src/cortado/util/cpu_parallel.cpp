#include "cortado/util/cpu_parallel.hpp"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "cortado/common.hpp"

namespace cortado {

namespace {
// Set while this thread runs chunks (or is a worker of a region): nested calls run serially.
thread_local bool in_region = false;

// openblas_get_parallel(): 0 sequential build, 1 pthreads build, 2 OpenMP build.
constexpr int kBlasSequential = 0, kBlasPthreads = 1, kBlasOpenMp = 2;
}  // namespace

// OPENBLAS_NUM_THREADS as a positive number, else 0.
int blas_env_threads() {
  const char* e = std::getenv("OPENBLAS_NUM_THREADS");
  if (!e || !*e) return 0;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  return *end == '\0' && v > 0 && v <= (1 << 16) ? static_cast<int>(v) : 0;
}

int cpu_threads() {
  // OpenBLAS's OpenMP build shares libgomp's threads with the chunks, and it
  // runs a BLAS call made inside a parallel region on the calling thread.
  // Its pthreads build keeps a pool of its own whose threads spin for a long
  // while after each call: chunks on other threads would fight them for the
  // cores (measured: LeNet's fully connected GEMMs twice as slow), so with
  // that build the layers stay on one thread and leave the cores to BLAS.
  // A sequential build has no threads of its own.
  static const int parallel = openblas_get_parallel();
  static const int threads = [] {
    if (parallel == kBlasPthreads) return 1;
#ifdef _OPENMP
    int n = std::max(1, omp_get_max_threads());  // OMP_NUM_THREADS, else every core
#else
    int n = 1;  // built without OpenMP: no threads for the chunks
#endif
    // OPENBLAS_NUM_THREADS caps it, as it caps the pthreads build.
    if (const int cap = blas_env_threads()) n = std::min(n, cap);
    return n;
  }();
  // The OpenMP build itself reads only OMP_NUM_THREADS, per thread: the cap
  // is handed to it once on every thread that asks.
  thread_local const bool capped = [] {
    if (parallel == kBlasOpenMp && blas_env_threads() != 0) openblas_set_num_threads(threads);
    return true;
  }();
  (void)capped;
  return threads;
}

std::string cpu_threads_summary() {
  const int t = cpu_threads();
  std::string s = std::to_string(t) + (t == 1 ? " thread" : " threads");
  switch (openblas_get_parallel()) {
    case kBlasSequential: return s + " (OpenBLAS: sequential build)";
    case kBlasPthreads: return s + " (OpenBLAS: pthreads build, whose own threads run the GEMMs; the layers stay on one)";
    case kBlasOpenMp:
      return s + " (OpenBLAS: OpenMP build, sharing the layers' threads)";
    default:
      return s + " (OpenBLAS: unknown build)";
  }
}

int cpu_chunks(int n) { return std::max(1, std::min(n, cpu_threads())); }

void cpu_parallel_for(int n, const std::function<void(int, int, int)>& body) {
  if (n <= 0) return;
  const int chunks = cpu_chunks(n);
  auto range = [n, chunks](int c) { return static_cast<int>(static_cast<long long>(n) * c / chunks); };
  if (chunks == 1 || in_region) {
    for (int c = 0; c < chunks; ++c) body(c, range(c), range(c + 1));
    return;
  }
  // Only reached with in_region false: a worker (or the caller running chunk 0) marks itself for the chunk.
  std::vector<std::exception_ptr> errors(chunks);
#ifdef _OPENMP
#pragma omp parallel for num_threads(chunks) schedule(static, 1)
#endif
  for (int c = 0; c < chunks; ++c) {
    in_region = true;
    try {
      body(c, range(c), range(c + 1));
    } catch (...) {
      errors[c] = std::current_exception();
    }
    in_region = false;
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

void cpu_parallel_range(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  const int64_t pieces = std::min<int64_t>(n / std::max<int64_t>(grain, 1), 1 << 20);
  if (pieces < 2 || cpu_threads() == 1) {
    body(0, n);
    return;
  }
  const int p = static_cast<int>(pieces);
  cpu_parallel_for(p, [&](int, int p0, int p1) { body(n * p0 / p, n * p1 / p); });
}

namespace detail {

void* thread_scratch_bytes(int slot, size_t bytes) {
  constexpr int kSlots = 4;
  struct Buffer {
    std::unique_ptr<unsigned char[]> data;
    size_t size = 0;
  };
  thread_local Buffer buffers[kSlots];
  CORTADO_CHECK(slot >= 0 && slot < kSlots) << "thread_scratch: slot " << slot << " of " << kSlots;
  Buffer& b = buffers[slot];
  if (b.size < bytes + 64) {
    b.size = std::max(bytes + 64, b.size + b.size / 2);
    b.data.reset(new unsigned char[b.size]);  // not value-initialized: no zeroing
  }
  const auto at = reinterpret_cast<uintptr_t>(b.data.get());
  return b.data.get() + ((64 - at % 64) % 64);
}

}  // namespace detail

}  // namespace cortado
