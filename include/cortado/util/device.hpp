#pragma once
// GPU discovery. In a build without the CUDA backend every function throws
// Error saying so; with it, they report what the CUDA runtime sees.

#include <string>
#include <vector>

namespace cortado {

/// Number of CUDA devices (0 when the driver finds none).
int DeviceCount();
/// A multi-line description of device `id` (name, capability, memory, SMs).
std::string DeviceQuery(int id);
/// Parses --gpu ("0", "0,1", "all") into device ids; throws Error if a
/// device does not exist or the build has no CUDA backend.
std::vector<int> ParseGpuFlag(const std::string& flag);

}  // namespace cortado
