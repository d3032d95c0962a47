#pragma once
// Helpers for CPU layers that work a plane (one image's channel) at a time:
// 16-bit planes are widened into the thread's scratch, computed on in the
// math type, and rounded back, so that no float copy of a whole blob is made
// (at ResNet's first layers that copy is 50 MB per blob, written and read
// back from memory); and sums that vectorize yet do not depend on the
// thread count.

#include <cstdint>
#include <type_traits>

#include "cortado/util/cpu_parallel.hpp"
#include "cortado/util/math.hpp"

namespace cortado {

// A plane of T as math-type values: the array itself where T is the math
// type M, else converted into the thread's scratch `slot`. A plane at a time
// stays in cache, where a float copy of a whole 16-bit blob would not.
template <typename M, typename T>
const M* plane_in(const T* src, int64_t n, int slot) {
  if constexpr (std::is_same_v<T, M>) {
    return src;
  } else {
    M* b = thread_scratch<M>(slot, n);
    convert_array(n, src, b);
    return b;
  }
}

// Where a plane's results are computed: the T array itself where T is M, else
// scratch that plane_out then rounds into it.
template <typename M, typename T>
M* plane_buf(T* dst, int64_t n, int slot) {
  if constexpr (std::is_same_v<T, M>) {
    return dst;
  } else {
    return thread_scratch<M>(slot, n);
  }
}

template <typename M, typename T>
void plane_out(const M* buf, int64_t n, T* dst) {
  if constexpr (!std::is_same_v<T, M>) convert_array(n, buf, dst);
}

// sum of term(i) for i in [0, n) over 8 interleaved partial sums, added in a
// fixed order at the end: like a serial sum, it does not depend on the
// thread count, and unlike one it is not a chain of dependent additions.
template <typename M, typename F>
M lane_sum(int64_t n, F&& term) {
  M acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += term(i + l);
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += term(i);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace cortado
