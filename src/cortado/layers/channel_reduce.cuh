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
// The partial sums live in a scratch block from the caching allocator, freed
// when the launches are enqueued: freed blocks are reused only by later work
// on the same stream (the project's scratch rule).

#include <cstdint>
#include <memory>

#include "cortado/util/cuda.hpp"
#include "device_values.cuh"

namespace cortado {
namespace kernels {

constexpr int kReduceThreads = 256;
constexpr int64_t kValuesPerPart = 4096;
constexpr int64_t kMaxParts = 512;

struct ChannelShape {
  int64_t outer, channels, inner;
};

/// Blocks per channel: about kValuesPerPart values each, 1 to kMaxParts.
inline int reduce_parts(const ChannelShape& s) {
  const int64_t m = s.outer * s.inner;
  int64_t parts = (m + kValuesPerPart - 1) / kValuesPerPart;
  if (parts < 1) parts = 1;
  if (parts > kMaxParts) parts = kMaxParts;
  return static_cast<int>(parts);
}

// F: __device__ void operator()(int64_t j, int64_t channel, A* acc) const,
// adding element j's terms to acc[0..K).
template <int K, typename A, typename F>
__global__ void channel_partial_kernel(ChannelShape s, int parts, F f, A* partial) {
  __shared__ A shared[K][kReduceThreads];
  const int64_t ch = blockIdx.x / parts;
  const int64_t part = blockIdx.x % parts;
  const int64_t m = s.outer * s.inner;
  const int64_t chunk = (m + parts - 1) / parts;
  const int64_t begin = part * chunk;
  const int64_t end = begin + chunk < m ? begin + chunk : m;
  A acc[K];
  for (int q = 0; q < K; ++q) acc[q] = A(0);
  int64_t k = begin + threadIdx.x;
  if (k < end) {
    int64_t o = k / s.inner, i = k - o * s.inner;
    for (; k < end; k += blockDim.x) {
      f((o * s.channels + ch) * s.inner + i, ch, acc);
      i += blockDim.x;
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

/// Sums f's K terms over each channel of `s` and calls fin(channel, totals),
/// all enqueued on `stream`.
template <int K, typename A, typename F, typename Fin>
void channel_reduce(const ChannelShape& s, const F& f, const Fin& fin, cudaStream_t stream) {
  if (s.channels <= 0) return;
  const int parts = reduce_parts(s);
  const size_t bytes = static_cast<size_t>(s.channels) * parts * K * sizeof(A);
  std::unique_ptr<void, void (*)(void*)> scratch(cuda::device_alloc(bytes), &cuda::device_free);
  A* partial = static_cast<A*>(scratch.get());
  channel_partial_kernel<K, A><<<static_cast<unsigned>(s.channels * parts), kReduceThreads, 0, stream>>>(
      s, parts, f, partial);
  CORTADO_KERNEL_CHECK();
  channel_final_kernel<K, A><<<cuda::blocks_for(s.channels), cuda::kThreads, 0, stream>>>(s.channels, parts, partial,
                                                                                          fin);
  CORTADO_KERNEL_CHECK();
}

}  // namespace kernels
}  // namespace cortado
