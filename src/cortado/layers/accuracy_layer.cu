// Accuracy kernels.
//
// accuracy_count: one thread per (outer, inner) position in a grid-stride
// loop. The thread reads its label (float), then walks the C scores of its
// column (stride inner; neighbouring threads read neighbouring positions when
// inner > 1) counting the other classes that score at least as high as the
// true one, comparing in math_t (float for float16) and stopping at top_k,
// exactly as the CPU path does (a NaN score counts as wrong). Results go to unsigned counters with
// atomicAdd: integer sums, so the outcome does not depend on the order.
// A label that is not a class index is skipped and the first one recorded
// with atomicMin in a pinned host word.
//
// accuracy_finish: one thread per class (thread 0 also the overall value)
// divides in double and writes float, as the CPU path does.
#include "cortado/layers/accuracy_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void accuracy_count_kernel(int64_t positions, int channels, int inner, int top_k, const T* x,
                                      const float* label, bool has_ignore_label, int ignore_label, unsigned* counts,
                                      unsigned long long* error) {
  using M = dmath_t<T>;
  CORTADO_KERNEL_LOOP(p, positions) {
    const float v = label[p];
    if (has_ignore_label && v == static_cast<float>(ignore_label)) continue;
    const int l = (v >= 0.f && v < static_cast<float>(channels)) ? static_cast<int>(v) : -1;
    if (l < 0 || static_cast<float>(l) != v) {
      atomicMin(error, (static_cast<unsigned long long>(p) << 32) | __float_as_uint(v));
      continue;
    }
    const T* col = x + (p / inner) * int64_t(channels) * inner + p % inner;
    const M truth = load(col, int64_t(l) * inner);
    // A NaN score makes the prediction wrong (as on the CPU): a NaN truth
    // loses, and a NaN rival counts as scoring higher.
    int better = truth != truth ? top_k : 0;
    for (int c = 0; c < channels && better < top_k; ++c) {
      if (c != l && !(M(load(col, int64_t(c) * inner)) < truth)) ++better;
    }
    atomicAdd(&counts[0], 1u);
    atomicAdd(&counts[2 + l], 1u);
    if (better < top_k) {
      atomicAdd(&counts[1], 1u);
      atomicAdd(&counts[2 + channels + l], 1u);
    }
  }
}

__global__ void accuracy_finish_kernel(int channels, const unsigned* counts, float* top, float* per_class) {
  CORTADO_KERNEL_LOOP(c, channels) {
    if (c == 0) top[0] = counts[0] > 0 ? static_cast<float>(double(counts[1]) / counts[0]) : 0.f;
    if (per_class) {
      const unsigned n = counts[2 + c];
      per_class[c] = n > 0 ? static_cast<float>(double(counts[2 + channels + c]) / n) : 0.f;
    }
  }
}

}  // namespace

namespace gpu {

template <typename T>
void accuracy_count(int outer, int channels, int inner, int top_k, const T* x, const float* label,
                    bool has_ignore_label, int ignore_label, unsigned* counts, unsigned long long* error,
                    CUstream_st* stream) {
  const int64_t positions = int64_t(outer) * inner;
  if (positions == 0) return;
  accuracy_count_kernel<<<cuda::blocks_for(positions), cuda::kThreads, 0, stream>>>(
      positions, channels, inner, top_k, dev(x), label, has_ignore_label, ignore_label, counts, error);
  CORTADO_KERNEL_CHECK();
}

void accuracy_finish(int channels, const unsigned* counts, float* top, float* per_class, CUstream_st* stream) {
  // At least one thread, for the overall value when there are no classes.
  const int64_t n = channels > 0 ? channels : 1;
  accuracy_finish_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(channels > 0 ? channels : 1, counts,
                                                                              top, channels > 0 ? per_class : nullptr);
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_ACCURACY(T)                                                                    \
  template void accuracy_count<T>(int, int, int, int, const T*, const float*, bool, int, unsigned*, \
                                  unsigned long long*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_ACCURACY)

}  // namespace gpu
}  // namespace cortado
