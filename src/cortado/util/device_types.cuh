#pragma once
// The storage types on the device, shared by every .cu file (kernels only):
// double, float, __half and __nv_bfloat16
// (cortado::float16 and cortado::bfloat16 are bit-compatible with them;
// launchers reinterpret_cast the pointers with dev()). Values are loaded into
// their math type (float for the 16-bit types, the type itself otherwise) and
// stored once, rounding to nearest even.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cortado/bfloat16.hpp"

namespace cortado {
namespace kernels {

template <typename T> struct dev_type { using type = T; };
template <> struct dev_type<float16> { using type = __half; };
template <> struct dev_type<bfloat16> { using type = __nv_bfloat16; };
/// The device storage type of host storage type T.
template <typename T> using dev_t = typename dev_type<T>::type;

template <typename T> struct dmath_type { using type = T; };
template <> struct dmath_type<__half> { using type = float; };
template <> struct dmath_type<__nv_bfloat16> { using type = float; };
/// The compute type of device storage type T (float for __half and __nv_bfloat16).
template <typename T> using dmath_t = typename dmath_type<T>::type;

template <typename T> const dev_t<T>* dev(const T* p) { return reinterpret_cast<const dev_t<T>*>(p); }
template <typename T> dev_t<T>* dev(T* p) { return reinterpret_cast<dev_t<T>*>(p); }

__device__ __forceinline__ float load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ double load(const double* p, int64_t i) { return p[i]; }
__device__ __forceinline__ void store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(double* p, int64_t i, double v) { p[i] = v; }

}  // namespace kernels
}  // namespace cortado

/// for (int64_t i = global thread index; i < n; i += total threads)
#define CORTADO_KERNEL_LOOP(i, n)                                                   \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(blockDim.x) * gridDim.x)
