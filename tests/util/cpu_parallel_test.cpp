// cpu_parallel_for (util/cpu_parallel.hpp): the chunks cover the range once,
// in order, run on different threads when there are several, a nested call
// runs in turn on its caller's thread, an exception reaches the caller,
// BLAS calls inside chunks give the single-threaded results, and the
// trainer limits the spinning of OpenMP's idle threads.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <cmath>
#include <cstring>
#include <mutex>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "command.hpp"
#include "cortado/util/cpu_parallel.hpp"
#include "cortado/util/math.hpp"
#include "cortado/util/openmp_spin.hpp"
#include "test_paths.hpp"

namespace cortado {
namespace {

TEST(CpuParallel, ChunksCoverTheRangeOnceInOrder) {
  ASSERT_GE(cpu_threads(), 1);
  for (int n : {1, 2, 3, 7, 64, 1001}) {
    const int chunks = cpu_chunks(n);
    EXPECT_GE(chunks, 1);
    EXPECT_LE(chunks, n);
    EXPECT_LE(chunks, cpu_threads());
    std::vector<int> seen(n, 0);
    std::vector<std::pair<int, int>> ranges(chunks, {-1, -1});
    std::atomic<int> calls{0};
    cpu_parallel_for(n, [&](int chunk, int begin, int end) {
      ++calls;
      ranges[chunk] = {begin, end};
      for (int i = begin; i < end; ++i) ++seen[i];
    });
    EXPECT_EQ(calls.load(), chunks) << "n=" << n;
    for (int i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "n=" << n << " i=" << i;
    // Contiguous, ascending, near-equal.
    EXPECT_EQ(ranges.front().first, 0);
    EXPECT_EQ(ranges.back().second, n);
    for (int c = 1; c < chunks; ++c) EXPECT_EQ(ranges[c].first, ranges[c - 1].second);
    for (const auto& r : ranges) {
      EXPECT_GE(r.second - r.first, n / chunks);
      EXPECT_LE(r.second - r.first, n / chunks + 1);
    }
  }
}

TEST(CpuParallel, NothingToDoCallsNothing) {
  bool called = false;
  cpu_parallel_for(0, [&](int, int, int) { called = true; });
  EXPECT_FALSE(called);
  EXPECT_EQ(cpu_chunks(0), 1);
}

TEST(CpuParallel, ChunksRunOnSeveralThreads) {
  if (cpu_threads() < 2) GTEST_SKIP() << "one CPU thread (OPENBLAS_NUM_THREADS or OpenBLAS's pthreads build)";
  // Every chunk on a thread of its own, however busy the machine is.
  const int pinned = pin_cpu_workers(cpu_threads());
  std::mutex m;
  std::set<std::thread::id> ids;
  // Each chunk waits for the others: only concurrent chunks get past it.
  std::atomic<int> arrived{0};
  const int chunks = cpu_chunks(cpu_threads());
  cpu_parallel_for(cpu_threads(), [&](int, int, int) {
    ++arrived;
    while (arrived.load() < chunks) std::this_thread::yield();
    std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
  });
  pin_cpu_workers(pinned);
  EXPECT_EQ(static_cast<int>(ids.size()), chunks);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 1u) << "the caller runs a chunk itself";
}

// With the cores taken by other processes a region runs its chunks on fewer
// threads (pin_cpu_workers stands in for the load here): the same chunks,
// the same ranges, and with one worker all on the caller's thread.
TEST(CpuParallel, FewerWorkersRunTheSameChunks) {
  const int n = 37;
  auto chunks_seen = [&](int workers, std::set<std::thread::id>* ids) {
    const int before = pin_cpu_workers(workers);
    std::mutex m;
    std::vector<std::pair<int, int>> ranges(static_cast<size_t>(cpu_chunks(n)));
    cpu_parallel_for(n, [&](int chunk, int begin, int end) {
      std::lock_guard<std::mutex> lock(m);
      ranges[static_cast<size_t>(chunk)] = {begin, end};
      ids->insert(std::this_thread::get_id());
    });
    pin_cpu_workers(before);
    return ranges;
  };
  std::set<std::thread::id> all_ids, one_ids;
  const auto all = chunks_seen(cpu_threads(), &all_ids);
  const auto one = chunks_seen(1, &one_ids);
  EXPECT_EQ(all, one);
  ASSERT_EQ(one_ids.size(), 1u);
  EXPECT_EQ(one_ids.count(std::this_thread::get_id()), 1u);
  EXPECT_EQ(pin_cpu_workers(0), 0) << "the default follows the free cores";
}

// A real layer's reductions over chunks: a convolution's weight gradient sums
// per-chunk partial products in chunk order; one worker or all give the same bits.
TEST(CpuParallel, ConvolutionGradientsDoNotDependOnTheWorkers) {
  if (cpu_threads() < 2) GTEST_SKIP() << "one CPU thread";
  const int N = 8, C = 3, H = 9, W = 9, K = 4, R = 3;
  std::vector<float> x(static_cast<size_t>(N) * C * H * W), w(static_cast<size_t>(K) * C * R * R);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.11f * static_cast<float>(i));
  const int OH = H - R + 1, OW = W - R + 1;
  // dW = sum over images of dY(n) * col(n)^T, one partial per chunk, summed in chunk order.
  auto grad = [&](int workers) {
    const int before = pin_cpu_workers(workers);
    const int chunks = cpu_chunks(N);
    std::vector<std::vector<float>> part(static_cast<size_t>(chunks), std::vector<float>(w.size(), 0.f));
    cpu_parallel_for(N, [&](int chunk, int begin, int end) {
      std::vector<float> col(static_cast<size_t>(C) * R * R * OH * OW), dy(static_cast<size_t>(K) * OH * OW);
      for (int n = begin; n < end; ++n) {
        for (int c = 0; c < C; ++c)
          for (int i = 0; i < R; ++i)
            for (int j = 0; j < R; ++j)
              for (int y = 0; y < OH; ++y)
                for (int z = 0; z < OW; ++z)
                  col[((static_cast<size_t>(c) * R + i) * R + j) * OH * OW + y * OW + z] =
                      x[((static_cast<size_t>(n) * C + c) * H + y + i) * W + z + j];
        for (size_t i = 0; i < dy.size(); ++i) dy[i] = std::sin(0.05f * static_cast<float>(i + 131 * n));
        cpu_gemm<float>(Trans::No, Trans::Yes, K, C * R * R, OH * OW, 1.f, dy.data(), col.data(), 1.f,
                        part[static_cast<size_t>(chunk)].data());
      }
    });
    std::vector<float> sum(w.size(), 0.f);
    for (const auto& p : part)
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += p[i];
    pin_cpu_workers(before);
    return sum;
  };
  const std::vector<float> all = grad(cpu_threads()), one = grad(1);
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], one[i]) << i;
}

