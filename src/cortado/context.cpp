#include "cortado/context.hpp"

#include <atomic>

#include "cortado/common.hpp"
#include "cortado/util/cuda.hpp"

namespace cortado {

std::shared_ptr<Context> Context::Cpu() { return std::make_shared<Context>(); }

uint64_t Context::NextSerial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

#ifdef CORTADO_USE_CUDA
std::shared_ptr<Context> Context::Create(int device) {
  if (device < 0) return Cpu();
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || device >= n) {
    cudaGetLastError();
    fail("CUDA device ", device, " does not exist (", n, " device(s) found)");
  }
  auto c = std::shared_ptr<Context>(new Context());
  c->device_ = device;
  CORTADO_CUDA_CHECK(cudaSetDevice(device));
  CORTADO_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking));
  CORTADO_CUBLAS_CHECK(cublasCreate(&c->cublas_));
  // FP32 accumulation means FP32 to the end: no split-K partial sums rounded
  // to a 16-bit output type (cuBLAS may otherwise do that for FP16 and BF16).
  CORTADO_CUBLAS_CHECK(
      cublasSetMathMode(c->cublas_, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                              CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  CORTADO_CUBLAS_CHECK(cublasSetStream(c->cublas_, c->stream_));
  CORTADO_CUDNN_CHECK(cudnnCreate(&c->cudnn_));
  CORTADO_CUDNN_CHECK(cudnnSetStream(c->cudnn_, c->stream_));
  return c;
}

Context::~Context() {
  if (device_ < 0) return;
  cudaSetDevice(device_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cuda::release_stream(stream_);  // its workspace and cached blocks: a new stream may get this handle
    // This thread's current stream must not outlive it (GPU work before the
    // next Activate would go to a dead or reused handle).
    if (cuda::stream() == stream_) cuda::set_stream(nullptr);
    cudaStreamDestroy(stream_);
  }
}

void Context::Activate() const {
  if (device_ < 0) {
    if (cuda::available()) cuda::set_stream(nullptr);
    return;
  }
  CORTADO_CUDA_CHECK(cudaSetDevice(device_));
  cuda::set_stream(stream_);
}

void Context::Synchronize() const {
  if (device_ >= 0) CORTADO_CUDA_CHECK(cudaStreamSynchronize(stream_));
}
#else
std::shared_ptr<Context> Context::Create(int device) {
  if (device < 0) return Cpu();
  fail("this build of Cortado has no CUDA backend; rebuild with -DUSE_CUDA=ON to use device ", device);
}
Context::~Context() = default;
void Context::Activate() const {}
void Context::Synchronize() const {}
#endif

}  // namespace cortado
