#pragma once
// Device-side helpers shared by the layer kernels (.cu files only).
//
// The storage types and their loads and stores: util/device_types.cuh.

#include <cstdint>

#include "../util/device_types.cuh"
#include "cortado/util/cuda.hpp"

namespace cortado {
namespace kernels {

/// The channel of element j of an (outer, channels, inner) tensor, with the
/// index arithmetic in I: the launchers pick uint32_t when every index fits
/// (CORTADO_LAUNCH_INDEXED), since a 64-bit division costs dozens of
/// instructions per element in kernels that are otherwise a load and a store.
template <typename I>
__device__ __forceinline__ int64_t channel_of(int64_t j, int64_t inner, int64_t channels) {
  return static_cast<int64_t>((static_cast<I>(j) / static_cast<I>(inner)) % static_cast<I>(channels));
}

/// Launches kernel<uint32_t> when `total` indexes fit in 32 bits, else
/// kernel<uint64_t> (the index type is the kernel's first template
/// parameter; the others are deduced from the arguments).
#define CORTADO_LAUNCH_INDEXED(kernel, total, stream, ...)                                                   \
  do {                                                                                                      \
    if ((total) < (int64_t(1) << 32))                                                                       \
      kernel<uint32_t><<<cuda::blocks_for(total), cuda::kThreads, 0, (stream)>>>(__VA_ARGS__);              \
    else                                                                                                    \
      kernel<uint64_t><<<cuda::blocks_for(total), cuda::kThreads, 0, (stream)>>>(__VA_ARGS__);              \
  } while (0)

/// The same for a kernel<I, V> of `total` / V threads, each V consecutive
/// values of one channel (V divides the row: the channel once per V values).
#define CORTADO_LAUNCH_INDEXED_V(kernel, V, total, stream, ...)                                             \
  do {                                                                                                      \
    if ((total) < (int64_t(1) << 32))                                                                       \
      kernel<uint32_t, V><<<cuda::blocks_for((total) / (V)), cuda::kThreads, 0, (stream)>>>(__VA_ARGS__);   \
    else                                                                                                    \
      kernel<uint64_t, V><<<cuda::blocks_for((total) / (V)), cuda::kThreads, 0, (stream)>>>(__VA_ARGS__);   \
  } while (0)

/// Up to kMaxPack device pointers passed by value as a kernel argument (for
/// layers with a variable number of bottoms or tops).
constexpr int kMaxPack = 64;
template <typename T>
struct PtrPack {
  const T* p[kMaxPack];
};

// Products and sums rounded one operation at a time (no fused multiply-add),
// where a kernel must reproduce the CPU path's rounding exactly.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

// exp and the logistic sigmoid in a math type (CUDA's expf / exp: within 2
// ulps of the host library).
__device__ __forceinline__ float exp_of(float v) { return expf(v); }
__device__ __forceinline__ double exp_of(double v) { return exp(v); }
__device__ __forceinline__ float sigmoid_of(float v) { return 1.f / (1.f + expf(-v)); }
__device__ __forceinline__ double sigmoid_of(double v) { return 1.0 / (1.0 + exp(-v)); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

}  // namespace kernels
}  // namespace cortado
