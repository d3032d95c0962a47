#pragma once
// BatchNorm's training passes through cuDNN's fused NHWC kernels
// (cudnnBatchNormalizationForwardTrainingEx / BackwardEx, the persistent
// spatial mode, with the ReLU fused where the layer's chain has one, and a
// fused residual add before it: CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION), for a
// channels-last FLOAT16 BatchNorm out of place in a net whose
// cudnn.batch_norm is true (batch_norm_layer.hpp says where it applies). cuDNN writes the batch's
// mean and 1 / sqrt(var + eps), which the layer keeps as its own
// statistics; the running statistics stay Caffe's (the layer updates them
// from those). Internal to the library (CUDA builds).

#include "cortado/config.hpp"

#ifdef CORTADO_USE_CUDA
#include <cudnn.h>

#include <cstddef>
#include <memory>

namespace cortado {
namespace cudnn_bn {

class CudnnBatchNorm {
 public:
  CudnnBatchNorm();
  ~CudnnBatchNorm();
  CudnnBatchNorm(const CudnnBatchNorm&) = delete;
  CudnnBatchNorm& operator=(const CudnnBatchNorm&) = delete;

  /// x and y (n, c, h, w) NHWC FLOAT16, the ReLU fused or not, a residual
  /// z added before it or not (add needs relu; nothing changes when they are
  /// the last call's).
  void Reshape(int n, int c, int h, int w, bool relu, bool add = false);
  /// y = [relu](gamma * (x - mean) * inv_std + beta [+ z]) with the batch's
  /// mean and inv_std (float, C) written; gamma and beta float (C); z (the
  /// residual, x's shape) read with add. False, with a warning once per
  /// shape, where cuDNN does not take the shape.
  bool Forward(cudnnHandle_t handle, const void* x, void* y, const float* gamma, const float* beta, double eps,
               float* mean, float* inv_std, const void* z = nullptr);
  /// dx (overwritten) and dgamma, dbeta (float, C, overwritten) from dy, x,
  /// y (read where the ReLU is fused) and the forward's statistics; with add
  /// also dz, the residual's gradient (overwritten; not dy's memory).
  void Backward(cudnnHandle_t handle, const void* x, const void* y, const void* dy, void* dx, const float* gamma,
                const float* beta, float* dgamma, float* dbeta, double eps, const float* mean,
                const float* inv_std, void* dz = nullptr);

 private:
  cudnnBatchNormOps_t ops() const {
    return add_ ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION
                : relu_ ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION : CUDNN_BATCHNORM_OPS_BN;
  }
  cudnnTensorDescriptor_t z() const { return add_ ? x_ : nullptr; }
  cudnnActivationDescriptor_t act() const { return relu_ ? act_ : nullptr; }
  // The workspaces and the reserve space of the shape (once per shape);
  // false where cuDNN does not take it.
  bool Size(cudnnHandle_t handle);

  cudnnTensorDescriptor_t x_ = nullptr, param_ = nullptr;
  cudnnActivationDescriptor_t act_ = nullptr;
  bool relu_ = false, add_ = false;
  int channels_ = 0;
  int shape_[6] = {-1, -1, -1, -1, -1, -1};  // n, c, h, w, relu, add of the descriptors
  bool unsupported_ = false;              // cuDNN refused that shape
  bool sized_ = false;                    // the sizes below are the shape's
  bool ran_ = false;                      // a forward of the shape has run
  // Whether s is cuDNN refusing the shape (then logged, unsupported_ set).
  bool Refused(cudnnStatus_t s);
  size_t forward_ws_ = 0, backward_ws_ = 0;
  std::unique_ptr<void, void (*)(void*)> reserve_{nullptr, nullptr};
  size_t reserve_bytes_ = 0;
  std::unique_ptr<void, void (*)(void*)> running_{nullptr, nullptr};  // cuDNN's running statistics: unused
  size_t running_count_ = 0;
};

}  // namespace cudnn_bn
}  // namespace cortado
#endif  // CORTADO_USE_CUDA
