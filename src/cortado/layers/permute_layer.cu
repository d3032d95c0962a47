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

// A batch of (rows, cols) matrices transposed into (cols, rows): 32 x 32
// tiles through shared memory (one column of padding against bank
// conflicts), reads and writes both along rows of 32 neighbours; U is an
// unsigned integer of the element's size (a bit copy).
constexpr int kTile = 32, kTileRows = 8;
template <typename U>
__global__ void transpose_kernel(int rows, int cols, const U* x, U* y) {
  __shared__ U tile[kTile][kTile + 1];
  const int64_t base = int64_t(blockIdx.z) * rows * cols;
  const int c0 = blockIdx.x * kTile, r0 = blockIdx.y * kTile;
  for (int j = threadIdx.y; j < kTile; j += kTileRows) {
    const int r = r0 + j, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[j][threadIdx.x] = x[base + int64_t(r) * cols + c];
  }
  __syncthreads();
  for (int j = threadIdx.y; j < kTile; j += kTileRows) {
    const int c = c0 + j, r = r0 + threadIdx.x;
    if (c < cols && r < rows) y[base + int64_t(c) * rows + r] = tile[threadIdx.x][j];
  }
}

template <typename U>
void launch_transpose(int64_t batch, int64_t rows, int64_t cols, const void* x, void* y, CUstream_st* stream) {
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile),
                  static_cast<unsigned>(batch));
  transpose_kernel<U><<<grid, dim3(kTile, kTileRows), 0, stream>>>(static_cast<int>(rows), static_cast<int>(cols),
                                                                   static_cast<const U*>(x), static_cast<U*>(y));
  CORTADO_KERNEL_CHECK();
}

// PadChannels / UnpadChannels (permute_layer.hpp): one thread per value of
// the padded array (pad: written, zero in the pad channels) or of the
// unpadded one (unpad: written from the padded array), the index
// arithmetic in I (uint32_t where the count allows: a 64-bit division costs
// several 32-bit ones).
template <typename I, typename U>
__global__ void pad_channels_kernel(int64_t n, int c, int64_t inner, int cp, const U* x, U* y) {
  CORTADO_KERNEL_LOOP(k, n) {
    const I kk = static_cast<I>(k), ii = static_cast<I>(inner);
    const I j = kk % static_cast<I>(cp), t = kk / static_cast<I>(cp);
    const I p = t % ii, o = t / ii;
    y[k] = j < static_cast<I>(c) ? x[(int64_t(o) * c + int64_t(j)) * inner + int64_t(p)] : U(0);
  }
}

template <typename I, typename U>
__global__ void unpad_channels_kernel(int64_t n, int c, int64_t inner, int cp, const U* x, U* y) {
  CORTADO_KERNEL_LOOP(k, n) {
    const I kk = static_cast<I>(k), ii = static_cast<I>(inner);
    const I p = kk % ii, t = kk / ii;
    const I o = t / static_cast<I>(c), j = t % static_cast<I>(c);
    y[k] = x[(int64_t(o) * inner + int64_t(p)) * cp + int64_t(j)];
  }
}

template <typename U>
void launch_pad(bool pad, int64_t outer, int c, int64_t inner, int cp, const void* x, void* y, CUstream_st* stream) {
  // Both arrays' counts index in 32 bits, or neither kernel uses them.
  const int64_t n = outer * inner * (pad ? cp : c), larger = outer * inner * cp;
  if (n == 0) return;
  const U* src = static_cast<const U*>(x);
  U* dst = static_cast<U*>(y);
  const bool narrow = larger < (int64_t(1) << 32);
  const auto kernel = pad ? (narrow ? pad_channels_kernel<uint32_t, U> : pad_channels_kernel<uint64_t, U>)
                          : (narrow ? unpad_channels_kernel<uint32_t, U> : unpad_channels_kernel<uint64_t, U>);
  kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, c, inner, cp, src, dst);
  CORTADO_KERNEL_CHECK();
}

}  // namespace

namespace gpu {

bool transpose_batched(int64_t batch, int64_t rows, int64_t cols, size_t bytes, const void* x, void* y,
                       CUstream_st* stream) {
  if (batch <= 0 || rows <= 0 || cols <= 0) return true;
  if (batch > 65535 || (rows + kTile - 1) / kTile > 65535 || (cols + kTile - 1) / kTile > (int64_t(1) << 31) - 1 ||
      rows * cols > (int64_t(1) << 31) - 1)
    return false;
  switch (bytes) {
    case 2: launch_transpose<uint16_t>(batch, rows, cols, x, y, stream); return true;
    case 4: launch_transpose<uint32_t>(batch, rows, cols, x, y, stream); return true;
    case 8: launch_transpose<uint64_t>(batch, rows, cols, x, y, stream); return true;
  }
  return false;
}

void pad_channels(bool pad, int64_t outer, int c, int64_t inner, int cp, size_t bytes, const void* x, void* y,
                  CUstream_st* stream) {
  switch (bytes) {
    case 2: launch_pad<uint16_t>(pad, outer, c, inner, cp, x, y, stream); return;
    case 4: launch_pad<uint32_t>(pad, outer, c, inner, cp, x, y, stream); return;
    case 8: launch_pad<uint64_t>(pad, outer, c, inner, cp, x, y, stream); return;
  }
  CORTADO_CHECK(false) << "pad_channels: values of " << bytes << " bytes";
}

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
