#pragma once
// One buffer of raw bytes with a host copy and, in CUDA builds, a device
// copy, and a head that says which copy is newest (as in Caffe).
//
// - A new buffer is zero, its head on the host.
// - cpu_data()/gpu_data() bring the newest values to that side first;
//   mutable_* also make that side the only valid one.
// - Host memory is pinned when a CUDA device is present, so host-to-device
//   copies are asynchronous on the calling thread's stream; device-to-host
//   copies wait for that stream. A host write after an asynchronous
//   host-to-device copy first waits for that copy (an event), so the copy
//   never reads half-written values.
// - Device memory comes from the caching allocator, on the device current
//   at the first gpu access.

#include <cstddef>

namespace cortado {

class SyncedMemory {
 public:
  enum class Head { CPU, GPU, SYNCED };

  explicit SyncedMemory(size_t bytes);
  ~SyncedMemory();
  SyncedMemory(const SyncedMemory&) = delete;
  SyncedMemory& operator=(const SyncedMemory&) = delete;

  size_t size() const { return size_; }
  Head head() const { return head_; }
  const void* cpu_data();
  void* mutable_cpu_data();
  const void* gpu_data();
  void* mutable_gpu_data();
  /// Zeroes the newest copy and makes it the only valid one.
  void set_zero();

 private:
  void to_cpu();
  void to_gpu();
  void wait_for_upload();  // before any host write

  void* cpu_ptr_ = nullptr;  // 64-byte aligned (or pinned), zero-initialized
  void* gpu_ptr_ = nullptr;
  size_t size_ = 0;
  bool pinned_ = false;
  Head head_ = Head::CPU;
  void* upload_done_ = nullptr;  // cudaEvent_t, created at the first asynchronous upload
  bool upload_pending_ = false;
};

}  // namespace cortado
