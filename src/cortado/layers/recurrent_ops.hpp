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
#include "cortado/layers/lstm_layer.hpp"
#include "cortado/layers/recurrent_layer.hpp"
#include "cortado/util/math.hpp"
#include "cortado/util/gpu_math.hpp"

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
  /// One LSTM step (see gpu::lstm_forward_step in lstm_layer.hpp).
  void lstm_forward_step(int64_t N, int64_t H, const M* cont, const M* c_prev, M* gates, M* c, M* h) const {
    auto sigmoid = [](M v) { return M(1) / (M(1) + std::exp(-v)); };
    for (int64_t n = 0; n < N; ++n) {
      M* a = gates + n * 4 * H;
      for (int64_t j = 0; j < H; ++j) {
        const M i = sigmoid(a[j]), f = sigmoid(a[H + j]), o = sigmoid(a[2 * H + j]), g = std::tanh(a[3 * H + j]);
        a[j] = i;
        a[H + j] = f;
        a[2 * H + j] = o;
        a[3 * H + j] = g;
        const M cn = cont[n] * f * c_prev[n * H + j] + i * g;
        c[n * H + j] = cn;
        h[n * H + j] = o * std::tanh(cn);
      }
    }
  }
  /// The step's backward (see gpu::lstm_backward_step in lstm_layer.hpp).
  void lstm_backward_step(int64_t N, int64_t H, const M* cont, const M* c_prev, const M* gates, const M* c,
                          const M* dh_top, const M* dh, M* dc, M* dgates) const {
    for (int64_t n = 0; n < N; ++n) {
      const M* a = gates + n * 4 * H;
      M* da = dgates + n * 4 * H;
      for (int64_t j = 0; j < H; ++j) {
        const int64_t k = n * H + j;
        const M i = a[j], f = a[H + j], o = a[2 * H + j], g = a[3 * H + j];
        const M tc = std::tanh(c[k]);
        const M dhk = (dh_top ? dh_top[k] : M(0)) + dh[k];
        const M dck = dc[k] + dhk * o * (M(1) - tc * tc);
        da[j] = dck * g * i * (M(1) - i);
        da[H + j] = dck * cont[n] * c_prev[k] * f * (M(1) - f);
        da[2 * H + j] = dhk * tc * o * (M(1) - o);
        da[3 * H + j] = dck * i * (M(1) - g * g);
        dc[k] = dck * cont[n] * f;
      }
    }
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
  void lstm_forward_step(int64_t N, int64_t H, const M* cont, const M* c_prev, M* gates, M* c, M* h) const {
    gpu::lstm_forward_step<M>(N, H, cont, c_prev, gates, c, h, stream);
  }
  void lstm_backward_step(int64_t N, int64_t H, const M* cont, const M* c_prev, const M* gates, const M* c,
                          const M* dh_top, const M* dh, M* dc, M* dgates) const {
    gpu::lstm_backward_step<M>(N, H, cont, c_prev, gates, c, dh_top, dh, dc, dgates, stream);
  }
};
#endif

}  // namespace cortado::recurrent

// The four passes of a layer written once over these operations (LSTM, RNN,
// LSTMUnit): its ForwardWith / BackwardWith run with CpuOps on the host and
// GpuOps on the context's cuBLAS handle and stream on the device. Expands,
// in namespace cortado, to the definitions of Class's Forward_cpu,
// Backward_cpu and, in a CUDA build, Forward_gpu and Backward_gpu.
#define CORTADO_RECURRENT_PASSES_(Class, Side, ops)                                                     \
  template <typename Ftype, typename Btype>                                                            \
  void Class<Ftype, Btype>::Forward_##Side(const BlobVec& bottom, const BlobVec& top) {                \
    ForwardWith(ops, bottom, top);                                                                     \
  }                                                                                                    \
  template <typename Ftype, typename Btype>                                                            \
  void Class<Ftype, Btype>::Backward_##Side(const BlobVec& top, const std::vector<bool>& propagate_down, \
                                            const BlobVec& bottom) {                                   \
    BackwardWith(ops, top, propagate_down, bottom);                                                    \
  }
#ifdef CORTADO_USE_CUDA
#define CORTADO_RECURRENT_GPU_PASSES_(Class) \
  CORTADO_RECURRENT_PASSES_(Class, gpu,      \
                            (recurrent::GpuOps<M>{this->context().cublas(), this->context().stream()}))
#else
#define CORTADO_RECURRENT_GPU_PASSES_(Class)
#endif
#define CORTADO_RECURRENT_PASSES(Class)                     \
  CORTADO_RECURRENT_PASSES_(Class, cpu, recurrent::CpuOps<M>{}) \
  CORTADO_RECURRENT_GPU_PASSES_(Class)
