#include "cortado/synced_memory.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace cortado {

SyncedMemory::SyncedMemory(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  const size_t rounded = (bytes + 63) / 64 * 64;
  cpu_ptr_ = std::aligned_alloc(64, rounded);
  if (!cpu_ptr_) throw std::bad_alloc();
  std::memset(cpu_ptr_, 0, rounded);
}

SyncedMemory::~SyncedMemory() { std::free(cpu_ptr_); }

}  // namespace cortado
