#pragma once
// Per-channel sums over a tensor seen as (outer, channels, inner): the
// reductions of BatchNorm (statistics, backward sums), Scale and Bias
// (parameter gradients) and the convolution's bias gradient. .cu files only.
//
// Many blocks per channel. One block per channel leaves most of a GPU idle
// exactly where it matters: ResNet-50 at batch 256 has 64 channels of 56x56,
// 800K values each, and a 64-block grid on a 132-SM GPU runs at a fraction of
// its bandwidth. Here each channel's outer*inner values are cut into `parts`
// contiguous ranges of about kValuesPerPart, one block each (grid channels *
// parts). Each block sums K quantities (a functor adds the terms of element
// j) in the accumulation type A, reduces them in shared memory in a tree and
// writes K partial sums; a second kernel, one thread per channel, adds the
// parts in a fixed order and hands the K totals to a finishing functor (which
// writes the channel's results). No atomics: the result does not depend on
// the schedule. A thread walks its range with (o, i) kept incrementally, so
// there is no 64-bit division per element.
//
// Vector access (channel_reduce_vec): a functor with
//   template <int V, typename A> __device__ void add(int64_t j, int64_t ch, A* acc) const
// adds the terms of the V values j .. j + V - 1, which lie in one row of
// `inner` values, and may read them with one load of V values
// (vector_access.cuh). V comes from reduce_width: the widest of 16, 8 bytes
// whose value count divides inner and whose alignment every array has,
// else 1. A thread then walks its range V values at a time, each
// block about kValuesPerThread loads per thread.
//
// The partial sums live in a scratch block from the caching allocator, freed
// when the launches are enqueued: freed blocks are reused only by later work
// on the same stream (the project's scratch rule).

#include <cstdint>
#include <initializer_list>
#include <memory>

#include "cortado/util/cuda.hpp"
#include "device_values.cuh"

