// Eltwise kernels. One thread per element in a grid-stride loop (64-bit
// indexes). The bottoms' pointers (at most 64) travel by value in a PtrPack,
// the SUM coefficients in a fixed array. Each thread combines its element of
// every bottom in math_t (float for float16, double for double), in bottom
// order, every product and sum rounded on its own (mul_rn/add_rn: no fused
// multiply-add), exactly as the CPU path does, and stores once. MAX writes
// the index of the winning bottom (the first one on ties) to argmax.
// SUM with a fused ReLU (layer_fusion.hpp) has its own pair of kernels: V
// values per thread and load (16 bytes where the count and every pointer
// allow, vector_access.cuh), the sum stored as T before the ReLU sees it.
#include "cortado/layers/eltwise_layer.hpp"

#include <vector>
#include "cortado/storage_types.hpp"
#include "cortado/layers/relu_layer.hpp"
#include "device_values.cuh"
#include "vector_access.cuh"

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

template <int V, typename T>
__global__ void eltwise_sum_relu_kernel(int64_t vectors, PtrPack<T> x, int count, CoeffPack<dmath_t<T>> coeff, T* y) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(q, vectors) {
    const int64_t j = q * V;
    M acc[V];
    const VecOf<T, V> x0 = load_vec<V>(x.p[0], j);
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = mul_rn(M(load(x0.v, k)), coeff.c[0]);
    for (int i = 1; i < count; ++i) {
      const VecOf<T, V> xi = load_vec<V>(x.p[i], j);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = add_rn(acc[k], mul_rn(coeff.c[i], M(load(xi.v, k))));
    }
    VecOf<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) store(out.v, k, ReLUOp().forward(stored<T>(acc[k])));
    store_vec<V>(y, j, out);
  }
}

// Two bottoms' gradients from one read of y and dy (dx1 null: one).
template <int V, typename T, typename X>
__global__ void eltwise_sum_relu_backward_kernel(int64_t vectors, dmath_t<T> c0, dmath_t<T> c1, const X* y,
                                                 const T* dy, T* dx0, T* dx1) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(q, vectors) {
    const int64_t j = q * V;
    const VecOf<X, V> yv = load_vec<V>(y, j);
    const VecOf<T, V> g = load_vec<V>(dy, j);
    VecOf<T, V> out0, out1;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const M r = stored<T>(ReLUOp().backward(stored<T>(M(load(yv.v, k))), M(0), M(load(g.v, k))));
      store(out0.v, k, mul_rn(c0, r));
      store(out1.v, k, mul_rn(c1, r));
    }
    store_vec<V>(dx0, j, out0);
    if (dx1) store_vec<V>(dx1, j, out1);
  }
}

}  // namespace

namespace gpu {

template <typename T>
void eltwise_sum_relu_forward(int64_t n, const T* const* x, int count, const double* coeff, T* y,
                              CUstream_st* stream) {
  CORTADO_CHECK(count >= 1 && count <= kMaxPack) << "eltwise_sum_relu_forward: " << count << " bottoms";
  if (n == 0) return;
  using D = dev_t<T>;
  PtrPack<D> pack{};
  CoeffPack<dmath_t<D>> c{};
  bool aligned = reinterpret_cast<uintptr_t>(y) % 16 == 0;
  for (int i = 0; i < count; ++i) {
    pack.p[i] = dev(x[i]);
    c.c[i] = static_cast<dmath_t<D>>(coeff[i]);
    aligned = aligned && reinterpret_cast<uintptr_t>(x[i]) % 16 == 0;
  }
  constexpr int V = 16 / sizeof(T);
  if (aligned && n % V == 0) {
    eltwise_sum_relu_kernel<V, D><<<cuda::blocks_for(n / V), cuda::kThreads, 0, stream>>>(n / V, pack, count, c, dev(y));
  } else {
    eltwise_sum_relu_kernel<1, D><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, pack, count, c, dev(y));
  }
  CORTADO_KERNEL_CHECK();
}

template <typename T, typename X>
void eltwise_sum_relu_backward(int64_t n, int count, const double* coeff, const X* y, const T* dy, T* const* dx,
                               CUstream_st* stream) {
  if (n == 0) return;
  using D = dev_t<T>;
  using M = dmath_t<D>;
  constexpr size_t widest = sizeof(T) > sizeof(X) ? sizeof(T) : sizeof(X);
  constexpr int V = static_cast<int>(16 / widest);
  // The bottoms that want a gradient, two per launch.
  std::vector<int> want;
  for (int i = 0; i < count; ++i)
    if (dx[i]) want.push_back(i);
  for (size_t w = 0; w < want.size(); w += 2) {
    const int a = want[w], b = w + 1 < want.size() ? want[w + 1] : -1;
    T* dx1 = b >= 0 ? dx[b] : nullptr;
    const M c0 = static_cast<M>(coeff[a]), c1 = b >= 0 ? static_cast<M>(coeff[b]) : M(0);
    if (vector_width(n, widest, {y, dy, dx[a], dx1}) > 1) {
      eltwise_sum_relu_backward_kernel<V, D, dev_t<X>><<<cuda::blocks_for(n / V), cuda::kThreads, 0, stream>>>(
          n / V, c0, c1, dev(y), dev(dy), dev(dx[a]), dev(dx1));
    } else {
      eltwise_sum_relu_backward_kernel<1, D, dev_t<X>><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
          n, c0, c1, dev(y), dev(dy), dev(dx[a]), dev(dx1));
    }
    CORTADO_KERNEL_CHECK();
  }
}

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
#define CORTADO_INSTANTIATE_ELTWISE_RELU(T) \
  template void eltwise_sum_relu_forward<T>(int64_t, const T* const*, int, const double*, T*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_ELTWISE_RELU)
// For every layer pair (F, B): T = B, X = F.
#define CORTADO_INSTANTIATE_ELTWISE_RELU_BACKWARD(_, F, B) \
  template void eltwise_sum_relu_backward<B, F>(int64_t, int, const double*, const F*, const B*, B* const*,  \
                                                 CUstream_st*);
CORTADO_FOR_EACH_PAIR(CORTADO_INSTANTIATE_ELTWISE_RELU_BACKWARD, _)

}  // namespace gpu
}  // namespace cortado
