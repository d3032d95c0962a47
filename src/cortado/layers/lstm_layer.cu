// LSTM step kernels on the math type (float or double): one thread per state
// value (n, j) of the N x H state reads and writes the four gates of j.
#include "cortado/layers/lstm_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using kernels::sigmoid_of;

__device__ __forceinline__ float tanh_of(float v) { return tanhf(v); }
__device__ __forceinline__ double tanh_of(double v) { return tanh(v); }

template <typename T>
__global__ void forward_step_kernel(int64_t n, int64_t H, const T* cont, const T* c_prev, T* gates, T* c, T* h) {
  CORTADO_KERNEL_LOOP(k, n) {
    const int64_t row = k / H, j = k % H;
    T* a = gates + row * 4 * H;
    const T i = sigmoid_of(a[j]), f = sigmoid_of(a[H + j]), o = sigmoid_of(a[2 * H + j]), g = tanh_of(a[3 * H + j]);
    a[j] = i;
    a[H + j] = f;
    a[2 * H + j] = o;
    a[3 * H + j] = g;
    const T cn = cont[row] * f * c_prev[k] + i * g;
    c[k] = cn;
    h[k] = o * tanh_of(cn);
  }
}

template <typename T>
__global__ void backward_step_kernel(int64_t n, int64_t H, const T* cont, const T* c_prev, const T* gates,
                                     const T* c, const T* dh_top, const T* dh, T* dc, T* dgates) {
  CORTADO_KERNEL_LOOP(k, n) {
    const int64_t row = k / H, j = k % H;
    const T* a = gates + row * 4 * H;
    T* da = dgates + row * 4 * H;
    const T i = a[j], f = a[H + j], o = a[2 * H + j], g = a[3 * H + j];
    const T tc = tanh_of(c[k]);
    const T dhk = (dh_top ? dh_top[k] : T(0)) + dh[k];
    const T dck = dc[k] + dhk * o * (T(1) - tc * tc);
    da[j] = dck * g * i * (T(1) - i);
    da[H + j] = dck * cont[row] * c_prev[k] * f * (T(1) - f);
    da[2 * H + j] = dhk * tc * o * (T(1) - o);
    da[3 * H + j] = dck * i * (T(1) - g * g);
    dc[k] = dck * cont[row] * f;
  }
}

}  // namespace

namespace gpu {

template <typename T>
void lstm_forward_step(int64_t N, int64_t H, const T* cont, const T* c_prev, T* gates, T* c, T* h,
                       CUstream_st* stream) {
  const int64_t n = N * H;
  if (n == 0) return;
  forward_step_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, H, cont, c_prev, gates, c, h);
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void lstm_backward_step(int64_t N, int64_t H, const T* cont, const T* c_prev, const T* gates, const T* c,
                        const T* dh_top, const T* dh, T* dc, T* dgates, CUstream_st* stream) {
  const int64_t n = N * H;
  if (n == 0) return;
  backward_step_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, H, cont, c_prev, gates, c, dh_top, dh,
                                                                           dc, dgates);
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_LSTM(T)                                                                          \
  template void lstm_forward_step<T>(int64_t, int64_t, const T*, const T*, T*, T*, T*, CUstream_st*);       \
  template void lstm_backward_step<T>(int64_t, int64_t, const T*, const T*, const T*, const T*, const T*,   \
                                      const T*, T*, T*, CUstream_st*);
CORTADO_INSTANTIATE_LSTM(float)
CORTADO_INSTANTIATE_LSTM(double)

}  // namespace gpu
}  // namespace cortado
