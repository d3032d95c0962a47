#pragma once
// Where a net runs: the CPU, or one CUDA device with its own compute stream
// and library handles. A Net owns one Context and hands it to its layers;
// there is no process-wide mode. Layers enqueue work on stream() and never
// synchronize it; the Net and the Solver do (Context::Synchronize).
//
// The CUDA types are named by their underlying struct pointers so that this
// header needs no CUDA include and compiles in a CPU-only build.

#include <cstdint>
#include <memory>

struct CUstream_st;
struct cublasContext;
struct cudnnContext;

namespace cortado {

class Context {
 public:
  /// The CPU context.
  Context() = default;
  /// A context on CUDA device `device` (creates a stream, a cuBLAS and a
  /// cuDNN handle). Throws Error in a build without CUDA or if the device
  /// does not exist.
  static std::shared_ptr<Context> Create(int device);
  static std::shared_ptr<Context> Cpu();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  bool on_gpu() const { return device_ >= 0; }
  int device() const { return device_; }
  CUstream_st* stream() const { return stream_; }
  cublasContext* cublas() const { return cublas_; }
  cudnnContext* cudnn() const { return cudnn_; }
  /// A number no other Context of this process has had: what caches of
  /// handle-bound state (cuDNN's finalized graph plans) key on, since a new
  /// Context's handles may reuse a dead one's addresses.
  uint64_t serial() const { return serial_; }
  /// Makes this context's device current and its stream the one that
  /// SyncedMemory copies on, for the calling thread.
  void Activate() const;
  /// Waits for the stream (a no-op on the CPU).
  void Synchronize() const;

 private:
  static uint64_t NextSerial();
  uint64_t serial_ = NextSerial();
  int device_ = -1;
  CUstream_st* stream_ = nullptr;
  cublasContext* cublas_ = nullptr;
  cudnnContext* cudnn_ = nullptr;
};

}  // namespace cortado
