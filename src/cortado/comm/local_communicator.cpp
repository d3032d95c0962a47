// The threads engine (communicator.hpp): the ranks of one process, one
// thread each, meeting at a barrier. A collective publishes each rank's
// buffer, then works on the others' in place; the barrier's mutex orders
// those reads and writes.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "cortado/bfloat16.hpp"
#include "cortado/comm/communicator.hpp"
#include "cortado/common.hpp"
#include "cortado/types.hpp"

namespace cortado {
namespace {

class Group {
 public:
  explicit Group(int n)
      : n_(n), buffers_(static_cast<size_t>(n)), values_(static_cast<size_t>(n)), inside_(static_cast<size_t>(n)) {}
  int size() const { return n_; }

  // Returns when every rank has arrived; throws once the group is aborted.
  // `last`: the collective's last barrier. Between its barriers a rank
  // reads or writes the others' buffers, so an aborted rank leaves (and
  // frees its buffers) only once no rank is between barriers.
  void Wait(int rank, bool last) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (inside_[static_cast<size_t>(rank)]) {
      inside_[static_cast<size_t>(rank)] = false;
      if (--busy_ == 0) cv_.notify_all();
    }
    if (aborted_) throw_aborted(lock);
    const int64_t generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation || aborted_; });
      if (generation_ == generation) throw_aborted(lock);
    }
    if (!last) {
      inside_[static_cast<size_t>(rank)] = true;
      ++busy_;
    }
  }
  void Abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    cv_.notify_all();
  }

  // Slots the ranks publish into before a Wait and read after it.
  std::vector<void*>& buffers() { return buffers_; }
  std::vector<int64_t>& values() { return values_; }

 private:
  [[noreturn]] void throw_aborted(std::unique_lock<std::mutex>& lock) {
    cv_.wait(lock, [&] { return busy_ == 0; });
    throw Error("another rank of this process failed, so this one stopped (see that rank's error)");
  }

  const int n_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int64_t generation_ = 0;
  bool aborted_ = false;
  std::vector<void*> buffers_;
  std::vector<int64_t> values_;
  std::vector<bool> inside_;  // rank -> between the barriers of a collective
  int busy_ = 0;              // how many are
};

// out[i] = b_0[i] + b_1[i] + ... in rank order, each sum rounded to T (the
// 16-bit types in themselves, as the other engines sum them), for i in
// [lo, hi).
template <typename T>
void sum_slice(const std::vector<void*>& b, int64_t lo, int64_t hi, T* out) {
  for (int64_t i = lo; i < hi; ++i) {
    T acc = static_cast<const T*>(b[0])[i];
    for (size_t k = 1; k < b.size(); ++k) {
      if constexpr (is_half_v<T>)
        acc = T(static_cast<float>(acc) + static_cast<float>(static_cast<const T*>(b[k])[i]));
      else
        acc += static_cast<const T*>(b[k])[i];
    }
    out[i] = acc;
  }
}

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  const char* engine() const override { return "threads"; }

  using Communicator::AllReduceSum;
  // A reduce-scatter, then an all-gather: rank r sums slice r of every
  // rank's buffer into its own; then every rank copies the other slices
  // from their owners. Each value is summed once, so all ranks get its bits.
  void AllReduceSum(void* data, int64_t count, Type type) override {
    const int n = size();
    std::vector<void*>& b = group_->buffers();
    b[static_cast<size_t>(rank_)] = data;
    group_->Wait(rank_, false);
    auto lo = [&](int r) { return count * r / n; };
    dispatch_type(type, [&](auto t) {
      using T = decltype(t);
      sum_slice(b, lo(rank_), lo(rank_ + 1), static_cast<T*>(data));
    });
    group_->Wait(rank_, false);
    const size_t bytes = type_size(type);
    for (int k = 0; k < n; ++k) {
      if (k == rank_) continue;
      std::memcpy(static_cast<char*>(data) + lo(k) * bytes, static_cast<const char*>(b[static_cast<size_t>(k)]) + lo(k) * bytes,
                  static_cast<size_t>(lo(k + 1) - lo(k)) * bytes);
    }
    group_->Wait(rank_, true);  // no rank returns (and reuses its buffer) while another still reads it
  }

  void Broadcast(void* data, int64_t bytes, int root) override {
    std::vector<void*>& b = group_->buffers();
    b[static_cast<size_t>(rank_)] = data;
    group_->Wait(rank_, false);
    if (rank_ != root && bytes > 0) std::memcpy(data, b[static_cast<size_t>(root)], static_cast<size_t>(bytes));
    group_->Wait(rank_, true);
  }

  int64_t Max(int64_t value) override {
    std::vector<int64_t>& v = group_->values();
    v[static_cast<size_t>(rank_)] = value;
    group_->Wait(rank_, false);
    const int64_t m = *std::max_element(v.begin(), v.end());
    group_->Wait(rank_, true);
    return m;
  }

  [[noreturn]] void Abort(int status) override {
    group_->Abort();
    throw Error(str_cat("rank ", rank_, " of ", size(), " stopped its group (status ", status, ")"));
  }

 private:
  std::shared_ptr<Group> group_;
  int rank_;
};

}  // namespace

std::vector<std::shared_ptr<Communicator>> LocalGroup(int n) {
  if (n < 1) fail("a group of ", n, " ranks: need at least one");
  auto group = std::make_shared<Group>(n);
  std::vector<std::shared_ptr<Communicator>> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(std::make_shared<LocalCommunicator>(group, r));
  return ranks;
}

}  // namespace cortado
