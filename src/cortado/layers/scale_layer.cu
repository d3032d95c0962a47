// Kernels of ScaleLayer; x, y are (outer, dim, inner).
// Forward and dx: grid-stride loops over every element, computing in float
// (double for double) and rounding once. Parameter gradients: sum dy * x and
// sum dy per scale value d in float (double for double), many blocks per
// value (channel_reduce.cuh); the finishing step writes ds[d] and db[d].

#include "cortado/layers/scale_layer.hpp"
#include "cortado/util/storage_types.hpp"
#include "channel_reduce.cuh"
#include "device_values.cuh"

namespace cortado {

namespace {

using namespace kernels;

template <typename I, typename T>
__global__ void forward_kernel(int64_t total, int64_t dim, int64_t inner, const T* x, const T* s, const T* b, T* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(j, total) {
    const int64_t d = kernels::channel_of<I>(j, inner, dim);
    const M v = M(load(x, j)) * M(load(s, d));
    store(y, j, b ? v + M(load(b, d)) : v);
  }
}

template <typename I, typename T>
__global__ void dx_kernel(int64_t total, int64_t dim, int64_t inner, const T* dy, const T* s, T* dx) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(j, total) store(dx, j, M(load(dy, j)) * M(load(s, kernels::channel_of<I>(j, inner, dim))));
}

// The parameter gradients: sum dy * x (ds) and sum dy (db) per scale value,
// through channel_reduce.cuh (many blocks per value, a fixed order).
template <typename T, typename X>
struct SumParams {
  const T* dy;
  const X* x;  // in the forward's type, as the CPU reads it; null: no ds
  __device__ void operator()(int64_t j, int64_t, dmath_t<T>* acc) const {
    using M = dmath_t<T>;
    const M g = load(dy, j);
    if (x) acc[0] += g * M(load(x, j));
    acc[1] += g;
  }
};
template <typename T>
struct FinishParams {
  T* ds;
  bool accumulate_s;
  T* db;
  __device__ void operator()(int64_t d, const dmath_t<T>* t) const {
    using M = dmath_t<T>;
    if (ds) store(ds, d, (accumulate_s ? M(load(ds, d)) : M(0)) + t[0]);
    if (db) store(db, d, M(load(db, d)) + t[1]);
  }
};

}  // namespace

namespace gpu {

template <typename T>
void scale_forward(int64_t outer, int64_t dim, int64_t inner, const T* x, const T* s, const T* b, T* y,
                   CUstream_st* stream) {
  const int64_t total = outer * dim * inner;
  if (total == 0) return;
  CORTADO_LAUNCH_INDEXED(forward_kernel, total, stream, total, dim, inner, dev(x), dev(s), dev(b), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void scale_backward_dx(int64_t outer, int64_t dim, int64_t inner, const T* dy, const T* s, T* dx,
                       CUstream_st* stream) {
  const int64_t total = outer * dim * inner;
  if (total == 0) return;
  CORTADO_LAUNCH_INDEXED(dx_kernel, total, stream, total, dim, inner, dev(dy), dev(s), dev(dx));
  CORTADO_KERNEL_CHECK();
}

template <typename T, typename X>
void scale_backward_params(int64_t outer, int64_t dim, int64_t inner, const T* dy, const X* x, T* ds,
                           bool accumulate_s, T* db, CUstream_st* stream) {
  if (dim == 0) return;
  using D = dev_t<T>;
  kernels::channel_reduce<2, dmath_t<D>>(kernels::ChannelShape{outer, dim, inner},
                                         SumParams<D, dev_t<X>>{dev(dy), ds ? dev(x) : nullptr},
                                         FinishParams<D>{dev(ds), accumulate_s, dev(db)}, stream);
}

#define CORTADO_INSTANTIATE_SCALE_GPU(T)                                                                          \
  template void scale_forward<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, T*, CUstream_st*);     \
  template void scale_backward_dx<T>(int64_t, int64_t, int64_t, const T*, const T*, T*, CUstream_st*);           \
  template void scale_backward_params<T, T>(int64_t, int64_t, int64_t, const T*, const T*, T*, bool, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_SCALE_GPU)
#undef CORTADO_INSTANTIATE_SCALE_GPU
// The mixed pairs: gradients in one type, the saved input in the other.
template void scale_backward_params<float, float16>(int64_t, int64_t, int64_t, const float*, const float16*, float*,
                                                    bool, float*, CUstream_st*);
template void scale_backward_params<float16, float>(int64_t, int64_t, int64_t, const float16*, const float*,
                                                    float16*, bool, float16*, CUstream_st*);

}  // namespace gpu

}  // namespace cortado
