// Permute: one thread per written element splits its linear index by the
// written array's strides and reads the source through the permuted strides.
#include "cortado/layers/permute_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

template <typename T>
__global__ void permute_gather_kernel(int64_t n, PermuteStrides s, const T* x, T* y) {
  CORTADO_KERNEL_LOOP(k, n) {
    int64_t rem = k, src = 0;
    for (int i = 0; i < s.axes; ++i) {
      const int64_t j = rem / s.out_stride[i];
      rem -= j * s.out_stride[i];
      src += j * s.in_stride[i];
    }
    y[k] = x[src];
  }
}

}  // namespace

namespace gpu {

template <typename T>
void permute_gather(int64_t n, const PermuteStrides& s, const T* x, T* y, CUstream_st* stream) {
  if (n == 0) return;
  using D = kernels::dev_t<T>;
  permute_gather_kernel<D><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, s, kernels::dev(x),
                                                                               kernels::dev(y));
  CORTADO_KERNEL_CHECK();
}

template void permute_gather<double>(int64_t, const PermuteStrides&, const double*, double*, CUstream_st*);
template void permute_gather<float>(int64_t, const PermuteStrides&, const float*, float*, CUstream_st*);
template void permute_gather<float16>(int64_t, const PermuteStrides&, const float16*, float16*, CUstream_st*);
template void permute_gather<bfloat16>(int64_t, const PermuteStrides&, const bfloat16*, bfloat16*, CUstream_st*);

}  // namespace gpu
}  // namespace cortado
