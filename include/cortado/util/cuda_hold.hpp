#pragma once
// CUDA builds: while a HoldFrees lives on a thread, the device blocks the
// thread frees (cuda::device_free) are not given back to their pool but
// appended to a list, whose owner frees them later. A CUDA graph captured
// meanwhile (solvers/step_graph.hpp) keeps the addresses of the temporary
// blocks its layers freed during the capture; held, they are not handed to
// anyone else while the graph may replay. PyTorch keeps a graph's memory in a
// private pool for the same reason.
#include <vector>

namespace cortado {
namespace cuda {

class HoldFrees {
 public:
  explicit HoldFrees(std::vector<void*>* held);
  ~HoldFrees();
  HoldFrees(const HoldFrees&) = delete;
  HoldFrees& operator=(const HoldFrees&) = delete;

 private:
  std::vector<void*>* before_;
};

}  // namespace cuda
}  // namespace cortado