// Other processes that keep every core busy: within a few of its 250 ms
// looks the count drops below cpu_threads(). (The children spin and exit;
// if /proc/stat cannot be read the count stays and the test says so.)
TEST(CpuParallel, BusyCoresLowerTheWorkers) {
  if (cpu_threads() < 2) GTEST_SKIP() << "one CPU thread";
  if (!std::ifstream("/proc/stat")) GTEST_SKIP() << "no /proc/stat";
  const int before = pin_cpu_workers(0);
  std::vector<pid_t> children;
  for (int i = 0; i < cpu_threads(); ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(3000);
      volatile unsigned long spin = 0;
      while (std::chrono::steady_clock::now() < end) ++spin;
      _exit(0);
    }
    children.push_back(pid);
  }
  int fewest = cpu_threads();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  while (std::chrono::steady_clock::now() < until && fewest == cpu_threads()) {
    fewest = std::min(fewest, cpu_workers());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (pid_t pid : children) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  pin_cpu_workers(before);
  EXPECT_LT(fewest, cpu_threads()) << "with " << cpu_threads() << " processes spinning beside it";
}

TEST(CpuParallel, NestedCallRunsOnTheCallersThread) {
  std::atomic<int> inner_total{0};
  std::atomic<bool> moved{false};
  cpu_parallel_for(8, [&](int, int begin, int end) {
    const std::thread::id outer = std::this_thread::get_id();
    cpu_parallel_for(end - begin, [&](int, int b, int e) {
      if (std::this_thread::get_id() != outer) moved = true;
      inner_total += e - b;
    });
  });
  EXPECT_EQ(inner_total.load(), 8);
  EXPECT_FALSE(moved.load());
}

