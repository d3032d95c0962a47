// BatchNorm through cuDNN's NHWC kernels (cudnn_batch_norm.hpp).
#include "cudnn_batch_norm.hpp"

#ifdef CORTADO_USE_CUDA
#include <algorithm>

#include <glog/logging.h>

#include "cortado/common.hpp"
#include "cortado/util/cuda.hpp"

namespace cortado {
namespace cudnn_bn {

namespace {
constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
const float kOne = 1.f, kZero = 0.f;
using Device = std::unique_ptr<void, void (*)(void*)>;
}  // namespace

CudnnBatchNorm::CudnnBatchNorm() {
  CORTADO_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_));
  CORTADO_CUDNN_CHECK(cudnnCreateTensorDescriptor(&param_));
  CORTADO_CUDNN_CHECK(cudnnCreateActivationDescriptor(&act_));
  CORTADO_CUDNN_CHECK(cudnnSetActivationDescriptor(act_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
}

CudnnBatchNorm::~CudnnBatchNorm() {
  cudnnDestroyTensorDescriptor(x_);
  cudnnDestroyTensorDescriptor(param_);
  cudnnDestroyActivationDescriptor(act_);
}

void CudnnBatchNorm::Reshape(int n, int c, int h, int w, bool relu, bool add) {
  CORTADO_CHECK(relu || !add) << "cuDNN adds a residual only before an activation";
  const int shape[6] = {n, c, h, w, relu ? 1 : 0, add ? 1 : 0};
  if (std::equal(shape, shape + 6, shape_)) return;
  std::copy(shape, shape + 6, shape_);
  unsupported_ = false;
  CORTADO_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, n, c, h, w));
  CORTADO_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(param_, x_, kMode));
  relu_ = relu;
  add_ = add;
  channels_ = c;
  sized_ = false;  // the sizes of the new shape at the next forward
  ran_ = false;
}

bool CudnnBatchNorm::Refused(cudnnStatus_t s) {
  // cuDNN 9 reports refusals with detailed codes (CUDNN_STATUS_NOT_SUPPORTED_SHAPE,
  // CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER, ...): their category says it.
  const cudnnStatus_t category = static_cast<cudnnStatus_t>(CUDNN_STATUS_CATEGORY(s));
  if (category != CUDNN_STATUS_NOT_SUPPORTED && category != CUDNN_STATUS_BAD_PARAM) return false;
  LOG(WARNING) << "cuDNN's NHWC BatchNorm does not take " << shape_[0] << "x" << shape_[1] << "x" << shape_[2]
               << "x" << shape_[3] << " (" << cudnnGetErrorString(s) << "): the layer's own kernels run it";
  unsupported_ = true;
  return true;
}

bool CudnnBatchNorm::Size(cudnnHandle_t handle) {
  if (sized_) return true;
  // Each query may refuse the shape (the ReLU-fused variant, say): the
  // layer's kernels then run it.
  cudnnStatus_t s = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(handle, kMode, ops(), x_, z(), x_,
                                                                             param_, act(), &forward_ws_);
  if (Refused(s)) return false;
  CORTADO_CUDNN_CHECK(s);
  s = cudnnGetBatchNormalizationBackwardExWorkspaceSize(handle, kMode, ops(), x_, relu_ ? x_ : nullptr, x_, z(), x_,
                                                        param_, act(), &backward_ws_);
  if (Refused(s)) return false;
  CORTADO_CUDNN_CHECK(s);
  size_t bytes = 0;
  s = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(handle, kMode, ops(), act(), x_, &bytes);
  if (Refused(s)) return false;
  CORTADO_CUDNN_CHECK(s);
  if (bytes > reserve_bytes_) {
    reserve_ = Device(cuda::device_alloc(bytes), &cuda::device_free);
    reserve_bytes_ = bytes;
  }
  if (running_count_ < static_cast<size_t>(channels_)) {
    // Read (with factor 0) though never used: zeros, so that nothing reads
    // uninitialized memory.
    running_ = Device(cuda::device_alloc(2 * sizeof(float) * channels_), &cuda::device_free);
    cudaStream_t stream = nullptr;
    CORTADO_CUDNN_CHECK(cudnnGetStream(handle, &stream));
    CORTADO_CUDA_CHECK(cudaMemsetAsync(running_.get(), 0, 2 * sizeof(float) * channels_, stream));
    running_count_ = static_cast<size_t>(channels_);
  }
  sized_ = true;
  return true;
}

bool CudnnBatchNorm::Forward(cudnnHandle_t handle, const void* x, void* y, const float* gamma, const float* beta,
                             double eps, float* mean, float* inv_std, const void* z_data) {
  if (unsupported_ || !Size(handle)) return false;
  float* running = static_cast<float*>(running_.get());
  // A factor of 0 leaves cuDNN's running statistics as they are: the layer
  // keeps Caffe's own (mean and variance sums with a scale factor).
  const cudnnStatus_t s = cudnnBatchNormalizationForwardTrainingEx(
      handle, kMode, ops(), &kOne, &kZero, x_, x, z(), add_ ? z_data : nullptr, x_, y, param_, gamma, beta, 0.0,
      running, running + channels_, eps, mean, inv_std, act(), cuda::stream_workspace(forward_ws_), forward_ws_,
      reserve_.get(), reserve_bytes_);
  if (!ran_ && Refused(s)) return false;  // the first call of a shape checks it; nothing was written
  CORTADO_CUDNN_CHECK(s);
  ran_ = true;
  return true;
}

void CudnnBatchNorm::Backward(cudnnHandle_t handle, const void* x, const void* y, const void* dy, void* dx,
                              const float* gamma, const float* beta, float* dgamma, float* dbeta, double eps,
                              const float* mean, const float* inv_std, void* dz) {
  CORTADO_CHECK(sized_) << "cuDNN BatchNorm backward before its forward";
  CORTADO_CHECK(!add_ || (dz && dz != dy)) << "cuDNN BatchNorm: the residual's gradient needs memory of its own";
  CORTADO_CUDNN_CHECK(cudnnBatchNormalizationBackwardEx(
      handle, kMode, ops(), &kOne, &kZero, &kOne, &kZero, x_, x, relu_ ? x_ : nullptr, relu_ ? y : nullptr, x_, dy,
      z(), add_ ? dz : nullptr, x_, dx, param_, gamma, beta, dgamma, dbeta, eps, mean, inv_std, act(),
      cuda::stream_workspace(backward_ws_), backward_ws_, reserve_.get(), reserve_bytes_));
}

}  // namespace cudnn_bn
}  // namespace cortado
#endif  // CORTADO_USE_CUDA
