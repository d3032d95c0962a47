// Row gather kernels of BatchReindex (and Filter). Forward: one thread per
// top element (grid-stride, 64-bit indexes) copies its source value.
// Backward: one thread per bottom element walks its row's list of picking top
// rows (CSR, ascending, built on the host) and sums their diffs in dmath_t
// (float for half, double for double) in list order, as the CPU does, then
// stores once: deterministic, no atomics.
#include "cortado/layers/batch_reindex_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void gather_rows_kernel(int64_t n, int64_t inner, const int* index, const T* x, T* y) {
  CORTADO_KERNEL_LOOP(k, n) {
    const int64_t i = k / inner;
    y[k] = x[static_cast<int64_t>(index[i]) * inner + (k - i * inner)];
  }
}

template <typename T>
__global__ void gather_rows_backward_kernel(int64_t n, int64_t inner, const int* begin, const int* source,
                                            const T* dy, T* dx) {
  CORTADO_KERNEL_LOOP(k, n) {
    const int64_t j = k / inner, c = k - j * inner;
    dmath_t<T> sum = 0;
    for (int e = begin[j]; e < begin[j + 1]; ++e) {
      sum = add_rn(sum, load(dy, static_cast<int64_t>(source[e]) * inner + c));
    }
    store(dx, k, sum);
  }
}

}  // namespace

namespace gpu {

template <typename T>
void gather_rows(int64_t n, int64_t inner, const int* index, const T* x, T* y, CUstream_st* stream) {
  if (n == 0) return;
  gather_rows_kernel<dev_t<T>><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, inner, index, dev(x), dev(y));
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void gather_rows_backward(int64_t n, int64_t inner, const int* begin, const int* source, const T* dy, T* dx,
                          CUstream_st* stream) {
  if (n == 0) return;
  gather_rows_backward_kernel<dev_t<T>><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, inner, begin, source,
                                                                                             dev(dy), dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_GATHER_ROWS(T)                                                                   \
  template void gather_rows<T>(int64_t, int64_t, const int*, const T*, T*, CUstream_st*);                  \
  template void gather_rows_backward<T>(int64_t, int64_t, const int*, const int*, const T*, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_GATHER_ROWS)

}  // namespace gpu
}  // namespace cortado
