#include "cortado/util/cpu_parallel.hpp"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cortado/common.hpp"
#include "cortado/util/env.hpp"
#include "cortado/util/openmp_spin.hpp"

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

namespace {

// The busy ticks (user, nice, system, irq, softirq, steal) that /proc/stat
// counts on the cores this process may run on; -1 where it cannot be read.
int64_t busy_ticks_of_our_cores() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  const bool have_mask = sched_getaffinity(0, sizeof(mask), &mask) == 0;
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return -1;
  int64_t busy = 0;
  bool any = false;
  char line[512];
  while (std::fgets(line, sizeof(line), f)) {
    int cpu = -1;
    unsigned long long v[8] = {};
    // "cpuN user nice system idle iowait irq softirq steal ..."; the summary line "cpu " has no N.
    if (std::sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1], &v[2], &v[3], &v[4],
                    &v[5], &v[6], &v[7]) != 9)
      continue;
    if (have_mask && (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &mask))) continue;
    busy += static_cast<int64_t>(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
    any = true;
  }
  std::fclose(f);
  return any ? busy : -1;
}

double own_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The switch cpu_share (set_cpu_share); off pins the workers at every thread.
std::atomic<bool> g_share{true};
constexpr int kEveryThread = 1 << 16;

// The workers' count, revised every kWindow from the cores' load over the
// window before.
struct CoreShare {
  static constexpr std::chrono::milliseconds kWindow{250};
  std::atomic<int> pinned{0};  // > 0: that many (at most cpu_threads()), always
  std::atomic<int> workers{0};  // 0: not decided yet (cpu_threads())
  std::mutex mu;
  bool primed = false, broken = false;
  std::chrono::steady_clock::time_point last;
  int64_t last_busy = 0;
  double last_own = 0;
  std::atomic<int64_t> next_ns{0};  // steady_clock time of the next look

  int get(int threads) {
    if (const int p = pinned.load(std::memory_order_relaxed)) return std::min(p, threads);
    if (threads == 1) return 1;
    const auto now = std::chrono::steady_clock::now();
    const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
    if (now_ns >= next_ns.load(std::memory_order_relaxed)) {
      std::unique_lock<std::mutex> lock(mu, std::try_to_lock);
      if (lock.owns_lock() && !broken) look(now, threads);
    }
    const int w = workers.load(std::memory_order_relaxed);
    return w > 0 ? std::min(w, threads) : threads;
  }

  void look(std::chrono::steady_clock::time_point now, int threads) {
    const int64_t busy = busy_ticks_of_our_cores();
    const double own = own_cpu_seconds();
    if (busy < 0) {  // no /proc/stat: every thread, always
      broken = true;
      return;
    }
    if (primed) {
      const double wall = std::chrono::duration<double>(now - last).count();
      static const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
      if (wall > 0 && hz > 0) {
        const double others = std::max(0.0, (static_cast<double>(busy - last_busy) / hz - (own - last_own)) / wall);
        const double free_cores = static_cast<double>(threads) - others;
        workers.store(std::max(1, std::min(threads, static_cast<int>(std::lround(free_cores)))),
                      std::memory_order_relaxed);
      }
    }
    primed = true;
    last = now;
    last_busy = busy;
    last_own = own;
    next_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>((now + kWindow).time_since_epoch()).count(),
                  std::memory_order_relaxed);
  }
};

CoreShare& core_share() {
  static CoreShare share;
  return share;
}

}  // namespace

bool cpu_share_off() { return !g_share.load(std::memory_order_relaxed); }

void set_cpu_share(bool on) {
  g_share.store(on);
  core_share().pinned.store(on ? 0 : kEveryThread);
}

int cpu_workers() { return core_share().get(cpu_threads()); }

int pin_cpu_workers(int n) { return core_share().pinned.exchange(std::max(n, 0)); }

std::string cpu_threads_summary() {
  const int t = cpu_threads();
  std::string s = std::to_string(t) + (t == 1 ? " thread" : " threads");
  if (t > 1 && core_share().pinned.load() == 0) s += ", fewer while other processes keep the cores busy";
  // What limit_openmp_spinning() or the user set for libgomp's idle threads.
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
    if (const char* v = env_value(name)) s += str_cat(", ", name, "=", v);
  switch (openblas_get_parallel()) {
    case kBlasSequential: return s + " (OpenBLAS: sequential build)";
    case kBlasPthreads: return s + " (OpenBLAS: pthreads build, whose own threads run the GEMMs; the layers stay on one)";
    case kBlasOpenMp:
      return s + " (OpenBLAS: OpenMP build, sharing the layers' threads)";
    default:
      return s + " (OpenBLAS: unknown build)";
  }
}

void limit_openmp_spinning(char** argv) {
#ifdef _OPENMP
  // The user's settings stand; so does the behaviour of cpu_share off.
  if (env_value("OMP_WAIT_POLICY") || env_value("GOMP_SPINCOUNT") || cpu_share_off()) return;
  // Once set, the variable also ends the recursion: the program run again returns above.
  if (setenv("GOMP_SPINCOUNT", std::to_string(kOpenMpSpinCount).c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("GOMP_SPINCOUNT");  // not run again: libgomp keeps its defaults, and so do our children
#else
  (void)argv;
#endif
}

int cpu_chunks(int n) { return std::max(1, std::min(n, cpu_threads())); }

bool cpu_in_chunk() { return in_region; }

namespace {

// cpu_parallel_for, and with blas_alone also a single chunk outside a
// region runs as a region's chunk does: marked, its BLAS calls on one thread.
void parallel_for(int n, const std::function<void(int, int, int)>& body, bool blas_alone) {
  if (n <= 0) return;
  const int chunks = cpu_chunks(n);
  auto range = [n, chunks](int c) { return static_cast<int>(static_cast<long long>(n) * c / chunks); };
  const int workers = chunks == 1 || in_region ? 1 : std::min(chunks, cpu_workers());
  if (in_region || (chunks == 1 && !blas_alone)) {
    for (int c = 0; c < chunks; ++c) body(c, range(c), range(c + 1));
    return;
  }
  // Only reached with in_region false: each thread (the caller included)
  // marks itself while it runs chunks w, w + workers, ... in turn. The
  // chunks' ranges are the same whatever `workers` is.
  std::vector<std::exception_ptr> errors(chunks);
  auto run = [&](int w, int stride) {
    in_region = true;
    for (int c = w; c < chunks; c += stride) {
      try {
        body(c, range(c), range(c + 1));
      } catch (...) {
        errors[c] = std::current_exception();
      }
    }
    in_region = false;
  };
  if (workers == 1) {
    // The chunks in turn on this thread, outside a parallel region: their
    // BLAS calls must still run on one thread, as on a worker, or a GEMM
    // split over OpenBLAS's threads would change the results' bits.
#ifdef _OPENMP
    const int blas_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    run(0, 1);
    omp_set_num_threads(blas_threads);
#else
    run(0, 1);
#endif
  } else {
#ifdef _OPENMP
    // The stride is the team OpenMP gave, which may be smaller than asked.
#pragma omp parallel num_threads(workers)
    run(omp_get_thread_num(), omp_get_num_threads());
#else
    run(0, 1);
#endif
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

void cpu_parallel_for(int n, const std::function<void(int, int, int)>& body) { parallel_for(n, body, false); }

void cpu_parallel_blocks(int blocks, const std::function<void(int begin, int end)>& body) {
  parallel_for(blocks, [&](int, int b0, int b1) { body(b0, b1); }, true);
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
