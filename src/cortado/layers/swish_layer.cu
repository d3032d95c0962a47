// Swish kernels. One thread per element in a grid-stride loop (64-bit
// indexes). The forward computes s = 1 / (1 + exp(-beta x)) and y = x s in
// the forward type's math type, storing s in the backward type and y in the
// forward type; the backward reads dy, y and s and computes
// dy (beta y + s (1 - beta y)) in its math type. Nothing accumulates.
#include "cortado/layers/swish_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename F, typename B>
__global__ void swish_forward_kernel(int64_t n, const F* x, F* y, B* s, dmath_t<F> beta) {
  using M = dmath_t<F>;
  CORTADO_KERNEL_LOOP(i, n) {
    const M v = load(x, i);
    const M sv = sigmoid_of(beta * v);
    store(s, i, sv);
    store(y, i, v * sv);
  }
}

template <typename T>
__global__ void swish_backward_kernel(int64_t n, const T* dy, const T* y, const T* s, T* dx, dmath_t<T> beta) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    const M by = beta * load(y, i), sv = load(s, i);
    store(dx, i, load(dy, i) * (by + sv * (M(1) - by)));
  }
}

}  // namespace

namespace gpu {

template <typename F, typename B>
void swish_forward(int64_t n, const F* x, F* y, B* s, double beta, CUstream_st* stream) {
  if (n == 0) return;
  using M = dmath_t<dev_t<F>>;
  swish_forward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(x), dev(y), dev(s), M(beta));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void swish_backward(int64_t n, const T* dy, const T* y, const T* s, T* dx, double beta, CUstream_st* stream) {
  if (n == 0) return;
  using M = dmath_t<dev_t<T>>;
  swish_backward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(dy), dev(y), dev(s), dev(dx),
                                                                            M(beta));
  CORTADO_KERNEL_CHECK();
}

// The forward for every layer pair (F, B); the backward per storage type.
#define CORTADO_INSTANTIATE_SWISH_FORWARD(X, F, B) \
  template void swish_forward<F, B>(int64_t, const F*, F*, B*, double, CUstream_st*);
CORTADO_FOR_EACH_PAIR(CORTADO_INSTANTIATE_SWISH_FORWARD, _)
#define CORTADO_INSTANTIATE_SWISH_BACKWARD(T) \
  template void swish_backward<T>(int64_t, const T*, const T*, const T*, T*, double, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_SWISH_BACKWARD)

}  // namespace gpu
}  // namespace cortado
