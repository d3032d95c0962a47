// The NCCL engine's entry points in a build without NCCL (CMake compiles
// nccl_communicator.cpp instead where CUDA and NCCL are found).
#include "cortado/comm/communicator.hpp"
#include "cortado/common.hpp"

namespace cortado {

bool NcclBuilt() { return false; }

namespace {
[[noreturn]] void no_nccl() {
  fail("this build has no NCCL communicator: build with CUDA where NCCL (nccl.h, libnccl) is installed");
}
}  // namespace

std::vector<std::shared_ptr<Communicator>> NcclGroup(const std::vector<int>&) { no_nccl(); }

std::shared_ptr<Communicator> NcclOverHost(std::shared_ptr<Communicator>, int) { no_nccl(); }

}  // namespace cortado
