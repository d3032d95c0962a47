#include "cortado/tensor.hpp"

#include <cstring>

#include "cortado/util/cuda.hpp"
#include "cortado/util/gpu_math.hpp"
#include "cortado/util/math.hpp"

namespace cortado {

Tensor::Tensor(Type type, size_t count) : type_(type) { resize(count); }

void Tensor::resize(size_t count) {
  count_ = count;
  if (count <= capacity_) return;
  capacity_ = count;
  for (auto& m : mem_) m.reset();
  valid_.fill(false);
  valid_[type_] = true;  // a fresh buffer is zero in every type
}

void Tensor::ensure(Type t, bool gpu) const {
  if (!mem_[t]) mem_[t] = std::make_unique<SyncedMemory>(capacity_ * type_size(t));
  if (valid_[t]) return;
  if (!mem_[type_]) mem_[type_] = std::make_unique<SyncedMemory>(capacity_ * type_size(type_));
  const int64_t n = static_cast<int64_t>(count_);
  if (gpu) {
#ifdef CORTADO_USE_CUDA
    gpu_convert(type_, mem_[type_]->gpu_data(), t, mem_[t]->mutable_gpu_data(), n, cuda::stream());
#endif
  } else {
    const void* src = mem_[type_]->cpu_data();
    void* dst = mem_[t]->mutable_cpu_data();
    dispatch_type(type_, [&](auto s) {
      using S = decltype(s);
      dispatch_type(t, [&](auto d) {
        using D = decltype(d);
        convert_array<S, D>(n, static_cast<const S*>(src), static_cast<D*>(dst));
      });
    });
  }
  valid_[t] = true;
}

const void* Tensor::data_raw(Type t) const {
  ensure(t, false);
  return mem_[t]->cpu_data();
}

void* Tensor::mutable_data_raw(Type t) {
  ensure(t, false);
  type_ = t;
  valid_.fill(false);
  valid_[t] = true;
  return mem_[t]->mutable_cpu_data();
}

const void* Tensor::gpu_data_raw(Type t) const {
  ensure(t, true);
  return mem_[t]->gpu_data();
}

void* Tensor::mutable_gpu_data_raw(Type t) {
  ensure(t, true);
  type_ = t;
  valid_.fill(false);
  valid_[t] = true;
  return mem_[t]->mutable_gpu_data();
}

bool Tensor::head_on_gpu() const { return mem_[type_] && mem_[type_]->head() == SyncedMemory::Head::GPU; }

void Tensor::set_zero() {
  if (!mem_[type_]) mem_[type_] = std::make_unique<SyncedMemory>(capacity_ * type_size(type_));
  mem_[type_]->set_zero();  // on the side that holds the newest values
  valid_.fill(false);
  valid_[type_] = true;
}

}  // namespace cortado
