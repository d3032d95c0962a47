#pragma once
// Math for code that runs on the host and on the device: the elementwise ops
// (layers/elementwise_layer.hpp) are written once, as __host__ __device__
// functors, and call these.
//
// CORTADO_HD marks such a function: `__host__ __device__` under nvcc, nothing
// in a .cpp compiled by the host compiler.
//
// hd::exp, hd::log, ... take and return the math type (float or double, never
// a 16-bit type). On the host each is the std:: function of that type
// (std::exp(float) is expf), so host results are what a plain loop calling
// std:: gives, bit for bit. On the device each is CUDA's function of that
// type (expf / exp ...), within 2 ulps of the host library.
//
// hd::add_rn / hd::mul_rn round each operation on its own: on the device
// they are __fadd_rn / __fmul_rn (__dadd_rn / __dmul_rn), which nvcc never
// fuses into a multiply-add, so `add_rn(shift, mul_rn(scale, x))` rounds as
// the host does; on the host they are + and *.

#include <cmath>

#if defined(__CUDACC__)
#define CORTADO_HD __host__ __device__
#else
#define CORTADO_HD
#endif

namespace cortado::hd {

#if defined(__CUDA_ARCH__)
#define CORTADO_HD_UNARY_(name, fname, dname)                            \
  __device__ __forceinline__ float name(float v) { return fname(v); }   \
  __device__ __forceinline__ double name(double v) { return dname(v); }
#else
#define CORTADO_HD_UNARY_(name, fname, dname)                      \
  inline float name(float v) { return std::name(v); }             \
  inline double name(double v) { return std::name(v); }
#endif
CORTADO_HD_UNARY_(exp, expf, ::exp)
CORTADO_HD_UNARY_(expm1, expm1f, ::expm1)
CORTADO_HD_UNARY_(log, logf, ::log)
CORTADO_HD_UNARY_(log1p, log1pf, ::log1p)
CORTADO_HD_UNARY_(tanh, tanhf, ::tanh)
CORTADO_HD_UNARY_(fabs, fabsf, ::fabs)
#undef CORTADO_HD_UNARY_

#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float pow(float b, float e) { return powf(b, e); }
__device__ __forceinline__ double pow(double b, double e) { return ::pow(b, e); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
#else
inline float pow(float b, float e) { return std::pow(b, e); }
inline double pow(double b, double e) { return std::pow(b, e); }
inline float add_rn(float a, float b) { return a + b; }
inline double add_rn(double a, double b) { return a + b; }
inline float mul_rn(float a, float b) { return a * b; }
inline double mul_rn(double a, double b) { return a * b; }
#endif

}  // namespace cortado::hd
