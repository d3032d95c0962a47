#include "cortado/tensor.hpp"

#include <cstring>

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

void Tensor::ensure(Type t) const {
  if (!mem_[t]) mem_[t] = std::make_unique<SyncedMemory>(capacity_ * type_size(t));
  if (valid_[t]) return;
  if (!mem_[type_]) mem_[type_] = std::make_unique<SyncedMemory>(capacity_ * type_size(type_));
  const void* src = mem_[type_]->cpu_data();
  void* dst = mem_[t]->mutable_cpu_data();
  dispatch_type(type_, [&](auto s) {
    using S = decltype(s);
    dispatch_type(t, [&](auto d) {
      using D = decltype(d);
      convert_array<S, D>(static_cast<int64_t>(count_), static_cast<const S*>(src), static_cast<D*>(dst));
    });
  });
  valid_[t] = true;
}

const void* Tensor::data_raw(Type t) const {
  ensure(t);
  return mem_[t]->cpu_data();
}

void* Tensor::mutable_data_raw(Type t) {
  ensure(t);
  type_ = t;
  valid_.fill(false);
  valid_[t] = true;
  return mem_[t]->mutable_cpu_data();
}

void Tensor::set_zero() {
  void* p = mutable_data_raw(type_);
  if (count_) std::memset(p, 0, count_ * type_size(type_));
}

}  // namespace cortado
