// Split backward: dx = sum over tops of their diffs. One thread per element
// in a grid-stride loop (64-bit indexes); the thread loads the element of up
// to 64 top diffs (pointers passed by value in a PtrPack), sums them in
// math_t (float for float16) in top order, adding the running value of dx
// for the second and later groups of 64, and stores once per group.
#include "cortado/layers/split_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void split_sum_kernel(int64_t n, PtrPack<T> dy, int count, bool accumulate, T* dx) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(i, n) {
    M acc = accumulate ? load(dx, i) : M(0);
    for (int k = 0; k < count; ++k) acc = add_rn(acc, load(dy.p[k], i));
    store(dx, i, acc);
  }
}

}  // namespace

namespace gpu {

template <typename T>
void split_backward(int64_t n, const T* const* dy, int count, T* dx, CUstream_st* stream) {
  if (n == 0) return;
  using D = dev_t<T>;
  for (int first = 0; first < count; first += kMaxPack) {
    PtrPack<D> pack{};
    const int m = count - first < kMaxPack ? count - first : kMaxPack;
    for (int k = 0; k < m; ++k) pack.p[k] = dev(dy[first + k]);
    split_sum_kernel<D><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, pack, m, first > 0, dev(dx));
    CORTADO_KERNEL_CHECK();
  }
}

template void split_backward<double>(int64_t, const double* const*, int, double*, CUstream_st*);
template void split_backward<float>(int64_t, const float* const*, int, float*, CUstream_st*);
template void split_backward<float16>(int64_t, const float16* const*, int, float16*, CUstream_st*);
template void split_backward<bfloat16>(int64_t, const bfloat16* const*, int, bfloat16*, CUstream_st*);

}  // namespace gpu
}  // namespace cortado
