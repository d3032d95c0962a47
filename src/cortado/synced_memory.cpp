#include "cortado/synced_memory.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "cortado/common.hpp"
#include "cortado/util/cuda.hpp"

namespace cortado {

SyncedMemory::SyncedMemory(size_t bytes, bool pinned_host) : size_(bytes), want_pinned_(pinned_host) {}

SyncedMemory::~SyncedMemory() {
#ifdef CORTADO_USE_CUDA
  wait_for_upload();
  if (upload_done_) cudaEventDestroy(static_cast<cudaEvent_t>(upload_done_));
  if (gpu_ptr_) cuda::device_free(gpu_ptr_);
  if (pinned_) {
    cudaFreeHost(cpu_ptr_);
    return;
  }
#endif
  std::free(cpu_base_);
}

void SyncedMemory::alloc_host() {
  if (cpu_ptr_ || size_ == 0) return;
#ifdef CORTADO_USE_CUDA
  if (want_pinned_ && cuda::available()) {
    if (cudaMallocHost(&cpu_ptr_, size_) == cudaSuccess) {
      pinned_ = true;
      std::memset(cpu_ptr_, 0, size_);
      return;
    }
    cudaGetLastError();  // fall back to pageable memory
    cpu_ptr_ = nullptr;
  }
#endif
  // calloc: large blocks come as fresh zero pages, touched only when written.
  cpu_base_ = std::calloc(size_ + 64, 1);
  if (!cpu_base_) throw std::bad_alloc();
  const uintptr_t p = reinterpret_cast<uintptr_t>(cpu_base_);
  cpu_ptr_ = reinterpret_cast<void*>((p + 63) / 64 * 64);
}

#ifdef CORTADO_USE_CUDA
namespace {
// A copy between host and device while the stream is being captured as a
// CUDA graph (solvers/step_graph.hpp) would replay the host values of the
// capture forever, and the copy's event would belong to the graph: it is
// refused before anything is queued, so the capture fails cleanly.
void RefuseInCapture() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(cuda::stream(), &status) == cudaSuccess && status == cudaStreamCaptureStatusNone) return;
  cudaGetLastError();
  fail("a copy between host and device memory in a CUDA graph capture (values that come from the host each pass)");
}
}  // namespace
#endif

void SyncedMemory::to_cpu() {
  switch (head_) {
    case Head::UNINITIALIZED:
      alloc_host();
      head_ = Head::CPU;
      break;
    case Head::GPU:
#ifdef CORTADO_USE_CUDA
      RefuseInCapture();
      alloc_host();
      CORTADO_CUDA_CHECK(cudaMemcpyAsync(cpu_ptr_, gpu_ptr_, size_, cudaMemcpyDeviceToHost, cuda::stream()));
      CORTADO_CUDA_CHECK(cudaStreamSynchronize(cuda::stream()));
      head_ = Head::SYNCED;
#endif
      break;
    case Head::CPU:
    case Head::SYNCED:
      break;
  }
}

void SyncedMemory::to_gpu() {
#ifdef CORTADO_USE_CUDA
  switch (head_) {
    case Head::UNINITIALIZED:
      if (size_) {
        gpu_ptr_ = cuda::device_alloc(size_);
        CORTADO_CUDA_CHECK(cudaMemsetAsync(gpu_ptr_, 0, size_, cuda::stream()));
      }
      head_ = Head::GPU;
      break;
    case Head::CPU:
      RefuseInCapture();
      if (!gpu_ptr_ && size_) gpu_ptr_ = cuda::device_alloc(size_);
      if (size_) {
        CORTADO_CUDA_CHECK(cudaMemcpyAsync(gpu_ptr_, cpu_ptr_, size_, cudaMemcpyHostToDevice, cuda::stream()));
        if (pinned_) {  // from pageable memory the copy has finished reading on return
          if (!upload_done_) {
            cudaEvent_t e;
            CORTADO_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
            upload_done_ = e;
          }
          CORTADO_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(upload_done_), cuda::stream()));
          upload_pending_ = true;
        }
      }
      head_ = Head::SYNCED;
      break;
    case Head::GPU:
    case Head::SYNCED:
      break;
  }
#else
  fail("GPU memory requested in a build without CUDA");
#endif
}

void SyncedMemory::wait_for_upload() {
#ifdef CORTADO_USE_CUDA
  if (upload_pending_) {
    CORTADO_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(upload_done_)));
    upload_pending_ = false;
  }
#endif
}

const void* SyncedMemory::cpu_data() {
  to_cpu();
  return cpu_ptr_;
}

void* SyncedMemory::mutable_cpu_data() {
  to_cpu();
  wait_for_upload();
  head_ = Head::CPU;
  return cpu_ptr_;
}

const void* SyncedMemory::gpu_data() {
  to_gpu();
  return gpu_ptr_;
}

void* SyncedMemory::mutable_gpu_data() {
  to_gpu();
  head_ = Head::GPU;
  return gpu_ptr_;
}

void SyncedMemory::set_zero() {
  if (size_ == 0 || head_ == Head::UNINITIALIZED) return;  // still zero
#ifdef CORTADO_USE_CUDA
  if (head_ == Head::GPU) {
    CORTADO_CUDA_CHECK(cudaMemsetAsync(gpu_ptr_, 0, size_, cuda::stream()));
    return;
  }
#endif
  wait_for_upload();
  std::memset(cpu_ptr_, 0, size_);
  head_ = Head::CPU;
}

}  // namespace cortado
