#pragma once
// One buffer of raw bytes with a host copy and, in CUDA builds, a device
// copy, and a head that says which copy is newest (as in Caffe).
//
// - A new buffer is zero and holds no memory (head UNINITIALIZED). Each side
//   is allocated when it is first touched, never before: a buffer that lives
//   on the device never gets a host copy, and fresh device memory is zeroed
//   on the device (cudaMemsetAsync on the calling thread's stream), not
//   uploaded from the host. Fresh host memory comes zeroed from calloc, so
//   large buffers cost no pass over memory until they are written.
// - cpu_data()/gpu_data() bring the newest values to that side first;
//   mutable_* also make that side the only valid one.
// - Host memory is pageable unless the buffer is made with pinned_host
//   (for buffers that cross to the device every iteration: the Data layer's
//   batches, masks drawn on the host), and then only in CUDA builds with a
//   device present. Host-to-device copies run on the calling thread's
//   stream (asynchronous from pinned memory); device-to-host copies wait for
//   that stream. A host write after an asynchronous host-to-device copy
//   first waits for that copy (an event), so the copy never reads
//   half-written values.
// - Device memory comes from the caching allocator, on the device current
//   at the first gpu access.

#include <cstddef>

namespace cortado {

class SyncedMemory {
 public:
  enum class Head { UNINITIALIZED, CPU, GPU, SYNCED };

  explicit SyncedMemory(size_t bytes, bool pinned_host = false);
  ~SyncedMemory();
  SyncedMemory(const SyncedMemory&) = delete;
  SyncedMemory& operator=(const SyncedMemory&) = delete;

  size_t size() const { return size_; }
  Head head() const { return head_; }
  /// Whether host or device memory has been allocated (for tests).
  bool has_cpu() const { return cpu_ptr_ != nullptr; }
  bool has_gpu() const { return gpu_ptr_ != nullptr; }
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

  void alloc_host();  // zeroed

  void* cpu_ptr_ = nullptr;   // 64-byte aligned (or pinned)
  void* cpu_base_ = nullptr;  // what calloc returned (unpinned)
  void* gpu_ptr_ = nullptr;
  size_t size_ = 0;
  bool want_pinned_ = false;
  bool pinned_ = false;
  Head head_ = Head::UNINITIALIZED;
  void* upload_done_ = nullptr;  // cudaEvent_t, created at the first asynchronous upload
  bool upload_pending_ = false;
};

}  // namespace cortado
