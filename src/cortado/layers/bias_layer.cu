// Kernels of BiasLayer; x, y are (outer, dim, inner).
// Forward: a grid-stride loop over every element, y = x + b[d] in float
// (double for double), rounded once. Backward: sum dy per bias value d in
// float (double for double), many blocks per value (channel_reduce.cuh).

#include "cortado/layers/bias_layer.hpp"
#include "cortado/util/storage_types.hpp"
#include "channel_reduce.cuh"
#include "device_values.cuh"

namespace cortado {

namespace {

using namespace kernels;

template <typename I, typename T>
__global__ void forward_kernel(int64_t total, int64_t dim, int64_t inner, const T* x, const T* b, T* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(j, total) store(y, j, M(load(x, j)) + M(load(b, kernels::channel_of<I>(j, inner, dim))));
}

template <typename T>
struct SumDy {
  const T* dy;
  __device__ void operator()(int64_t j, int64_t, dmath_t<T>* acc) const { acc[0] += load(dy, j); }
};
template <typename T>
struct FinishDb {
  bool accumulate;
  T* db;
  __device__ void operator()(int64_t d, const dmath_t<T>* t) const {
    using M = dmath_t<T>;
    store(db, d, (accumulate ? M(load(db, d)) : M(0)) + t[0]);
  }
};

}  // namespace

namespace gpu {

template <typename T>
void bias_forward(int64_t outer, int64_t dim, int64_t inner, const T* x, const T* b, T* y, CUstream_st* stream) {
  const int64_t total = outer * dim * inner;
  if (total == 0) return;
  CORTADO_LAUNCH_INDEXED(forward_kernel, total, stream, total, dim, inner, dev(x), dev(b), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void bias_backward(int64_t outer, int64_t dim, int64_t inner, const T* dy, bool accumulate, T* db,
                   CUstream_st* stream) {
  if (dim == 0) return;
  using D = dev_t<T>;
  kernels::channel_reduce<1, dmath_t<D>>(kernels::ChannelShape{outer, dim, inner}, SumDy<D>{dev(dy)},
                                         FinishDb<D>{accumulate, dev(db)}, stream);
}

#define CORTADO_INSTANTIATE_BIAS_GPU(T)                                                                  \
  template void bias_forward<T>(int64_t, int64_t, int64_t, const T*, const T*, T*, CUstream_st*);       \
  template void bias_backward<T>(int64_t, int64_t, int64_t, const T*, bool, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_BIAS_GPU)
#undef CORTADO_INSTANTIATE_BIAS_GPU

}  // namespace gpu

}  // namespace cortado
