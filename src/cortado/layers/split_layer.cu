// Split backward: dx = sum over tops of their diffs. One thread per V
// elements (16-byte loads where every pointer is aligned and the count is a
// multiple of V, else V = 1) in a grid-stride loop (64-bit indexes); the
// thread loads its elements of up to 64 top diffs (pointers passed by value
// in a PtrPack), sums them in math_t (float for float16) in top order,
// adding the running value of dx for the second and later groups of 64, and
// stores once per group.
#include "cortado/layers/split_layer.hpp"
#include "device_values.cuh"
#include "vector_access.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <int V, typename T>
__global__ void split_sum_kernel(int64_t vectors, PtrPack<T> dy, int count, bool accumulate, T* dx) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(q, vectors) {
    const int64_t j = q * V;
    M acc[V];
    if (accumulate) {
      const VecOf<T, V> d = load_vec<V>(dx, j);
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] = load(d.v, e);
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] = M(0);
    }
    for (int k = 0; k < count; ++k) {
      const VecOf<T, V> g = load_vec<V>(dy.p[k], j);
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] = add_rn(acc[e], M(load(g.v, e)));
    }
    VecOf<T, V> out;
#pragma unroll
    for (int e = 0; e < V; ++e) store(out.v, e, acc[e]);
    store_vec<V>(dx, j, out);
  }
}

}  // namespace

namespace gpu {

template <typename T>
void split_backward(int64_t n, const T* const* dy, int count, T* dx, CUstream_st* stream) {
  if (n == 0) return;
  using D = dev_t<T>;
  for (int first = 0; first < count; first += kMaxPack) {
    PtrPack<D> pack{};
    const int m = count - first < kMaxPack ? count - first : kMaxPack;
    bool aligned = reinterpret_cast<uintptr_t>(dx) % 16 == 0;
    for (int k = 0; k < m; ++k) {
      pack.p[k] = dev(dy[first + k]);
      aligned = aligned && reinterpret_cast<uintptr_t>(dy[first + k]) % 16 == 0;
    }
    constexpr int V = static_cast<int>(16 / sizeof(T));
    if (aligned && n % V == 0)
      split_sum_kernel<V, D><<<cuda::blocks_for(n / V), cuda::kThreads, 0, stream>>>(n / V, pack, m, first > 0,
                                                                                     dev(dx));
    else
      split_sum_kernel<1, D><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, pack, m, first > 0, dev(dx));
    CORTADO_KERNEL_CHECK();
  }
}

template void split_backward<double>(int64_t, const double* const*, int, double*, CUstream_st*);
template void split_backward<float>(int64_t, const float* const*, int, float*, CUstream_st*);
template void split_backward<float16>(int64_t, const float16* const*, int, float16*, CUstream_st*);
template void split_backward<bfloat16>(int64_t, const bfloat16* const*, int, bfloat16*, CUstream_st*);

}  // namespace gpu
}  // namespace cortado