namespace cortado {
namespace kernels {

constexpr int kReduceThreads = 256;
constexpr int64_t kValuesPerPart = 4096;  // scalar loads
constexpr int kValuesPerThread = 8;       // vector loads: kReduceThreads * 8 * V values a block
constexpr int64_t kMaxParts = 512;

struct ChannelShape {
  int64_t outer, channels, inner;
};

/// Blocks per channel for loads of V values: about max(kValuesPerPart,
/// kReduceThreads * kValuesPerThread * V) values each, 1 to kMaxParts.
inline int reduce_parts(const ChannelShape& s, int v = 1) {
  const int64_t m = s.outer * s.inner;
  const int64_t per_part = v > 1 && int64_t(kReduceThreads) * kValuesPerThread * v > kValuesPerPart
                               ? int64_t(kReduceThreads) * kValuesPerThread * v
                               : kValuesPerPart;
  int64_t parts = (m + per_part - 1) / per_part;
  if (parts < 1) parts = 1;
  if (parts > kMaxParts) parts = kMaxParts;
  return static_cast<int>(parts);
}

/// The values per load for arrays whose widest element has `widest` bytes:
/// 16 / widest, else 8 / widest, when inner is a multiple of it and every
/// pointer (null ones ignored) is aligned to its bytes; else 1.
inline int reduce_width(int64_t inner, size_t widest, std::initializer_list<const void*> ptrs) {
  for (const size_t bytes : {size_t(16), size_t(8)}) {
    const int v = static_cast<int>(bytes / widest);
    if (v <= 1 || inner % v != 0) continue;
    bool aligned = true;
    for (const void* p : ptrs)
      if (p && reinterpret_cast<uintptr_t>(p) % bytes != 0) aligned = false;
    if (aligned) return v;
  }
  return 1;
}

// A functor of one value at a time (operator()(j, ch, acc)) as V = 1 terms.
template <typename F>
struct ScalarTerms {
  F f;
  template <int V, typename A>
  __device__ __forceinline__ void add(int64_t j, int64_t ch, A* acc) const {
    f(j, ch, acc);
  }
};

// F: add<V>(j, ch, acc) as above. Each part's range is a multiple of V
// values; a row (inner) is too, so V values never straddle two rows.
template <int K, int V, typename A, typename F>
__global__ void channel_partial_kernel(ChannelShape s, int parts, F f, A* partial) {
  __shared__ A shared[K][kReduceThreads];
  const int64_t ch = blockIdx.x / parts;
  const int64_t part = blockIdx.x % parts;
  const int64_t m = s.outer * s.inner;
  const int64_t chunk = ((m + parts - 1) / parts + V - 1) / V * V;
  const int64_t begin = part * chunk;
  const int64_t end = begin + chunk < m ? begin + chunk : m;
  const int64_t step = int64_t(blockDim.x) * V;
  A acc[K];
  for (int q = 0; q < K; ++q) acc[q] = A(0);
  int64_t k = begin + int64_t(threadIdx.x) * V;
  if (k < end) {
    int64_t o = k / s.inner, i = k - o * s.inner;
    for (; k < end; k += step) {
      f.template add<V>((o * s.channels + ch) * s.inner + i, ch, acc);
      i += step;
      if (i >= s.inner) {
        o += i / s.inner;
        i %= s.inner;
      }
    }
  }
  for (int q = 0; q < K; ++q) shared[q][threadIdx.x] = acc[q];
  __syncthreads();
  for (int w = kReduceThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w)
      for (int q = 0; q < K; ++q) shared[q][threadIdx.x] += shared[q][threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    for (int q = 0; q < K; ++q) partial[(ch * parts + part) * K + q] = shared[q][0];
}

// Fin: __device__ void operator()(int64_t channel, const A* totals) const.
template <int K, typename A, typename Fin>
__global__ void channel_final_kernel(int64_t channels, int parts, const A* partial, Fin fin) {
  CORTADO_KERNEL_LOOP(ch, channels) {
    A total[K];
    for (int q = 0; q < K; ++q) total[q] = A(0);
    for (int p = 0; p < parts; ++p)
      for (int q = 0; q < K; ++q) total[q] += partial[(ch * parts + p) * K + q];
    fin(ch, total);
  }
}

template <int K, int V, typename A, typename F, typename Fin>
void launch_channel_reduce(const ChannelShape& s, const F& f, const Fin& fin, cudaStream_t stream) {
  const int parts = reduce_parts(s, V);
  const size_t bytes = static_cast<size_t>(s.channels) * parts * K * sizeof(A);
  std::unique_ptr<void, void (*)(void*)> scratch(cuda::device_alloc(bytes), &cuda::device_free);
  A* partial = static_cast<A*>(scratch.get());
  channel_partial_kernel<K, V, A><<<static_cast<unsigned>(s.channels * parts), kReduceThreads, 0, stream>>>(
      s, parts, f, partial);
  CORTADO_KERNEL_CHECK();
  channel_final_kernel<K, A><<<cuda::blocks_for(s.channels), cuda::kThreads, 0, stream>>>(s.channels, parts, partial,
                                                                                          fin);
  CORTADO_KERNEL_CHECK();
}

// Channels last (inner == 1, a channels-last blob seen as (N*H*W, C, 1)):
// each channel's values are a column of an (outer, channels) matrix, and a
// block per channel would read them with a stride of C. Here a block is
// kRowTileChannels channels by kRowLanes rows: the threads of a warp read 32
// neighbouring channels of one row (one coalesced load), each thread sums
// its channel over every kRowLanes-th row of its part of the rows, and the
// lanes are added in a fixed order. The partial sums have the layout of
// channel_partial_kernel's, so channel_final_kernel finishes them.
constexpr int kRowTileChannels = 32;
constexpr int kRowLanes = kReduceThreads / kRowTileChannels;
constexpr int64_t kRowsPerPart = 256;

inline int row_reduce_parts(int64_t rows) {
  int64_t parts = (rows + kRowsPerPart - 1) / kRowsPerPart;
  return static_cast<int>(parts < 1 ? 1 : parts > kMaxParts ? kMaxParts : parts);
}

template <int K, typename A, typename F>
__global__ void channel_rows_partial_kernel(ChannelShape s, int parts, F f, A* partial) {
  __shared__ A shared[K][kRowLanes][kRowTileChannels];
  const int64_t ch = int64_t(blockIdx.x) * kRowTileChannels + threadIdx.x;
  const int64_t part = blockIdx.y;
  const int64_t chunk = (s.outer + parts - 1) / parts;
  const int64_t begin = part * chunk;
  const int64_t end = begin + chunk < s.outer ? begin + chunk : s.outer;
  A acc[K];
  for (int q = 0; q < K; ++q) acc[q] = A(0);
  // Unrolled so that several rows' loads are in flight per thread (the
  // terms still add in row order).
  if (ch < s.channels) {
#pragma unroll 4
    for (int64_t r = begin + threadIdx.y; r < end; r += kRowLanes) f.template add<1>(r * s.channels + ch, ch, acc);
  }
  for (int q = 0; q < K; ++q) shared[q][threadIdx.y][threadIdx.x] = acc[q];
  __syncthreads();
  if (threadIdx.y == 0 && ch < s.channels) {
    for (int q = 0; q < K; ++q) {
      A t = shared[q][0][threadIdx.x];
      for (int l = 1; l < kRowLanes; ++l) t += shared[q][l][threadIdx.x];
      partial[(ch * parts + part) * K + q] = t;
    }
  }
}

template <int K, typename A, typename F, typename Fin>
void launch_channel_rows_reduce(const ChannelShape& s, const F& f, const Fin& fin, cudaStream_t stream) {
  const int parts = row_reduce_parts(s.outer);
  const size_t bytes = static_cast<size_t>(s.channels) * parts * K * sizeof(A);
  std::unique_ptr<void, void (*)(void*)> scratch(cuda::device_alloc(bytes), &cuda::device_free);
  A* partial = static_cast<A*>(scratch.get());
  const dim3 grid(static_cast<unsigned>((s.channels + kRowTileChannels - 1) / kRowTileChannels),
                  static_cast<unsigned>(parts));
  channel_rows_partial_kernel<K, A><<<grid, dim3(kRowTileChannels, kRowLanes), 0, stream>>>(s, parts, f, partial);
  CORTADO_KERNEL_CHECK();
  channel_final_kernel<K, A><<<cuda::blocks_for(s.channels), cuda::kThreads, 0, stream>>>(s.channels, parts, partial,
                                                                                          fin);
  CORTADO_KERNEL_CHECK();
}

/// Sums f's K terms (operator()(j, ch, acc), one value at a time) over each
/// channel of `s` and calls fin(channel, totals), all enqueued on `stream`.
template <int K, typename A, typename F, typename Fin>
void channel_reduce(const ChannelShape& s, const F& f, const Fin& fin, cudaStream_t stream) {
  if (s.channels <= 0) return;
  if (s.inner == 1 && s.channels > 1) {
    launch_channel_rows_reduce<K, A>(s, ScalarTerms<F>{f}, fin, stream);
    return;
  }
  launch_channel_reduce<K, 1, A>(s, ScalarTerms<F>{f}, fin, stream);
}

/// The same with f.add<V> reading V values at a time: the widest that
/// reduce_width allows for the arrays `ptrs`, whose widest element has
/// Widest bytes (16 / Widest, 8 / Widest or 1).
template <int K, typename A, size_t Widest, typename F, typename Fin>
void channel_reduce_vec(const ChannelShape& s, std::initializer_list<const void*> ptrs, const F& f, const Fin& fin,
                        cudaStream_t stream) {
  if (s.channels <= 0) return;
  if (s.inner == 1 && s.channels > 1) {  // channels last: coalesced rows, one value a thread
    launch_channel_rows_reduce<K, A>(s, f, fin, stream);
    return;
  }
  constexpr int VMax = static_cast<int>(16 / Widest);
  const int v = reduce_width(s.inner, Widest, ptrs);
  if (VMax > 1 && v == VMax) {
    launch_channel_reduce<K, VMax, A>(s, f, fin, stream);
  } else if (VMax > 2 && v == VMax / 2) {
    launch_channel_reduce<K, (VMax > 2 ? VMax / 2 : 1), A>(s, f, fin, stream);
  } else {
    launch_channel_reduce<K, 1, A>(s, f, fin, stream);
  }
}

}  // namespace kernels
}  // namespace cortado