TEST(CpuParallel, ExceptionReachesTheCaller) {
  std::atomic<int> ran{0};
  const int n = 16;
  try {
    cpu_parallel_for(n, [&](int chunk, int, int) {
      ++ran;
      if (chunk == cpu_chunks(n) - 1) throw std::runtime_error("chunk failed");
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "chunk failed");
  }
  EXPECT_EQ(ran.load(), cpu_chunks(n)) << "every chunk finishes before the rethrow";
  // Usable afterwards.
  std::atomic<int> sum{0};
  cpu_parallel_for(n, [&](int, int b, int e) { sum += e - b; });
  EXPECT_EQ(sum.load(), n);
}

TEST(CpuParallel, RangesCoverOnceAndSmallArraysStayOnTheCaller) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{65536}, int64_t{131072}, int64_t{1000003}}) {
    std::vector<int> seen(static_cast<size_t>(n), 0);
    std::mutex m;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    std::atomic<bool> other_thread{false};
    const std::thread::id caller = std::this_thread::get_id();
    cpu_parallel_range(n, 65536, [&](int64_t lo, int64_t hi) {
      if (std::this_thread::get_id() != caller) other_thread = true;
      for (int64_t i = lo; i < hi; ++i) ++seen[static_cast<size_t>(i)];
      std::lock_guard<std::mutex> lock(m);
      ranges.push_back({lo, hi});
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)], 1) << "n=" << n << " i=" << i;
    if (n < 2 * 65536) {
      EXPECT_LE(ranges.size(), 1u) << "n=" << n << ": below two grains, one call";
      EXPECT_FALSE(other_thread.load());
    } else {
      const int64_t pieces = n / 65536;  // ranges of at least one grain, one chunk of them per thread
      EXPECT_EQ(static_cast<int64_t>(ranges.size()), std::min<int64_t>(pieces, cpu_threads())) << "n=" << n;
      for (const auto& r : ranges) EXPECT_GE(r.second - r.first, 65536) << "n=" << n;
    }
  }
}

// GEMMs inside chunks (BLAS on the chunk's thread) give the products of
// their own images: each output checked against a double-precision sum. (Not
// bit for bit against a multi-threaded GEMM outside: OpenBLAS's kernels for
// the tile edges depend on how it splits the matrix between threads.)
TEST(CpuParallel, GemmInsideChunksMatchesOutside) {
  const int images = 6, M = 50, N = 64, K = 500;
  std::vector<float> a(static_cast<size_t>(M) * K), b(static_cast<size_t>(images) * K * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7919 % 1000) / 1000.0 - 0.5);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 104729 % 1000) / 1000.0 - 0.5);
  std::vector<float> chunked(static_cast<size_t>(images) * M * N, -1.0f);
  cpu_parallel_for(images, [&](int, int n0, int n1) {
    for (int n = n0; n < n1; ++n)
      cpu_gemm<float>(Trans::No, Trans::No, M, N, K, 1.0f, a.data(), b.data() + static_cast<size_t>(n) * K * N, 0.0f,
                      chunked.data() + static_cast<size_t>(n) * M * N);
  });
  for (int n = 0; n < images; ++n) {
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        double want = 0;
        for (int k = 0; k < K; ++k)
          want += static_cast<double>(a[static_cast<size_t>(i) * K + k]) *
                  b[static_cast<size_t>(n) * K * N + static_cast<size_t>(k) * N + j];
        ASSERT_NEAR(chunked[(static_cast<size_t>(n) * M + i) * N + j], want, 1e-4)
            << "image " << n << " (" << i << ", " << j << ")";
      }
    }
  }
}

