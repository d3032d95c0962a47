// Tile kernels. Forward: one thread per top element (grid-stride, 64-bit
// indexes) copies its source value. Backward: one thread per bottom element
// sums its `tiles` top diffs in dmath_t (float for half, double for double)
// in tile order, as the CPU does, and stores once.
#include "cortado/layers/tile_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void tile_forward_kernel(int64_t n, int64_t tiles, int64_t inner, const T* x, T* y) {
  CORTADO_KERNEL_LOOP(k, n) {
    const int64_t o = k / (tiles * inner);
    y[k] = x[o * inner + k % inner];
  }
}

template <typename T>
__global__ void tile_backward_kernel(int64_t n, int64_t tiles, int64_t inner, const T* dy, T* dx) {
  CORTADO_KERNEL_LOOP(k, n) {
    const int64_t o = k / inner, i = k % inner;
    dmath_t<T> sum = 0;
    for (int64_t t = 0; t < tiles; ++t) sum = add_rn(sum, load(dy, (o * tiles + t) * inner + i));
    store(dx, k, sum);
  }
}

}  // namespace

namespace gpu {

template <typename T>
void tile_forward(int64_t n, int64_t tiles, int64_t inner, const T* x, T* y, CUstream_st* stream) {
  if (n == 0) return;
  tile_forward_kernel<dev_t<T>><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, tiles, inner, dev(x),
                                                                                      dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void tile_backward(int64_t n, int64_t tiles, int64_t inner, const T* dy, T* dx, CUstream_st* stream) {
  if (n == 0) return;
  tile_backward_kernel<dev_t<T>><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, tiles, inner, dev(dy),
                                                                                       dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_TILE(T)                                                       \
  template void tile_forward<T>(int64_t, int64_t, int64_t, const T*, T*, CUstream_st*); \
  template void tile_backward<T>(int64_t, int64_t, int64_t, const T*, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_TILE)

}  // namespace gpu
}  // namespace cortado
