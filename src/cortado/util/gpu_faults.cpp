#include "cortado/util/gpu_faults.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "cortado/common.hpp"

#ifdef CORTADO_USE_CUDA
#include <cuda_runtime.h>
#endif

namespace cortado {


std::string SynchronizeAndTakeError(const Context& ctx) {
#ifdef CORTADO_USE_CUDA
  if (!ctx.on_gpu()) return "";
  // An asynchronous fault comes back from the synchronize; a failed launch
  // (or runtime call) only from cudaGetLastError, which also clears it.
  cudaError_t e = cudaStreamSynchronize(ctx.stream());
  const cudaError_t last = cudaGetLastError();
  if (e == cudaSuccess) e = last;
  if (e == cudaSuccess) return "";
  return str_cat(cudaGetErrorName(e), ": ", cudaGetErrorString(e));
#else
  (void)ctx;
  return "";
#endif
}

}  // namespace cortado
