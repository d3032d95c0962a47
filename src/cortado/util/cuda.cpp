// The caching device allocator and the thread's current stream.
//
// A freed block goes back to the pool of the stream it was allocated on
// (the allocating thread's current stream) and is handed out again only on
// that stream: work queued on it before the free runs before any later use,
// so no block is reused while its old kernels may still read or write it,
// however many streams (ranks of one process, two on one device) allocate.
#include "cortado/util/cuda.hpp"

#include "cortado/util/block_pool.hpp"
#include "cortado/util/cuda_hold.hpp"

#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace cortado {
namespace cuda {

namespace {
thread_local cudaStream_t t_stream = cudaStreamPerThread;
thread_local std::vector<void*>* t_held = nullptr;  // HoldFrees

// A pool of blocks: one per device and stream.
using PoolKey = std::pair<int, const void*>;

struct Workspace {
  void* ptr = nullptr;
  size_t bytes = 0;
  uint64_t generation = 0;  // times it was reallocated
};

struct Cache {
  std::mutex mu;
  std::map<PoolKey, BlockPool> pools;
  std::map<const void*, Workspace> workspaces;  // pool stream -> its workspace
  std::unordered_map<void*, PoolKey> live;  // the blocks handed out -> their pool
  size_t in_use = 0, peak = 0, reserved = 0, reserved_peak = 0;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: blocks outlive static destructors
  return *c;
}

void note_use(Cache& c, void* p, const PoolKey& key, const BlockPool& pool, size_t before) {
  c.live[p] = key;
  c.in_use += pool.in_use() - before;
  if (c.in_use > c.peak) c.peak = c.in_use;
}
}  // namespace

// The stream a block allocated now belongs to. The per-thread default
// stream is one handle for different streams, so it is told apart by thread.
const void* pool_stream() {
  thread_local const char tag = 0;
  return t_stream == cudaStreamPerThread ? static_cast<const void*>(&tag) : static_cast<const void*>(t_stream);
}

cudaStream_t stream() { return t_stream; }
void set_stream(cudaStream_t s) { t_stream = s ? s : cudaStreamPerThread; }

bool available() {
  static const bool ok = [] {
    int n = 0;
    const bool r = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    cudaGetLastError();
    return r;
  }();
  return ok;
}

void* device_alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  int device = 0;
  CORTADO_CUDA_CHECK(cudaGetDevice(&device));
  const PoolKey key{device, pool_stream()};
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    BlockPool& pool = c.pools[key];
    const size_t before = pool.in_use();
    if (void* p = pool.Allocate(bytes)) {
      note_use(c, p, key, pool, before);
      return p;
    }
  }
  // cudaMalloc and cudaFree run without the lock: cudaFree waits for the
  // device, whose queued work (another rank's sums, say) may wait for a
  // thread that needs the allocator meanwhile.
  const size_t segment = BlockPool::SegmentBytes(bytes);
  void* s = nullptr;
  cudaError_t e = cudaMalloc(&s, segment);
  if (e == cudaErrorMemoryAllocation) {
    // Give the wholly free segments of this device (any stream: cudaFree
    // waits for the device) back and try once more.
    cudaGetLastError();
    std::vector<void*> segments;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      for (auto& [k, pool] : c.pools) {
        if (k.first != device) continue;
        const size_t before = pool.reserved();
        for (void* f : pool.TakeFreeSegments()) segments.push_back(f);
        c.reserved -= before - pool.reserved();
      }
    }
    for (void* f : segments) cudaFree(f);
    e = cudaMalloc(&s, segment);
  }
  std::lock_guard<std::mutex> lock(c.mu);
  if (e != cudaSuccess)
    fail("out of GPU memory allocating ", segment, " bytes for a block of ", bytes, " on device ", device, " (",
         c.in_use, " bytes in use, ", c.reserved, " reserved): ", cudaGetErrorString(e));
  BlockPool& pool = c.pools[key];
  const size_t before = pool.in_use();
  void* p = pool.AddSegment(s, segment, bytes);
  c.reserved += segment;
  if (c.reserved > c.reserved_peak) c.reserved_peak = c.reserved;
  note_use(c, p, key, pool, before);
  return p;
}

HoldFrees::HoldFrees(std::vector<void*>* held) : before_(t_held) { t_held = held; }
HoldFrees::~HoldFrees() { t_held = before_; }

void device_free(void* p) {
  if (!p) return;
  if (t_held) {
    t_held->push_back(p);  // still live: its owner frees it later
    return;
  }
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.live.find(p);
  CORTADO_CHECK(it != c.live.end()) << "freeing a block the allocator does not know";
  BlockPool& pool = c.pools.at(it->second);
  const size_t before = pool.in_use();
  pool.Free(p);
  c.in_use -= before - pool.in_use();
  c.live.erase(it);
}

void* stream_workspace(size_t bytes) {
  if (bytes == 0) return nullptr;
  Workspace* w = nullptr;
  {
    // Only the lookup under the lock (map nodes stay put): a stream's
    // workspace is used by its own thread alone, and growing it may wait for
    // the device (see device_alloc).
    std::lock_guard<std::mutex> lock(cache().mu);
    w = &cache().workspaces[pool_stream()];
  }
  if (w->bytes < bytes) {
    device_free(w->ptr);  // back to this stream's pool: work queued before it finishes first
    w->ptr = nullptr;
    w->bytes = 0;
    w->ptr = device_alloc(bytes);
    w->bytes = bytes;
    w->generation += 1;
  }
  return w->ptr;
}

uint64_t stream_workspace_generation(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(cache().mu);
  auto it = cache().workspaces.find(stream);
  return it == cache().workspaces.end() ? 0 : it->second.generation;
}

void release_stream(cudaStream_t stream) {
  Cache& c = cache();
  void* workspace = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto w = c.workspaces.find(stream);
    if (w != c.workspaces.end()) {
      workspace = w->second.ptr;
      c.workspaces.erase(w);
    }
  }
  device_free(workspace);
  std::vector<void*> segments;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    for (auto it = c.pools.begin(); it != c.pools.end();) {
      if (it->first.second != stream) {
        ++it;
        continue;
      }
      // Blocks still live (a tensor that outlives its context) keep their
      // segments; their later device_free finds the pool.
      BlockPool& pool = it->second;
      const size_t before = pool.reserved();
      for (void* s : pool.TakeFreeSegments()) segments.push_back(s);
      c.reserved -= before - pool.reserved();
      it = pool.segments() == 0 ? c.pools.erase(it) : std::next(it);
    }
  }
  for (void* s : segments) cudaFree(s);
}

size_t device_bytes_in_use() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().in_use;
}

size_t device_bytes_peak() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().peak;
}

size_t device_bytes_reserved_peak() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().reserved_peak;
}

}  // namespace cuda
}  // namespace cortado
