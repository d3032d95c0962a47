// Softmax kernels. The input is (outer, C, inner); every (outer, inner)
// column of C values is normalized on its own.
//
// inner == 1 (the classifier case, contiguous rows): one warp per row, rows
// in a grid-stride loop. Lane l handles channels l, l + 32, ...; the maximum
// and the sum are reduced across the warp with shuffles. Three passes over
// the row: max, sum of exp(x - max), then y = exp(x - max) / sum (exp is
// recomputed rather than stored). Every lane reads its own elements before
// writing them, and the warp reductions order the passes, so x and y may
// alias.
//
// inner > 1 (spatial softmax): one thread per column, columns in a
// grid-stride loop; neighbouring threads own neighbouring inner positions,
// so each pass over c reads coalesced rows.
//
// Everything (max, exp, sums, the backward's dot product) is computed in
// math_t of the storage type: float for float16, double for double. Values
// are stored once.
#include "cortado/layers/softmax_layer.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

constexpr int kWarp = 32;

template <typename M>
__device__ __forceinline__ M warp_max(M v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <typename M>
__device__ __forceinline__ M warp_sum(M v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename In, typename Out>
__global__ void softmax_rows_kernel(int64_t rows, int channels, const In* x, Out* y) {
  using M = dmath_t<In>;
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t r = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / kWarp; r < rows; r += warps) {
    const In* xr = x + r * channels;
    Out* yr = y + r * channels;
    M mx = -INFINITY;
    for (int c = lane; c < channels; c += kWarp) mx = max(mx, M(load(xr, c)));
    mx = warp_max(mx);
    M sum = 0;
    for (int c = lane; c < channels; c += kWarp) sum += exp_of(M(load(xr, c)) - mx);
    sum = warp_sum(sum);
    for (int c = lane; c < channels; c += kWarp) store(yr, c, exp_of(M(load(xr, c)) - mx) / sum);
  }
}

template <typename In, typename Out>
__global__ void softmax_columns_kernel(int64_t columns, int channels, int inner, const In* x, Out* y) {
  using M = dmath_t<In>;
  CORTADO_KERNEL_LOOP(col, columns) {
    const int64_t base = (col / inner) * int64_t(channels) * inner + col % inner;
    M mx = load(x, base);
    for (int c = 1; c < channels; ++c) mx = max(mx, M(load(x, base + int64_t(c) * inner)));
    M sum = 0;
    for (int c = 0; c < channels; ++c) sum += exp_of(M(load(x, base + int64_t(c) * inner)) - mx);
    for (int c = 0; c < channels; ++c) {
      const int64_t k = base + int64_t(c) * inner;
      store(y, k, exp_of(M(load(x, k)) - mx) / sum);
    }
  }
}

template <typename T>
__global__ void softmax_backward_rows_kernel(int64_t rows, int channels, const T* y, const T* dy, T* dx) {
  using M = dmath_t<T>;
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t r = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / kWarp; r < rows; r += warps) {
    const int64_t base = r * channels;
    M dot = 0;
    for (int c = lane; c < channels; c += kWarp) dot += M(load(dy, base + c)) * M(load(y, base + c));
    dot = warp_sum(dot);
    for (int c = lane; c < channels; c += kWarp) {
      store(dx, base + c, M(load(y, base + c)) * (M(load(dy, base + c)) - dot));
    }
  }
}

template <typename T>
__global__ void softmax_backward_columns_kernel(int64_t columns, int channels, int inner, const T* y, const T* dy,
                                                T* dx) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(col, columns) {
    const int64_t base = (col / inner) * int64_t(channels) * inner + col % inner;
    M dot = 0;
    for (int c = 0; c < channels; ++c) {
      const int64_t k = base + int64_t(c) * inner;
      dot += M(load(dy, k)) * M(load(y, k));
    }
    for (int c = 0; c < channels; ++c) {
      const int64_t k = base + int64_t(c) * inner;
      store(dx, k, M(load(y, k)) * (M(load(dy, k)) - dot));
    }
  }
}

int warp_blocks(int64_t rows) { return cuda::blocks_for(rows * kWarp); }

}  // namespace

namespace gpu {

template <typename In, typename Out>
void softmax_forward(int outer, int channels, int inner, const In* x, Out* y, CUstream_st* stream) {
  const int64_t columns = int64_t(outer) * inner;
  if (columns == 0 || channels == 0) return;
  if (inner == 1) {
    softmax_rows_kernel<<<warp_blocks(columns), cuda::kThreads, 0, stream>>>(columns, channels, dev(x), dev(y));
  } else {
    softmax_columns_kernel<<<cuda::blocks_for(columns), cuda::kThreads, 0, stream>>>(columns, channels, inner,
                                                                                       dev(x), dev(y));
  }
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void softmax_backward(int outer, int channels, int inner, const T* y, const T* dy, T* dx, CUstream_st* stream) {
  const int64_t columns = int64_t(outer) * inner;
  if (columns == 0 || channels == 0) return;
  if (inner == 1) {
    softmax_backward_rows_kernel<<<warp_blocks(columns), cuda::kThreads, 0, stream>>>(columns, channels, dev(y),
                                                                                        dev(dy), dev(dx));
  } else {
    softmax_backward_columns_kernel<<<cuda::blocks_for(columns), cuda::kThreads, 0, stream>>>(
        columns, channels, inner, dev(y), dev(dy), dev(dx));
  }
  CORTADO_KERNEL_CHECK();
}

template void softmax_forward<double, double>(int, int, int, const double*, double*, CUstream_st*);
template void softmax_forward<float, float>(int, int, int, const float*, float*, CUstream_st*);
template void softmax_forward<float16, float16>(int, int, int, const float16*, float16*, CUstream_st*);
template void softmax_forward<float16, float>(int, int, int, const float16*, float*, CUstream_st*);
template void softmax_forward<bfloat16, bfloat16>(int, int, int, const bfloat16*, bfloat16*, CUstream_st*);
template void softmax_forward<bfloat16, float>(int, int, int, const bfloat16*, float*, CUstream_st*);
template void softmax_backward<double>(int, int, int, const double*, const double*, double*, CUstream_st*);
template void softmax_backward<float>(int, int, int, const float*, const float*, float*, CUstream_st*);
template void softmax_backward<float16>(int, int, int, const float16*, const float16*, float16*, CUstream_st*);
template void softmax_backward<bfloat16>(int, int, int, const bfloat16*, const bfloat16*, bfloat16*, CUstream_st*);

}  // namespace gpu
}  // namespace cortado
