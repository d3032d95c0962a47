// The caching device allocator and the thread's current stream.
//
// A freed block goes back to the pool of the stream it was allocated on
// (the allocating thread's current stream) and is handed out again only on
// that stream: work queued on it before the free runs before any later use,
// so no block is reused while its old kernels may still read or write it,
// however many streams (ranks of one process, two on one device) allocate.
#include "cortado/util/cuda.hpp"

#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace cortado {
namespace cuda {

namespace {
thread_local cudaStream_t t_stream = cudaStreamPerThread;

// The pool a block belongs to: device, stream, size.
struct Key {
  int device;
  const void* stream;
  size_t bytes;
  bool operator<(const Key& o) const {
    return std::tie(device, stream, bytes) < std::tie(o.device, o.stream, o.bytes);
  }
};

struct Workspace {
  void* ptr = nullptr;
  size_t bytes = 0;
};

struct Cache {
  std::mutex mu;
  std::map<Key, std::vector<void*>> free;
  std::map<const void*, Workspace> workspaces;  // pool stream -> its workspace
  std::unordered_map<void*, Key> live;  // the blocks handed out
  size_t in_use = 0, peak = 0;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: blocks outlive static destructors
  return *c;
}

size_t round_up(size_t bytes) {
  size_t r = 512;
  while (r < bytes) r <<= 1;
  return r;
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
  const size_t size = round_up(bytes);
  const Key key{device, pool_stream(), size};
  Cache& c = cache();
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto& list = c.free[key];
    if (!list.empty()) {
      p = list.back();
      list.pop_back();
      c.live[p] = key;
      c.in_use += size;
      if (c.in_use > c.peak) c.peak = c.in_use;
      return p;
    }
  }
  // cudaMalloc and cudaFree run without the lock: cudaFree waits for the
  // device, whose queued work (another rank's sums, say) may wait for a
  // thread that needs the allocator meanwhile.
  cudaError_t e = cudaMalloc(&p, size);
  if (e == cudaErrorMemoryAllocation) {
    // Give the cached blocks of this device (any stream: cudaFree waits for
    // the device) back and try once more.
    cudaGetLastError();
    std::vector<void*> blocks;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      for (auto& [k, list] : c.free) {
        if (k.device != device) continue;
        blocks.insert(blocks.end(), list.begin(), list.end());
        list.clear();
      }
    }
    for (void* b : blocks) cudaFree(b);
    e = cudaMalloc(&p, size);
  }
  std::lock_guard<std::mutex> lock(c.mu);
  if (e != cudaSuccess)
    fail("out of GPU memory allocating ", size, " bytes on device ", device, " (", c.in_use,
         " bytes in use): ", cudaGetErrorString(e));
  c.live[p] = key;
  c.in_use += size;
  if (c.in_use > c.peak) c.peak = c.in_use;
  return p;
}

void device_free(void* p) {
  if (!p) return;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.live.find(p);
  CORTADO_CHECK(it != c.live.end()) << "freeing a block the allocator does not know";
  c.in_use -= it->second.bytes;
  c.free[it->second].push_back(p);
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
  }
  return w->ptr;
}

void release_stream(cudaStream_t stream) {
  Cache& c = cache();
  std::vector<void*> blocks;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto w = c.workspaces.find(stream);
    if (w != c.workspaces.end()) {
      auto live = c.live.find(w->second.ptr);
      if (live != c.live.end()) {
        c.in_use -= live->second.bytes;
        c.live.erase(live);
        blocks.push_back(w->second.ptr);
      }
      c.workspaces.erase(w);
    }
    for (auto it = c.free.begin(); it != c.free.end();) {
      if (it->first.stream == stream) {
        blocks.insert(blocks.end(), it->second.begin(), it->second.end());
        it = c.free.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (void* b : blocks) cudaFree(b);
}

size_t device_bytes_in_use() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().in_use;
}

size_t device_bytes_peak() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().peak;
}

}  // namespace cuda
}  // namespace cortado
