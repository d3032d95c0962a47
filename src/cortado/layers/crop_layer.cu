// Crop kernels. One thread per top element (grid-stride, 64-bit indexes):
// the thread decomposes its index in the top's shape, adds the offsets and
// recomposes it with bottom0's strides. Pure copies of stored values; nothing
// accumulates, so the GPU matches the CPU bit for bit.
#include "cortado/layers/crop_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

__device__ __forceinline__ int64_t crop_index(int64_t t, const gpu::CropGeometry& g) {
  int64_t index = 0;
  for (int a = g.num_axes - 1; a >= 0; --a) {
    index += (t % g.top_shape[a] + g.offset[a]) * g.bottom_stride[a];
    t /= g.top_shape[a];
  }
  return index;
}

template <typename T>
__global__ void crop_forward_kernel(int64_t n, gpu::CropGeometry g, const T* x, T* y) {
  CORTADO_KERNEL_LOOP(t, n) { y[t] = x[crop_index(t, g)]; }
}

template <typename T>
__global__ void crop_backward_kernel(int64_t n, gpu::CropGeometry g, const T* dy, T* dx) {
  CORTADO_KERNEL_LOOP(t, n) { dx[crop_index(t, g)] = dy[t]; }
}

}  // namespace

namespace gpu {

template <typename T>
void crop_forward(int64_t n, const CropGeometry& g, const T* x, T* y, CUstream_st* stream) {
  if (n == 0) return;
  crop_forward_kernel<dev_t<T>><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, g, dev(x), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void crop_backward(int64_t n, const CropGeometry& g, const T* dy, T* dx, CUstream_st* stream) {
  if (n == 0) return;
  crop_backward_kernel<dev_t<T>><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, g, dev(dy), dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_CROP(T)                                                          \
  template void crop_forward<T>(int64_t, const CropGeometry&, const T*, T*, CUstream_st*); \
  template void crop_backward<T>(int64_t, const CropGeometry&, const T*, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_CROP)

}  // namespace gpu
}  // namespace cortado
