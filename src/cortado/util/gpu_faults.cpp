#include "cortado/util/gpu_faults.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "cortado/common.hpp"
#include "cortado/util/env.hpp"

#ifdef CORTADO_USE_CUDA
#include <cuda_runtime.h>
#endif

namespace cortado {


double NcclTimeoutSeconds() {
  const char* v = env_value("CORTADO_NCCL_TIMEOUT");
  if (!v) return kNcclTimeoutDefault;
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(v, &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(s) || s < 0)
    fail("CORTADO_NCCL_TIMEOUT = '", v, "': expected a number of seconds, at least 0 (0: no limit)");
  return s;
}

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
