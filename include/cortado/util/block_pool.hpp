#pragma once
// The bookkeeping of a caching allocator with size classes and block
// splitting (the scheme of PyTorch's CUDA caching allocator), independent of
// where the memory comes from, so that it is tested on the CPU. The device
// allocator (util/cuda.cpp) keeps one BlockPool per (device, stream) and
// gets its segments from cudaMalloc.
//
// Contract:
// - Requests are rounded up to kRound (512) bytes. A request of at most
//   kSmallLimit (1 MiB) is "small" and served from 2 MiB segments; a larger
//   one from segments of SegmentBytes(bytes): 20 MiB below 10 MiB, else the
//   request rounded up to 2 MiB. Small and large blocks never share a
//   segment, so small tensors do not fragment the large segments.
// - Allocate() takes the smallest free block of its class that fits (best
//   fit) and splits off the rest as a free block when the rest is at least
//   kRound (small) or more than kSmallLimit (large); otherwise the block is
//   handed out whole (its size is what counts as in use).
// - Free() returns a block and merges it with free neighbours of its
//   segment.
// - The pool never calls a memory function itself: when Allocate() returns
//   null the caller gets a segment of SegmentBytes(bytes) and passes it to
//   AddSegment(); TakeFreeSegments() removes the segments that are wholly
//   free and returns them for the caller to release (on out of memory).
//   This lets the caller do those calls outside its lock.
// - Not thread-safe: the caller locks.
#include <cstddef>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

namespace cortado {

class BlockPool {
 public:
  static constexpr size_t kRound = 512;
  static constexpr size_t kSmallLimit = size_t(1) << 20;
  static constexpr size_t kSmallSegment = size_t(2) << 20;
  static constexpr size_t kLargeSegment = size_t(20) << 20;
  static constexpr size_t kLargeLimit = size_t(10) << 20;

  BlockPool() = default;
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  static size_t RoundBytes(size_t bytes) { return (bytes + kRound - 1) / kRound * kRound; }
  /// The size of the segment to get when Allocate(bytes) returned null.
  static size_t SegmentBytes(size_t bytes);

  /// A block of at least `bytes` (> 0) from the free blocks, or null.
  void* Allocate(size_t bytes);
  /// Adds a segment of `segment_bytes` (from SegmentBytes(bytes)) and
  /// returns a block of `bytes` from it.
  void* AddSegment(void* segment, size_t segment_bytes, size_t bytes);
  /// Returns a block from Allocate or AddSegment.
  void Free(void* p);
  /// Whether p is a block handed out by this pool.
  bool Owns(const void* p) const { return live_.count(p) > 0; }
  /// Removes the wholly free segments; returns their base pointers.
  std::vector<void*> TakeFreeSegments();
  /// Every segment's base pointer (for releasing the whole pool).
  std::vector<void*> Segments() const;

  size_t in_use() const { return in_use_; }      // bytes of the blocks handed out
  size_t reserved() const { return reserved_; }  // bytes of the segments held
  size_t segments() const { return segment_count_; }

 private:
  struct Block {
    char* ptr;
    size_t size;
    bool allocated = false;
    bool small;
    Block* prev = nullptr;  // neighbours within the segment
    Block* next = nullptr;
  };
  struct BySize {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
  };
  using FreeSet = std::set<Block*, BySize>;

  FreeSet& free_set(bool small) { return small ? free_small_ : free_large_; }
  void* Hand(Block* b, size_t bytes);  // splits b if worth it, marks it allocated

  FreeSet free_small_, free_large_;
  std::unordered_map<const void*, Block*> live_;  // handed-out blocks by pointer
  std::map<const void*, std::unique_ptr<Block>> blocks_;  // every block by pointer (owner)
  size_t in_use_ = 0, reserved_ = 0, segment_count_ = 0;
};

}  // namespace cortado
