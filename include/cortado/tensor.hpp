#pragma once
// A buffer of `count` values that holds them in a current type and converts
// on demand.
//
// Contract:
// - data<T>() returns the values as T. If T is not the current type, the
//   values are converted once (rounding to nearest even into a narrower type) and the
//   converted copy is cached until the next write.
// - mutable_data<T>() returns a writable T buffer holding the current values
//   (converted if needed), makes T the current type and drops every other
//   cached copy. Writing through a pointer obtained earlier for another type
//   is a bug.
// - A fresh tensor is zero in its initial type.
// - gpu_data<T>() / mutable_gpu_data<T>() (CUDA builds) do the same on the
//   device: a conversion there runs as a kernel on the thread's stream.
// - resize() keeps nothing: all copies are reallocated and zeroed when the
//   count grows; shrinking keeps the buffers.
// - mutable_data_raw(t, also, &p) / mutable_gpu_data_raw(t, also, &p): for a
//   writer that produces the values in two types in one pass (the solver's
//   fused update writes the FP32 master weights and their FP16 working copy
//   together, so that the next forward finds the copy instead of launching a
//   conversion per parameter). Returns the t buffer, makes t current and
//   keeps the `also` buffer (in *p) valid as well; the caller must write every
//   value of both, the `also` values being exactly the t values converted.
//   With also == t, *p is null.
// - conversions() counts the conversions this tensor has run (both sides),
//   for tests and diagnostics.

#include <array>
#include <cstdint>
#include <memory>

#include "cortado/synced_memory.hpp"
#include "cortado/types.hpp"

namespace cortado {

class Tensor {
 public:
  explicit Tensor(Type type = FLOAT, size_t count = 0);

  size_t count() const { return count_; }
  Type type() const { return type_; }
  void resize(size_t count);

  template <typename T> const T* data() const {
    return static_cast<const T*>(data_raw(type_of<T>()));
  }
  template <typename T> T* mutable_data() {
    return static_cast<T*>(mutable_data_raw(type_of<T>()));
  }
  const void* data_raw(Type t) const;
  void* mutable_data_raw(Type t);
  void* mutable_data_raw(Type t, Type also, void** also_data);

  template <typename T> const T* gpu_data() const {
    return static_cast<const T*>(gpu_data_raw(type_of<T>()));
  }
  template <typename T> T* mutable_gpu_data() {
    return static_cast<T*>(mutable_gpu_data_raw(type_of<T>()));
  }
  const void* gpu_data_raw(Type t) const;
  void* mutable_gpu_data_raw(Type t);
  void* mutable_gpu_data_raw(Type t, Type also, void** also_data);
  /// Whether the newest values of the current type live on the device.
  bool head_on_gpu() const;

  /// Sets every value to zero in the current type and drops other copies.
  void set_zero();

  /// Conversions run so far (a cached copy filled from the current type).
  int64_t conversions() const { return conversions_; }
  /// Conversions run by all tensors of the process on the host or on a
  /// device (each device one is a kernel launch); trainer time reports them
  /// per iteration.
  static int64_t total_conversions(bool gpu);

 private:
  void ensure(Type t, bool gpu) const;  // allocates and fills the copy of type t on that side
  void* keep_also(Type t, Type also, bool gpu);  // the `also` buffer of a two-type write
  /// The buffer of type t (null until first needed); whether it is current.
  std::unique_ptr<SyncedMemory>& mem(Type t) const { return mem_[type_index(t)]; }
  bool& valid(Type t) const { return valid_[type_index(t)]; }

  size_t count_ = 0;
  size_t capacity_ = 0;
  mutable Type type_;
  mutable std::array<std::unique_ptr<SyncedMemory>, kNumTypes> mem_;  // by type_index
  mutable std::array<bool, kNumTypes> valid_{};
  mutable int64_t conversions_ = 0;
};

}  // namespace cortado
