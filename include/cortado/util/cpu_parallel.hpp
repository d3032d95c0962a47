#pragma once
// Data parallelism inside one CPU layer: a batch split into contiguous chunks
// of images (or planes, or rows), one per core.
//
// Why not leave it to BLAS: a CPU convolution is one im2col and a few small
// GEMMs per image (LeNet's conv2: 50 x 64 x 500). OpenBLAS splits each such
// GEMM over its threads and pays a hand-off per call, hundreds of times per
// pass, and the im2col, col2im and pooling loops around them run on one core.
// Giving every core its own images, each with single-threaded GEMMs, keeps
// all cores busy on whole units of work.
//
// Threads: OpenMP's count (OMP_NUM_THREADS, else every core), capped by
// OPENBLAS_NUM_THREADS where that is set, read once at the first call (a Net
// makes it when it is built). The chunks run on OpenMP's threads, which
// OpenBLAS's OpenMP build (the one the build links where it is installed)
// shares; a BLAS call inside a chunk runs on the chunk's thread. A GEMM
// outside the chunks (a fully connected layer's) is cut by cpu_gemm into
// fixed blocks of its output, spread over the cores the same way
// (cpu_parallel_blocks), never over OpenBLAS's own threads.
// That build reads only OMP_NUM_THREADS, so the cap is handed on to it. With
// OpenBLAS's pthreads build, whose own spinning threads would fight the
// chunks for the cores, there is one chunk: the layers run as they would
// without this. A cpu_parallel_for inside another runs its chunks in turn
// on the calling thread.
//
// Determinism: the chunks depend only on n and the thread count, never on
// timing. A layer that sums per-chunk partial results in chunk order gets
// the same bits on every run with the same thread count.
//
// A shared machine. The chunks are fixed, but the threads that run them are
// not: every 250 ms the first region to start looks at how busy the cores
// are (the CPU time /proc/stat counts on this process's cores, less this
// process's own CPU time), and the regions that follow run their chunks on
// as many threads as there are cores left free, rounded, at least one (the
// caller then runs every chunk in turn). OpenMP's idle threads spin for a
// while after a region, so with the cores taken by other processes a region
// on two threads waits for a thread that gets a slice of a core now and
// then, and its spinning takes time from the other processes: measured on
// 2 cores with 2 busy processes beside it, LeNet fell to a tenth of its
// speed. Since the chunks do not change, neither do the results: chunks run
// in turn on the caller keep their BLAS calls on one thread, as on a
// worker; the GEMMs outside the chunks run as fixed blocks, whose bits do
// not depend on the threads at all. The process's switch cpu_share turns
// this off (set_cpu_share(false); trainer --cpu_share=0).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace cortado {

/// The number of threads CPU layers split their work over (at least 1).
/// The first call on each thread hands an OPENBLAS_NUM_THREADS cap to OpenBLAS's OpenMP build.
int cpu_threads();

/// How many threads the next region runs its chunks on: cpu_threads(), or
/// fewer while other processes keep cores busy (see "A shared machine"
/// above).
int cpu_workers();

/// Fixes the workers' count at min(n, cpu_threads()) for n > 0, or lets it
/// follow the free cores for n = 0 (the default; set_cpu_share(false) fixes
/// it at cpu_threads()); returns the previous setting. Tests that need every
/// chunk on a thread of its own, or one thread, set it.
int pin_cpu_workers(int n);

/// One line for logs: "2 threads (OpenBLAS: OpenMP build)", say.
std::string cpu_threads_summary();

/// How many chunks cpu_parallel_for(n, ...) uses: min(n, cpu_threads()), at
/// least 1.
int cpu_chunks(int n);

/// Runs body(chunk, begin, end) for chunk = 0 .. cpu_chunks(n) - 1 over
/// near-equal contiguous ranges [begin, end) covering [0, n), in parallel.
/// An exception thrown by a chunk is rethrown here (the first one, by chunk
/// order) after all chunks have finished.
void cpu_parallel_for(int n, const std::function<void(int chunk, int begin, int end)>& body);

/// Whether the calling thread is running chunks of a cpu_parallel_for (or
/// of cpu_parallel_blocks) now.
bool cpu_in_chunk();

/// The process's switch cpu_share (switches.hpp; trainer --cpu_share,
/// Python's cortado.set_cpu_share). true, the default: the regions follow
/// the free cores and the GEMMs outside them run as fixed blocks (above).
/// false: every region on cpu_threads() threads and the GEMMs outside them
/// on OpenBLAS's own threads, as before the cores were shared (the results
/// then depend on the thread count); the trainer then also leaves libgomp's
/// spinning as it is (openmp_spin.hpp). Pins the workers as
/// pin_cpu_workers(0) or (cpu_threads()) would.
void set_cpu_share(bool on);
/// Whether set_cpu_share(false) is in force.
bool cpu_share_off();

/// For work cut into blocks whose bounds fix the results (a GEMM cut into
/// fixed blocks of C, say): runs body(begin, end) over [0, blocks) in
/// chunks as cpu_parallel_for does, and every BLAS call inside runs on its
/// calling thread alone, even where all the blocks form one chunk, so that
/// the results do not depend on the thread count.
void cpu_parallel_blocks(int blocks, const std::function<void(int begin, int end)>& body);

/// For elementwise loops: runs body(begin, end) over [0, n) in contiguous
/// ranges of at least `grain` values each (so small arrays run in one call
/// on the calling thread), one chunk of ranges per core.
void cpu_parallel_range(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& body);

}  // namespace cortado

namespace cortado {

/// Per-thread scratch for the work inside a chunk: at least n values of T in
/// buffer `slot` (0 .. 3) of the calling thread, 64-byte aligned, not
/// initialized. It grows and is kept for the thread's lifetime, so that a
/// layer's column buffers cost neither an allocation nor the kernel's page
/// zeroing on every pass; it is valid until the same thread asks for the
/// same slot again.
template <typename T> T* thread_scratch(int slot, size_t n);

namespace detail {
void* thread_scratch_bytes(int slot, size_t bytes);
}  // namespace detail

template <typename T> T* thread_scratch(int slot, size_t n) {
  return static_cast<T*>(detail::thread_scratch_bytes(slot, n * sizeof(T)));
}

}  // namespace cortado
