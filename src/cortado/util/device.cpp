#include "cortado/util/device.hpp"

#include <sstream>

#include "cortado/common.hpp"

#ifdef CORTADO_USE_CUDA
#include <cuda_runtime.h>
#endif

namespace cortado {

#ifdef CORTADO_USE_CUDA
int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string DeviceQuery(int id) {
  cudaDeviceProp p;
  const cudaError_t e = cudaGetDeviceProperties(&p, id);
  if (e != cudaSuccess) fail("device ", id, ": ", cudaGetErrorString(e));
  std::ostringstream os;
  os << "Device id:                     " << id << "\n"
     << "Name:                          " << p.name << "\n"
     << "Compute capability:            " << p.major << "." << p.minor << "\n"
     << "Total global memory (MiB):     " << (p.totalGlobalMem >> 20) << "\n"
     << "Multiprocessors:               " << p.multiProcessorCount << "\n"
     << "Shared memory per block (KiB): " << (p.sharedMemPerBlock >> 10) << "\n"
     << "Warp size:                     " << p.warpSize;
  return os.str();
}
#else
int DeviceCount() { return 0; }

std::string DeviceQuery(int id) {
  fail("this build of Cortado has no CUDA backend; configure with -DUSE_CUDA=ON where nvcc is installed");
}
#endif

std::vector<int> ParseGpuFlag(const std::string& flag) {
#ifndef CORTADO_USE_CUDA
  fail("--gpu=", flag, ": this build of Cortado has no CUDA backend; run on the CPU (omit --gpu) or rebuild with "
       "-DUSE_CUDA=ON");
#endif
  const int n = DeviceCount();
  std::vector<int> ids;
  if (flag == "all") {
    for (int i = 0; i < n; ++i) ids.push_back(i);
  } else {
    std::stringstream ss(flag);
    std::string item;
    while (std::getline(ss, item, ',')) {
      char* end = nullptr;
      const long id = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || id < 0) fail("--gpu=", flag, ": '", item, "' is not a device id");
      ids.push_back(static_cast<int>(id));
    }
  }
  if (ids.empty()) fail("--gpu=", flag, ": no CUDA device found");
  for (int id : ids)
    if (id >= n) fail("--gpu=", flag, ": device ", id, " does not exist (", n, " CUDA device(s) found)");
  return ids;
}

}  // namespace cortado
