#pragma once
// MathBuffer<T>: a math_t<T> view of a T array, for code that computes in the
// math type and stores in T.
//
// - For T == math_t<T> (double, float) it is the array itself: no copy.
// - For float16 and bfloat16 it is a float scratch array; with load = true it starts with
//   the array's current values (to accumulate into them), else it is
//   uninitialized. store() rounds it back into the T array once.
// The T array must stay valid until store().

#include <cstddef>
#include <memory>
#include <type_traits>

#include "cortado/bfloat16.hpp"
#include "cortado/util/math.hpp"

namespace cortado {

template <typename T>
class MathBuffer {
 public:
  using M = math_t<T>;
  static constexpr bool kSame = std::is_same_v<T, M>;

  MathBuffer(T* dst, size_t n, bool load) : dst_(dst), n_(n) {
    if constexpr (!kSame) {
      scratch_.reset(new M[n]);  // not value-initialized: a large buffer is not zeroed first
      if (load) convert_array(static_cast<int64_t>(n), dst, scratch_.get());
    }
  }

  M* get() {
    if constexpr (kSame) {
      return dst_;
    } else {
      return scratch_.get();
    }
  }

  void store() {
    if constexpr (!kSame) convert_array(static_cast<int64_t>(n_), scratch_.get(), dst_);
  }

 private:
  T* dst_;
  size_t n_;
  std::unique_ptr<M[]> scratch_;
};

}  // namespace cortado
