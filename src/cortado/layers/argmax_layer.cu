// ArgMax kernel. One thread per searched row (grid-stride, 64-bit indexes).
// The thread makes top_k passes over its row; pass k finds the largest
// (value, index) pair, compared lexicographically as the CPU's
// std::greater<pair> does, strictly below the pair found by pass k-1. Values
// are compared in dmath_t (float for half, double for double); results are
// written as float. Nothing accumulates.
#include "cortado/layers/argmax_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void argmax_kernel(int64_t num, int64_t dim, int64_t stride, int top_k, int mode, const T* x,
                              float* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(r, num) {
    const int64_t base = r / stride * dim * stride + r % stride;
    M prev_v = 0;
    int64_t prev_j = -1;
    for (int k = 0; k < top_k; ++k) {
      M best_v = 0;
      int64_t best_j = -1;
      for (int64_t j = 0; j < dim; ++j) {
        const M v = load(x, base + j * stride);
        const bool below = prev_j < 0 || v < prev_v || (v == prev_v && j < prev_j);
        const bool better = best_j < 0 || v > best_v || (v == best_v && j > best_j);
        if (below && better) {
          best_v = v;
          best_j = j;
        }
      }
      prev_v = best_v;
      prev_j = best_j;
      if (mode == 2) {
        y[2 * r * top_k + k] = static_cast<float>(best_j);
        y[2 * r * top_k + top_k + k] = static_cast<float>(best_v);
      } else {
        y[(r / stride * top_k + k) * stride + r % stride] =
            mode == 1 ? static_cast<float>(best_v) : static_cast<float>(best_j);
      }
    }
  }
}

}  // namespace

namespace gpu {

template <typename T>
void argmax_forward(int64_t num, int64_t dim, int64_t stride, int top_k, int mode, const T* x, float* y,
                    CUstream_st* stream) {
  if (num == 0) return;
  argmax_kernel<dev_t<T>><<<cuda::blocks_for(num), cuda::kThreads, 0, stream>>>(num, dim, stride, top_k, mode,
                                                                                  dev(x), y);
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_ARGMAX(T) \
  template void argmax_forward<T>(int64_t, int64_t, int64_t, int, int, const T*, float*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_ARGMAX)

}  // namespace gpu
}  // namespace cortado
