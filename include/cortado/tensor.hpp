#pragma once
// A buffer of `count` values that holds them in a current type and converts
// on demand.
//
// Contract:
// - data<T>() returns the values as T. If T is not the current type, the
//   values are converted once (rounding to nearest even into float16) and the
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

#include <array>
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

  template <typename T> const T* gpu_data() const {
    return static_cast<const T*>(gpu_data_raw(type_of<T>()));
  }
  template <typename T> T* mutable_gpu_data() {
    return static_cast<T*>(mutable_gpu_data_raw(type_of<T>()));
  }
  const void* gpu_data_raw(Type t) const;
  void* mutable_gpu_data_raw(Type t);
  /// Whether the newest values of the current type live on the device.
  bool head_on_gpu() const;

  /// Sets every value to zero in the current type and drops other copies.
  void set_zero();

 private:
  void ensure(Type t, bool gpu) const;  // allocates and fills the copy of type t on that side

  size_t count_ = 0;
  size_t capacity_ = 0;
  mutable Type type_;
  mutable std::array<std::unique_ptr<SyncedMemory>, kNumTypes> mem_;
  mutable std::array<bool, kNumTypes> valid_{};
};

}  // namespace cortado
