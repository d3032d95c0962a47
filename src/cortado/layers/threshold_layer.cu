// Threshold kernel. One thread per element in a grid-stride loop (64-bit
// indexes); each value is loaded into its math type and compared with the
// threshold rounded to that type, as on the CPU. Nothing accumulates.
#include "cortado/layers/threshold_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void threshold_forward_kernel(int64_t n, const T* x, T* y, dmath_t<T> t) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) store(y, i, load(x, i) > t ? M(1) : M(0));
}

}  // namespace

namespace gpu {

template <typename T>
void threshold_forward(int64_t n, const T* x, T* y, double threshold, CUstream_st* stream) {
  if (n == 0) return;
  using M = dmath_t<dev_t<T>>;
  threshold_forward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, dev(x), dev(y), M(threshold));
  CORTADO_KERNEL_CHECK();
}

template void threshold_forward<double>(int64_t, const double*, double*, double, CUstream_st*);
template void threshold_forward<float>(int64_t, const float*, float*, double, CUstream_st*);
template void threshold_forward<float16>(int64_t, const float16*, float16*, double, CUstream_st*);
template void threshold_forward<bfloat16>(int64_t, const bfloat16*, bfloat16*, double, CUstream_st*);

}  // namespace gpu
}  // namespace cortado
