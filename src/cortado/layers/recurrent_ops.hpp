#pragma once
// The device operations a recurrent layer's algorithm is written against, so
// that RNN and LSTM write their forward and backward once for the CPU and
// the GPU. All pointers are math_t arrays (M) on that side; a layer gets them
// through data()/diff()/mutable_data()/mutable_diff() and, after writing a
// Ftype top or a Btype diff through an M pointer, calls round_data() /
// round_diff(), which converts it back to its storage type once (the tensor's
// lazy conversion: nothing happens when the types agree).

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cortado/blob.hpp"
#include "cortado/layers/recurrent_layer.hpp"
#include "cortado/util/math.hpp"
#ifdef CORTADO_USE_CUDA
#include "cortado/util/gpu_math.hpp"
#endif

namespace cortado::recurrent {

template <typename M>
struct CpuOps {
  static constexpr bool kGpu = false;

  const M* data(const Blob& b) const { return b.cpu_data<M>(); }
  const M* diff(const Blob& b) const { return b.cpu_diff<M>(); }
  M* mutable_data(Blob& b) const { return b.mutable_cpu_data<M>(); }
  M* mutable_diff(Blob& b) const { return b.mutable_cpu_diff<M>(); }
  template <typename T> void round_data(Blob& b) const { b.mutable_cpu_data<T>(); }
  template <typename T> void round_diff(Blob& b) const { b.mutable_cpu_diff<T>(); }

  void gemm(Trans ta, Trans tb, int m, int n, int k, M alpha, const M* a, const M* b, M beta, M* c) const {
    cpu_gemm<M>(ta, tb, m, n, k, alpha, a, b, beta, c);
  }
  void gemv(Trans ta, int m, int n, M alpha, const M* a, const M* x, M beta, M* y) const {
    cpu_gemv<M>(ta, m, n, alpha, a, x, beta, y);
  }
  void axpy(int64_t n, M a, const M* x, M* y) const { cpu_axpy<M>(n, a, x, y); }
  void copy(int64_t n, const M* x, M* y) const { cpu_copy<M>(n, x, y); }
  void set(int64_t n, M v, M* y) const { cpu_set<M>(n, v, y); }
  /// y[i, j] = cont[i] * x[i, j]; y may be x.
  void cont_scale(int64_t rows, int64_t cols, const M* cont, const M* x, M* y) const {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = cont[i] * x[i * cols + j];
    }
  }
  /// x = tanh(x).
  void tanh(int64_t n, M* x) const {
    for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
  }
  /// dx = (dy + dy2) * (1 - y^2), dy2 may be null; dx may be dy.
  void tanh_grad(int64_t n, const M* y, const M* dy, const M* dy2, M* dx) const {
    for (int64_t i = 0; i < n; ++i) dx[i] = (dy2 ? dy[i] + dy2[i] : dy[i]) * (M(1) - y[i] * y[i]);
  }
};

#ifdef CORTADO_USE_CUDA
template <typename M>
struct GpuOps {
  static constexpr bool kGpu = true;
  cublasContext* handle;
  CUstream_st* stream;

  const M* data(const Blob& b) const { return b.gpu_data<M>(); }
  const M* diff(const Blob& b) const { return b.gpu_diff<M>(); }
  M* mutable_data(Blob& b) const { return b.mutable_gpu_data<M>(); }
  M* mutable_diff(Blob& b) const { return b.mutable_gpu_diff<M>(); }
  template <typename T> void round_data(Blob& b) const { b.mutable_gpu_data<T>(); }
  template <typename T> void round_diff(Blob& b) const { b.mutable_gpu_diff<T>(); }

  static constexpr Type kMath = std::is_same_v<M, double> ? DOUBLE : FLOAT;
  void gemm(Trans ta, Trans tb, int m, int n, int k, M alpha, const M* a, const M* b, M beta, M* c) const {
    gpu_gemm<M>(handle, ta, tb, m, n, k, static_cast<float>(alpha), a, b, static_cast<float>(beta), c, kMath);
  }
  void gemv(Trans ta, int m, int n, M alpha, const M* a, const M* x, M beta, M* y) const {
    gpu_gemv<M>(handle, ta, m, n, static_cast<float>(alpha), a, x, static_cast<float>(beta), y, kMath);
  }
  void axpy(int64_t n, M a, const M* x, M* y) const { gpu_axpy<M>(n, static_cast<float>(a), x, y, stream); }
  void copy(int64_t n, const M* x, M* y) const { gpu_copy<M>(n, x, y, stream); }
  void set(int64_t n, M v, M* y) const { gpu_set<M>(n, static_cast<float>(v), y, stream); }
  void cont_scale(int64_t rows, int64_t cols, const M* cont, const M* x, M* y) const {
    gpu::recurrent_cont_scale<M>(rows, cols, cont, x, y, stream);
  }
  void tanh(int64_t n, M* x) const { gpu::recurrent_tanh<M>(n, x, stream); }
  void tanh_grad(int64_t n, const M* y, const M* dy, const M* dy2, M* dx) const {
    gpu::recurrent_tanh_grad<M>(n, y, dy, dy2, dx, stream);
  }
};
#endif

}  // namespace cortado::recurrent
