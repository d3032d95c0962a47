// Eltwise kernels. One thread per element in a grid-stride loop (64-bit
// indexes). The bottoms' pointers (at most 64) travel by value in a PtrPack,
// the SUM coefficients in a fixed array. Each thread combines its element of
// every bottom in math_t (float for float16, double for double), in bottom
// order, every product and sum rounded on its own (mul_rn/add_rn: no fused
// multiply-add), exactly as the CPU path does, and stores once. MAX writes
// the index of the winning bottom (the first one on ties) to argmax.
#include "cortado/layers/eltwise_layer.hpp"
#include "cortado/util/storage_types.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename M>
struct CoeffPack {
  M c[kMaxPack];
};

template <typename T>
__global__ void eltwise_forward_kernel(int64_t n, int op, PtrPack<T> x, int count, CoeffPack<dmath_t<T>> coeff,
                                       T* y, int* argmax) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(k, n) {
    M acc = load(x.p[0], k);
    if (op == EltwiseParameter::SUM) acc = mul_rn(acc, coeff.c[0]);
    int arg = 0;
    for (int i = 1; i < count; ++i) {
      const M v = load(x.p[i], k);
      if (op == EltwiseParameter::SUM) {
        acc = add_rn(acc, mul_rn(coeff.c[i], v));
      } else if (op == EltwiseParameter::PROD) {
        acc = mul_rn(acc, v);
      } else if (v > acc) {
        acc = v;
        arg = i;
      }
    }
    store(y, k, acc);
    if (op == EltwiseParameter::MAX) argmax[k] = arg;
  }
}

template <typename T>
__global__ void eltwise_backward_kernel(int64_t n, int op, int which, PtrPack<T> x, int count, dmath_t<T> coeff,
                                        bool stable, const T* y, const T* dy, const int* argmax, T* dx) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(k, n) {
    const M g = load(dy, k);
    M r;
    if (op == EltwiseParameter::SUM) {
      r = mul_rn(coeff, g);
    } else if (op == EltwiseParameter::MAX) {
      r = argmax[k] == which ? g : M(0);
    } else if (stable) {
      r = g;
      for (int j = 0; j < count; ++j) {
        if (j != which) r = mul_rn(r, load(x.p[j], k));
      }
    } else {
      r = mul_rn(g, load(y, k)) / load(x.p[which], k);
    }
    store(dx, k, r);
  }
}

}  // namespace

namespace gpu {

template <typename T>
void eltwise_forward(int64_t n, int op, const T* const* x, int count, const double* coeff, T* y, int* argmax,
                     CUstream_st* stream) {
  CORTADO_CHECK(count >= 1 && count <= kMaxPack) << "eltwise_forward: " << count << " bottoms";
  if (n == 0) return;
  using D = dev_t<T>;
  PtrPack<D> pack{};
  CoeffPack<dmath_t<D>> c{};
  for (int i = 0; i < count; ++i) {
    pack.p[i] = dev(x[i]);
    c.c[i] = static_cast<dmath_t<D>>(coeff[i]);
  }
  eltwise_forward_kernel<D><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, op, pack, count, c, dev(y),
                                                                                argmax);
  CORTADO_KERNEL_CHECK();
}

template <typename T>
void eltwise_backward(int64_t n, int op, int which, const T* const* x, int count, double coeff, bool stable_prod_grad,
                      const T* y, const T* dy, const int* argmax, T* dx, CUstream_st* stream) {
  CORTADO_CHECK(count <= kMaxPack) << "eltwise_backward: " << count << " bottoms";
  if (n == 0) return;
  using D = dev_t<T>;
  PtrPack<D> pack{};
  for (int i = 0; i < count; ++i) pack.p[i] = dev(x[i]);
  eltwise_backward_kernel<D><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
      n, op, which, pack, count, static_cast<dmath_t<D>>(coeff), stable_prod_grad, dev(y), dev(dy), argmax, dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_ELTWISE(T)                                                                           \
  template void eltwise_forward<T>(int64_t, int, const T* const*, int, const double*, T*, int*, CUstream_st*);  \
  template void eltwise_backward<T>(int64_t, int, int, const T* const*, int, double, bool, const T*, const T*,  \
                                    const int*, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_ELTWISE)

}  // namespace gpu
}  // namespace cortado
