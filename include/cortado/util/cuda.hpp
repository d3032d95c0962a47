#pragma once
// CUDA helpers for .cu files and GPU paths (CUDA builds only): checked
// calls, the thread's current stream, and the caching device allocator.
//
// Every CUDA, cuBLAS and cuDNN call goes through a CORTADO_*_CHECK macro; a
// failure throws cortado::Error naming the call, the file:line and the
// library's message (out of memory is a user-facing condition, not a bug).

#include "cortado/config.hpp"

#ifdef CORTADO_USE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>

#include "cortado/common.hpp"

// Each check evaluates `expr` once and fails with the file, the line, the
// expression as written and the library's message for a status other than
// success.
#define CORTADO_STATUS_CHECK_(expr, text, Status, ok, message)                          \
  do {                                                                                 \
    const Status cortado_s_ = (expr);                                                  \
    if (cortado_s_ != ok) ::cortado::fail(__FILE__, ":", __LINE__, ": ", text, ": ", message(cortado_s_)); \
  } while (0)
#define CORTADO_CUDA_CHECK(expr) CORTADO_STATUS_CHECK_(expr, #expr, cudaError_t, cudaSuccess, cudaGetErrorString)
#define CORTADO_CUBLAS_CHECK(expr) \
  CORTADO_STATUS_CHECK_(expr, #expr, cublasStatus_t, CUBLAS_STATUS_SUCCESS, cublasGetStatusString)
#define CORTADO_CUDNN_CHECK(expr) \
  CORTADO_STATUS_CHECK_(expr, #expr, cudnnStatus_t, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)
/// After a kernel launch.
#define CORTADO_KERNEL_CHECK() CORTADO_CUDA_CHECK(cudaGetLastError())

namespace cortado {
namespace cuda {

/// The calling thread's current stream (set by Context::Activate; the
/// per-thread default stream otherwise).
cudaStream_t stream();
void set_stream(cudaStream_t s);

/// Whether a CUDA device is usable in this process.
bool available();

/// Device memory from a cache of freed blocks (util/block_pool.hpp: sizes
/// rounded up to 512 bytes, carved by best fit out of 2 MiB segments for
/// blocks up to 1 MiB and larger segments otherwise, split and merged): no
/// cudaMalloc/cudaFree per iteration, and no power-of-two waste. Blocks
/// belong to the device that was current when they were allocated.
void* device_alloc(size_t bytes);
void device_free(void* p);
/// A scratch buffer of at least `bytes` for the calling thread's current
/// stream (the cuDNN workspace), grown to the largest request: the work of
/// one stream is ordered, so its layers can share it, and two streams (two
/// ranks on one device) never do.
void* stream_workspace(size_t bytes);
/// How many times `stream`'s workspace was reallocated (0: never made). A
/// CUDA graph that captured its address is stale once this changes (a test
/// pass or a new shape asked for more): the Solver captures again.
uint64_t stream_workspace_generation(cudaStream_t stream);
/// Frees the workspace and the cached free blocks of `stream`, whose work
/// must be finished (~Context, before destroying its stream).
void release_stream(cudaStream_t stream);
/// Bytes of the blocks handed out now and at most so far (what tensors
/// hold), and the most bytes the allocator held from cudaMalloc at once
/// (blocks plus cached free space), for benchmarks.
size_t device_bytes_in_use();
size_t device_bytes_peak();
size_t device_bytes_reserved_peak();

/// 1D launch geometry: blocks of 256 threads, a grid-stride loop in the kernel.
constexpr int kThreads = 256;
inline int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

}  // namespace cuda
}  // namespace cortado
#endif  // CORTADO_USE_CUDA
