#pragma once
// The bad-label report of the GPU paths of layers that read class labels
// (SoftmaxWithLoss, Accuracy, HingeLoss, InfogainLoss,
// MultinomialLogisticLoss).
//
// A kernel cannot throw. A kernel thread that meets a label that is not a
// class index writes (position << 32 | the label's float bits) into one word
// of mapped pinned host memory with atomicMin, so the lowest position wins
// (all ones means "no error").
// The layer's next Forward or Backward on the host calls Rethrow() with its
// CPU check: no synchronization, so the report comes once the stream has
// passed the kernel, at the latest one call later, and it is the same error
// as the CPU path's. Embed uses the same word for its indexes.

#include <cstdint>
#include <cstring>

#include "cortado/common.hpp"
#include "cortado/config.hpp"
#include "cortado/util/cuda.hpp"

namespace cortado {

class GpuLabelError {
 public:
  GpuLabelError() = default;
  GpuLabelError(const GpuLabelError&) = delete;
  GpuLabelError& operator=(const GpuLabelError&) = delete;
  ~GpuLabelError() {
#ifdef CORTADO_USE_CUDA
    if (host_) cudaFreeHost(host_);
#endif
  }

#ifdef CORTADO_USE_CUDA
  /// The device address of the word the kernels write; allocated (and set
  /// to "no error") on first use.
  void* device_word() {
    if (!host_) {
      void* p = nullptr;
      CORTADO_CUDA_CHECK(cudaHostAlloc(&p, sizeof(unsigned long long), cudaHostAllocMapped));
      host_ = static_cast<unsigned long long*>(p);
      *host_ = ~0ull;
      CORTADO_CUDA_CHECK(cudaHostGetDevicePointer(&device_, host_, 0));
    }
    return device_;
  }

  /// If a kernel recorded a bad value, clears the record and calls
  /// check(value, position): the layer's CPU check, which throws its error.
  template <typename Check>
  void Rethrow(Check&& check) {
    float v;
    int64_t position;
    if (!Take(&v, &position)) return;
    check(v, position);
    CORTADO_CHECK(false) << "value " << v << " at position " << position
                         << " was recorded as bad on the GPU but passes the CPU check";
  }
#endif

 private:
#ifdef CORTADO_USE_CUDA
  bool Take(float* label, int64_t* position) {
    if (!host_) return false;
    const unsigned long long key = *static_cast<volatile unsigned long long*>(host_);
    if (key == ~0ull) return false;
    *host_ = ~0ull;
    const uint32_t bits = static_cast<uint32_t>(key & 0xffffffffull);
    std::memcpy(label, &bits, sizeof *label);
    *position = static_cast<int64_t>(key >> 32);
    return true;
  }
#endif

  unsigned long long* host_ = nullptr;  // pinned, device-mapped
  void* device_ = nullptr;              // its device address
};

}  // namespace cortado