// A GEMM outside the chunks (a fully connected layer's) runs as fixed blocks
// of C: its bits are the same on one worker and on every core, for each
// transpose and for blocks cut along rows (M > N) and along columns, and
// each output is the product (checked against a double-precision sum, with
// beta, so that a block's offsets into A, B and C are checked too).
TEST(CpuParallel, GemmOutsideChunksGivesTheSameBitsOnAnyWorkers) {
  struct Shape {
    int M, N, K;
  };
  for (const Shape s : {Shape{300, 130, 70}, Shape{70, 300, 90}, Shape{64, 500, 40}, Shape{20, 10, 30}}) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        std::vector<float> a(static_cast<size_t>(s.M) * s.K), b(static_cast<size_t>(s.K) * s.N),
            c0(static_cast<size_t>(s.M) * s.N);
        for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7919 % 1000) / 1000.0 - 0.5);
        for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 104729 % 1000) / 1000.0 - 0.5);
        for (size_t i = 0; i < c0.size(); ++i) c0[i] = static_cast<float>((i * 31 % 100) / 100.0);
        auto run = [&](int workers) {
          const int before = pin_cpu_workers(workers);
          std::vector<float> c = c0;
          cpu_gemm<float>(ta ? Trans::Yes : Trans::No, tb ? Trans::Yes : Trans::No, s.M, s.N, s.K, 1.5f, a.data(),
                          b.data(), 0.5f, c.data());
          pin_cpu_workers(before);
          return c;
        };
        const std::vector<float> one = run(1), all = run(cpu_threads());
        ASSERT_EQ(0, std::memcmp(one.data(), all.data(), one.size() * sizeof(float)))
            << s.M << "x" << s.N << "x" << s.K << " ta " << ta << " tb " << tb;
        for (int i = 0; i < s.M; ++i) {
          for (int j = 0; j < s.N; ++j) {
            double want = 0;
            for (int k = 0; k < s.K; ++k)
              want += static_cast<double>(ta ? a[static_cast<size_t>(k) * s.M + i] : a[static_cast<size_t>(i) * s.K + k]) *
                      (tb ? b[static_cast<size_t>(j) * s.K + k] : b[static_cast<size_t>(k) * s.N + j]);
            want = 1.5 * want + 0.5 * c0[static_cast<size_t>(i) * s.N + j];
            ASSERT_NEAR(one[static_cast<size_t>(i) * s.N + j], want, 1e-4)
                << s.M << "x" << s.N << "x" << s.K << " ta " << ta << " tb " << tb << " (" << i << ", " << j << ")";
          }
        }
      }
    }
  }
}

// The GOMP_SPINCOUNT of each libgomp start in one run of the trainer (no
// command: it prints its usage) with `flags`, with OMP_DISPLAY_ENV=VERBOSE,
// which makes libgomp print its settings as it loads, and `env` (VAR=value
// ...) on top of an environment without the variables that decide it.
std::vector<std::string> SpinCountsOfTrainer(const std::string& env, int* status, const std::string& flags = "") {
  const test::CommandRun r =
      test::RunCommand("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=VERBOSE " + env +
                       " timeout 120 " + test::TrainerPath() + " " + flags);
  *status = r.status;
  std::vector<std::string> counts;
  const std::regex shown("GOMP_SPINCOUNT = '([0-9]+)'");
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), shown), end; it != end; ++it)
    counts.push_back((*it)[1]);
  return counts;
}

// libgomp reads GOMP_SPINCOUNT only when it loads, before main(): the
// trainer runs again from its start with it set (limit_openmp_spinning),
// unless the user chose a wait policy or a spin count, or --cpu_share=0.
TEST(CpuParallel, TrainerRunsAgainWithOpenMpSpinningLimited) {
  int status = -1;
  const std::vector<std::string> plain = SpinCountsOfTrainer("", &status);
  ASSERT_EQ(status, 1) << "the trainer without a command prints its usage and ends with status 1";
  if (plain.empty()) GTEST_SKIP() << "the trainer does not load libgomp (a build without OpenMP)";
  ASSERT_EQ(plain.size(), 2u) << "libgomp loads twice: in the trainer as started and in the trainer run again";
  EXPECT_EQ(plain[1], std::to_string(kOpenMpSpinCount));

  EXPECT_EQ(SpinCountsOfTrainer("GOMP_SPINCOUNT=777", &status), std::vector<std::string>{"777"});
  EXPECT_EQ(status, 1);
  EXPECT_EQ(SpinCountsOfTrainer("OMP_WAIT_POLICY=active", &status).size(), 1u) << "the user's policy stands";
  const std::vector<std::string> fixed = SpinCountsOfTrainer("", &status, "--cpu_share=0");
  EXPECT_EQ(status, 1);
  ASSERT_EQ(fixed.size(), 1u) << "--cpu_share=0 keeps libgomp's defaults";
  EXPECT_EQ(fixed[0], plain[0]);
  EXPECT_EQ(SpinCountsOfTrainer("", &status, "--cpu_share=1").size(), 2u) << "--cpu_share=1 is the default";
}

}  // namespace
}  // namespace cortado
