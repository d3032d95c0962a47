// SPP's gradient sum over the pyramid levels. One thread per bottom element
// (grid-stride, 64-bit indexes): spp_accumulate adds one level's stored
// gradient into a math-type accumulator (float for half, double for double);
// spp_finish adds the last level and rounds once into the storage type. The
// same additions in the same order as the CPU path.
#include "cortado/layers/spp_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void spp_accumulate_kernel(int64_t n, const T* g, dmath_t<T>* acc, bool first) {
  CORTADO_KERNEL_LOOP(i, n) acc[i] = first ? load(g, i) : add_rn(acc[i], load(g, i));
}

template <typename T>
__global__ void spp_finish_kernel(int64_t n, const dmath_t<T>* acc, T* dx) {
  CORTADO_KERNEL_LOOP(i, n) store(dx, i, add_rn(acc[i], load(dx, i)));
}

}  // namespace

namespace gpu {

template <typename T>
void spp_accumulate(int64_t n, const T* g, math_t<T>* acc, bool first, CUstream_st* stream) {
  if (n == 0) return;
  spp_accumulate_kernel<dev_t<T>><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(g), acc, first);
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void spp_finish(int64_t n, const math_t<T>* acc, T* dx, CUstream_st* stream) {
  if (n == 0) return;
  spp_finish_kernel<dev_t<T>><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, acc, dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_SPP(T)                                                        \
  template void spp_accumulate<T>(int64_t, const T*, math_t<T>*, bool, CUstream_st*);   \
  template void spp_finish<T>(int64_t, const math_t<T>*, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_SPP)

}  // namespace gpu
}  // namespace cortado
