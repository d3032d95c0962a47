#pragma once
// One buffer of raw bytes. Host-only in this build stage: the device side
// (pinned host memory, a device copy and a head saying which is newest) is
// added with the GPU backend behind the same interface.

#include <cstddef>
#include <memory>

namespace cortado {

class SyncedMemory {
 public:
  explicit SyncedMemory(size_t bytes);
  ~SyncedMemory();
  SyncedMemory(const SyncedMemory&) = delete;
  SyncedMemory& operator=(const SyncedMemory&) = delete;

  size_t size() const { return size_; }
  const void* cpu_data() const { return cpu_ptr_; }
  void* mutable_cpu_data() { return cpu_ptr_; }

 private:
  void* cpu_ptr_ = nullptr;  // 64-byte aligned, zero-initialized
  size_t size_ = 0;
};

}  // namespace cortado
