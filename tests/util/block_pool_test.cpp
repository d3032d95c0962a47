// BlockPool (util/block_pool.hpp), the bookkeeping of the device allocator:
// size classes, best fit, splitting, merging, giving free segments back, and
// the memory a ResNet-50-like sequence of tensors costs against their sum.
// The pool never touches the memory, so the segments here are addresses of
// a simulated device (a counter), not allocations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cortado/util/block_pool.hpp"

namespace cortado {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

// Hands out segment addresses, 2 MiB aligned, never reused.
struct FakeDevice {
  uintptr_t next = uintptr_t(1) << 40;
  size_t held = 0, peak = 0;
  void* Get(size_t bytes) {
    void* p = reinterpret_cast<void*>(next);
    next += (bytes + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);
    held += bytes;
    peak = std::max(peak, held);
    return p;
  }
};

void* Alloc(BlockPool& pool, FakeDevice& dev, size_t bytes) {
  if (void* p = pool.Allocate(bytes)) return p;
  const size_t seg = BlockPool::SegmentBytes(bytes);
  return pool.AddSegment(dev.Get(seg), seg, bytes);
}

char* C(void* p) { return static_cast<char*>(p); }

TEST(BlockPool, SizeClassesAndSegmentSizes) {
  EXPECT_EQ(BlockPool::RoundBytes(1), 512u);
  EXPECT_EQ(BlockPool::RoundBytes(512), 512u);
  EXPECT_EQ(BlockPool::RoundBytes(513), 1024u);
  EXPECT_EQ(BlockPool::SegmentBytes(1), 2 * kMiB);
  EXPECT_EQ(BlockPool::SegmentBytes(kMiB), 2 * kMiB);
  EXPECT_EQ(BlockPool::SegmentBytes(kMiB + 1), 20 * kMiB);
  EXPECT_EQ(BlockPool::SegmentBytes(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(BlockPool::SegmentBytes(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(BlockPool::SegmentBytes(49 * kMiB + 1), 50 * kMiB);
}

TEST(BlockPool, SplitsASegmentAndServesTheRestFromIt) {
  BlockPool pool;
  FakeDevice dev;
  EXPECT_EQ(pool.Allocate(1000), nullptr) << "an empty pool has nothing to hand out";
  void* a = Alloc(pool, dev, 1000);
  void* b = Alloc(pool, dev, 3000);
  EXPECT_EQ(pool.segments(), 1u);
  EXPECT_EQ(C(b), C(a) + 1024) << "the second block follows the first in the same segment";
  EXPECT_EQ(pool.in_use(), 1024u + 3072u);
  EXPECT_EQ(pool.reserved(), 2 * kMiB);
  EXPECT_TRUE(pool.Owns(a));
  EXPECT_FALSE(pool.Owns(C(a) + 512));
}

TEST(BlockPool, BestFitPicksTheSmallestFreeBlockThatFits) {
  BlockPool pool;
  FakeDevice dev;
  void* a = Alloc(pool, dev, 8192);
  void* sep1 = Alloc(pool, dev, 512);
  void* b = Alloc(pool, dev, 2048);
  void* sep2 = Alloc(pool, dev, 512);
  pool.Free(a);
  pool.Free(b);
  // Free now: a (8192), b (2048), and the segment's tail (about 2 MiB).
  EXPECT_EQ(pool.Allocate(2000), b);
  EXPECT_EQ(pool.Allocate(4096), a) << "the 8 KiB hole, split";
  EXPECT_EQ(pool.Allocate(4096), C(a) + 4096) << "the other half of the hole";
  EXPECT_EQ(pool.segments(), 1u);
  (void)sep1;
  (void)sep2;
}

TEST(BlockPool, FreedNeighboursMergeAndWholeSegmentsGoBack) {
  BlockPool pool;
  FakeDevice dev;
  void* a = Alloc(pool, dev, 4096);
  void* b = Alloc(pool, dev, 4096);
  void* c = Alloc(pool, dev, 4096);
  pool.Free(b);
  pool.Free(a);  // merges with b
  EXPECT_EQ(pool.Allocate(8192), a) << "a and b merged into one block";
  EXPECT_TRUE(pool.TakeFreeSegments().empty()) << "the segment still has live blocks";
  pool.Free(a);
  pool.Free(c);  // a, c and the tail merge into the whole segment
  EXPECT_EQ(pool.in_use(), 0u);
  const std::vector<void*> back = pool.TakeFreeSegments();
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0], a);
  EXPECT_EQ(pool.reserved(), 0u);
  EXPECT_EQ(pool.segments(), 0u);
  EXPECT_EQ(pool.Allocate(512), nullptr) << "nothing cached after the segment went back";
}

TEST(BlockPool, LargeRemaindersUpToOneMiBStayWithTheBlock) {
  BlockPool pool;
  FakeDevice dev;
  void* a = Alloc(pool, dev, 19 * kMiB + kMiB / 2);  // a 20 MiB segment, 0.5 MiB left: not split
  EXPECT_EQ(pool.in_use(), 20 * kMiB);
  EXPECT_EQ(pool.Allocate(2 * kMiB), nullptr);
  void* b = Alloc(pool, dev, 2 * kMiB);  // a 20 MiB segment, 18 MiB left: split
  EXPECT_EQ(pool.in_use(), 22 * kMiB);
  EXPECT_EQ(pool.Allocate(18 * kMiB), C(b) + 2 * kMiB);
  (void)a;
}

TEST(BlockPool, SmallAndLargeBlocksKeepToTheirOwnSegments) {
  BlockPool pool;
  FakeDevice dev;
  void* big = Alloc(pool, dev, 4 * kMiB);
  pool.Free(big);  // a free 20 MiB segment
  EXPECT_EQ(pool.Allocate(4096), nullptr) << "a small block is not carved out of a large segment";
  EXPECT_EQ(pool.Allocate(3 * kMiB), big);
}

// The tensors of a ResNet-50-like FP16 training net at batch 32, in the
// order a Caffe-style net allocates them (every top's data, then at the
// first backward every diff), with a convolution workspace that grows and a
// temporary buffer per layer: the memory held stays within 10% of the sum of
// the live tensors, where powers of two cost about a third more.
TEST(BlockPool, ResNetLikeNetCostsWithinTenPercentOfItsTensors) {
  const size_t batch = 32, bytes_per_value = 2;
  std::vector<size_t> tops;  // values per top
  tops.push_back(batch * 3 * 224 * 224);
  tops.push_back(batch * 64 * 112 * 112);
  tops.push_back(batch * 64 * 56 * 56);
  const int blocks[4] = {3, 4, 6, 3};
  int width = 64, size = 56;
  for (int s = 0; s < 4; ++s) {
    for (int b = 0; b < blocks[s]; ++b) {
      const int out = width * 4;
      const int in_size = (b == 0 && s > 0) ? size * 2 : size;
      tops.push_back(batch * width * in_size * in_size);  // 1x1 reduce (stride on the first 1x1)
      if (b == 0 && s > 0) tops.back() = batch * width * size * size;
      tops.push_back(batch * width * size * size);  // 3x3
      tops.push_back(batch * out * size * size);    // 1x1 expand
      if (b == 0) tops.push_back(batch * out * size * size);  // projection
      tops.push_back(batch * out * size * size);              // sum
    }
    width *= 2;
    if (s < 3) size /= 2;
  }
  tops.push_back(batch * 2048);
  tops.push_back(batch * 1000);

  BlockPool pool;
  FakeDevice dev;
  size_t live = 0, live_peak = 0, pow2_live = 0, pow2_peak = 0;
  auto pow2 = [](size_t b) {
    size_t r = 512;
    while (r < b) r <<= 1;
    return r;
  };
  std::vector<void*> keep;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  auto use = [&](size_t bytes) {
    keep.push_back(Alloc(pool, dev, bytes));
    live += bytes;
    pow2_live += pow2(bytes);
    live_peak = std::max(live_peak, live);
    pow2_peak = std::max(pow2_peak, pow2_live);
  };
  auto temporary = [&](size_t bytes) {
    void* t = Alloc(pool, dev, bytes);
    live_peak = std::max(live_peak, live + bytes);
    pool.Free(t);
  };
  auto grow_workspace = [&](size_t bytes) {
    if (bytes <= workspace_bytes) return;
    if (workspace) {
      pool.Free(workspace);
      live -= workspace_bytes;
    }
    workspace = Alloc(pool, dev, bytes);
    workspace_bytes = bytes;
    live += bytes;
    live_peak = std::max(live_peak, live);
  };
  // Weights (FP16 working copy, FP32 master and history), 161 tensors.
  for (int i = 0; i < 161; ++i) use((25557032 / 161) * 4);
  for (size_t i = 0; i < tops.size(); ++i) {
    use(tops[i] * bytes_per_value);
    grow_workspace(tops[i] / 4);
    temporary(std::max<size_t>(tops[i] / 64, 256));
  }
  for (size_t i = tops.size(); i-- > 0;) {
    use(tops[i] * bytes_per_value);
    temporary(std::max<size_t>(tops[i] / 16, 256));
  }
  const double ours = double(dev.peak) / double(live_peak);
  const double powers = double(pow2_peak) / double(live_peak);
  std::printf("memory held / live tensors: %.3f (powers of two: %.3f)\n", ours, powers);
  EXPECT_LE(ours, 1.10) << "held " << dev.peak << " bytes for at most " << live_peak << " live";
  EXPECT_GE(powers, 1.2) << "the power-of-two scheme this replaces (a check on the sizes used)";
  // Everything back: the pool merges to whole segments, all returnable.
  for (void* p : keep) pool.Free(p);
  pool.Free(workspace);
  EXPECT_EQ(pool.in_use(), 0u);
  const size_t segments = pool.segments();
  EXPECT_EQ(pool.TakeFreeSegments().size(), segments);
  EXPECT_EQ(pool.reserved(), 0u);
}

}  // namespace
}  // namespace cortado
