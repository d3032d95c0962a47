#include "cortado/util/block_pool.hpp"

#include "cortado/common.hpp"

namespace cortado {

size_t BlockPool::SegmentBytes(size_t bytes) {
  const size_t size = RoundBytes(bytes);
  if (size <= kSmallLimit) return kSmallSegment;
  if (size < kLargeLimit) return kLargeSegment;
  const size_t two_mib = size_t(2) << 20;
  return (size + two_mib - 1) / two_mib * two_mib;
}

void* BlockPool::Allocate(size_t bytes) {
  CORTADO_CHECK(bytes > 0);
  const size_t size = RoundBytes(bytes);
  FreeSet& set = free_set(size <= kSmallLimit);
  Block probe{nullptr, size};
  auto it = set.lower_bound(&probe);
  if (it == set.end()) return nullptr;
  Block* b = *it;
  set.erase(it);
  return Hand(b, size);
}

void* BlockPool::AddSegment(void* segment, size_t segment_bytes, size_t bytes) {
  const size_t size = RoundBytes(bytes);
  CORTADO_CHECK(segment && segment_bytes >= size);
  auto block = std::make_unique<Block>(Block{static_cast<char*>(segment), segment_bytes});
  block->small = size <= kSmallLimit;
  Block* b = block.get();
  blocks_[segment] = std::move(block);
  reserved_ += segment_bytes;
  ++segment_count_;
  return Hand(b, size);
}

void* BlockPool::Hand(Block* b, size_t size) {
  const size_t rest = b->size - size;
  if (rest >= (b->small ? kRound : kSmallLimit + 1)) {
    auto tail = std::make_unique<Block>(Block{b->ptr + size, rest});
    tail->small = b->small;
    tail->prev = b;
    tail->next = b->next;
    if (b->next) b->next->prev = tail.get();
    b->next = tail.get();
    b->size = size;
    free_set(b->small).insert(tail.get());
    blocks_[tail->ptr] = std::move(tail);
  }
  b->allocated = true;
  live_[b->ptr] = b;
  in_use_ += b->size;
  return b->ptr;
}

void BlockPool::Free(void* p) {
  auto it = live_.find(p);
  CORTADO_CHECK(it != live_.end()) << "freeing a block the pool does not know";
  Block* b = it->second;
  live_.erase(it);
  in_use_ -= b->size;
  b->allocated = false;
  FreeSet& set = free_set(b->small);
  // Merge with a free successor, then into a free predecessor.
  if (Block* n = b->next; n && !n->allocated) {
    set.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    blocks_.erase(n->ptr);
  }
  if (Block* q = b->prev; q && !q->allocated) {
    set.erase(q);
    q->size += b->size;
    q->next = b->next;
    if (b->next) b->next->prev = q;
    blocks_.erase(b->ptr);
    b = q;
  }
  set.insert(b);
}

std::vector<void*> BlockPool::TakeFreeSegments() {
  std::vector<void*> out;
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    Block* b = it->second.get();
    if (!b->allocated && !b->prev && !b->next) {
      free_set(b->small).erase(b);
      reserved_ -= b->size;
      --segment_count_;
      out.push_back(b->ptr);
      it = blocks_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<void*> BlockPool::Segments() const {
  std::vector<void*> out;
  for (const auto& [p, b] : blocks_)
    if (!b->prev) out.push_back(b->ptr);
  return out;
}

}  // namespace cortado
