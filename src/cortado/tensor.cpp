#include "cortado/tensor.hpp"

#include <atomic>
#include <cstring>

#include "cortado/util/cuda.hpp"
#include "cortado/util/gpu_math.hpp"
#include "cortado/util/math.hpp"

namespace cortado {

namespace {
std::atomic<int64_t> g_conversions[2];  // [gpu]
}  // namespace

int64_t Tensor::total_conversions(bool gpu) { return g_conversions[gpu].load(std::memory_order_relaxed); }

Tensor::Tensor(Type type, size_t count) : type_(type) { resize(count); }

void Tensor::resize(size_t count) {
  count_ = count;
  if (count <= capacity_) return;
  capacity_ = count;
  for (auto& m : mem_) m.reset();
  valid_.fill(false);
  valid(type_) = true;  // a fresh buffer is zero in every type
}

void Tensor::ensure(Type t, bool gpu) const {
  if (!mem(t)) mem(t) = std::make_unique<SyncedMemory>(capacity_ * type_size(t));
  if (valid(t)) return;
  if (!mem(type_)) mem(type_) = std::make_unique<SyncedMemory>(capacity_ * type_size(type_));
  const int64_t n = static_cast<int64_t>(count_);
  ++conversions_;
  g_conversions[gpu].fetch_add(1, std::memory_order_relaxed);
  if (gpu) {
#ifdef CORTADO_USE_CUDA
    gpu_convert(type_, mem(type_)->gpu_data(), t, mem(t)->mutable_gpu_data(), n, cuda::stream());
#endif
  } else {
    const void* src = mem(type_)->cpu_data();
    void* dst = mem(t)->mutable_cpu_data();
    dispatch_type(type_, [&](auto s) {
      using S = decltype(s);
      dispatch_type(t, [&](auto d) {
        using D = decltype(d);
        convert_array<S, D>(n, static_cast<const S*>(src), static_cast<D*>(dst));
      });
    });
  }
  valid(t) = true;
}

const void* Tensor::data_raw(Type t) const {
  ensure(t, false);
  return mem(t)->cpu_data();
}

void* Tensor::mutable_data_raw(Type t) {
  ensure(t, false);
  type_ = t;
  valid_.fill(false);
  valid(t) = true;
  return mem(t)->mutable_cpu_data();
}

void* Tensor::keep_also(Type t, Type also, bool gpu) {
  if (also == t) return nullptr;
  if (!mem(also)) mem(also) = std::make_unique<SyncedMemory>(capacity_ * type_size(also));
  valid(also) = true;  // the caller writes it now
  return gpu ? mem(also)->mutable_gpu_data() : mem(also)->mutable_cpu_data();
}

void* Tensor::mutable_data_raw(Type t, Type also, void** also_data) {
  void* p = mutable_data_raw(t);
  *also_data = keep_also(t, also, false);
  return p;
}

const void* Tensor::gpu_data_raw(Type t) const {
  ensure(t, true);
  return mem(t)->gpu_data();
}

void* Tensor::mutable_gpu_data_raw(Type t) {
  ensure(t, true);
  type_ = t;
  valid_.fill(false);
  valid(t) = true;
  return mem(t)->mutable_gpu_data();
}

void* Tensor::mutable_gpu_data_raw(Type t, Type also, void** also_data) {
  void* p = mutable_gpu_data_raw(t);
  *also_data = keep_also(t, also, true);
  return p;
}

bool Tensor::head_on_gpu() const { return mem(type_) && mem(type_)->head() == SyncedMemory::Head::GPU; }

void Tensor::set_zero() {
  if (!mem(type_)) mem(type_) = std::make_unique<SyncedMemory>(capacity_ * type_size(type_));
  mem(type_)->set_zero();  // on the side that holds the newest values
  valid_.fill(false);
  valid(type_) = true;
}

}  // namespace cortado
