// The threads engine (communicator.hpp): the ranks of one process, one
// thread each, meeting at a barrier. A collective publishes each rank's
// buffer, then works on the others' in place; the barrier's mutex orders
// those reads and writes.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "cortado/bfloat16.hpp"
#include "cortado/comm/communicator.hpp"
#include "cortado/comm/rank_phase.hpp"
#include "cortado/common.hpp"
#include "cortado/types.hpp"

namespace cortado {
namespace {

class Group {
 public:
  explicit Group(int n)
      : n_(n),
        buffers_(static_cast<size_t>(n)),
        values_(static_cast<size_t>(n)),
        inside_(static_cast<size_t>(n)),
        waiting_(static_cast<size_t>(n)) {}
  int size() const { return n_; }

  // Returns when every rank has arrived; throws once the group is aborted,
  // or (timeout > 0) when the others have not all arrived within `timeout`
  // seconds, which aborts the group. `last`: the collective's last barrier.
  // Between its barriers a rank reads or writes the others' buffers, so an
  // aborted rank leaves (and frees its buffers) only once no rank is
  // between barriers.
  void Wait(int rank, bool last, double timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    const size_t r = static_cast<size_t>(rank);
    if (inside_[r]) {
      inside_[r] = false;
      if (--busy_ == 0) cv_.notify_all();
    }
    if (aborted_) throw_aborted(rank, lock);
    const int64_t generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      waiting_[r] = true;
      auto done = [&] { return generation_ != generation || aborted_; };
      if (timeout > 0) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
        if (!cv_.wait_until(lock, deadline, done)) {
          waiting_[r] = false;
          --arrived_;
          reason_ = TimeoutReason(rank, timeout);
          aborted_ = true;
          cv_.notify_all();
          throw_aborted(rank, lock);
        }
      } else {
        cv_.wait(lock, done);
      }
      waiting_[r] = false;
      if (generation_ == generation) throw_aborted(rank, lock);
    }
    if (!last) {
      inside_[r] = true;
      ++busy_;
    }
  }
  // Stops the group: every rank throws in its current or next Wait, with
  // `reason` (the first given) in its message.
  void Abort(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!aborted_ || reason_.empty()) reason_ = reason;
    aborted_ = true;
    cv_.notify_all();
  }

  // Slots the ranks publish into before a Wait and read after it.
  std::vector<void*>& buffers() { return buffers_; }
  std::vector<int64_t>& values() { return values_; }

 private:
  // Which ranks `rank` waited for, and where they were (comm/rank_phase.hpp).
  std::string TimeoutReason(int rank, double timeout) const {
    std::string missing;
    for (int k = 0; k < n_; ++k) {
      if (k == rank || waiting_[static_cast<size_t>(k)]) continue;
      missing += str_cat(missing.empty() ? "" : ", ", "rank ", k, at_rank_phase(k));
    }
    return str_cat("rank ", rank, " of ", n_, " waited ", timeout, " s (collective_timeout) in a collective",
                   at_rank_phase(rank), " for ", missing.empty() ? std::string("the other ranks") : missing,
                   ", which never came: the job is ended");
  }
  [[noreturn]] void throw_aborted(int rank, std::unique_lock<std::mutex>& lock) {
    cv_.wait(lock, [&] { return busy_ == 0; });
    if (reason_.empty())
      throw RankStopped("another rank of this process failed, so this one stopped (see that rank's error)");
    // The rank that timed out or failed says so in its own words; the
    // others say where they stopped, and why.
    if (reason_.compare(0, str_cat("rank ", rank, " of ").size(), str_cat("rank ", rank, " of ")) == 0)
      throw Error(reason_);
    throw RankStopped(str_cat("rank ", rank, " of ", n_, " stopped", at_rank_phase(rank), " because ", reason_));
  }

  const int n_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int64_t generation_ = 0;
  bool aborted_ = false;
  std::string reason_;  // why the group was aborted: the first failure
  std::vector<void*> buffers_;
  std::vector<int64_t> values_;
  std::vector<bool> inside_;   // rank -> between the barriers of a collective
  std::vector<bool> waiting_;  // rank -> waiting in a barrier
  int busy_ = 0;               // how many are between barriers
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
    group_->Wait(rank_, false, timeout_);
    auto lo = [&](int r) { return count * r / n; };
    dispatch_type(type, [&](auto t) {
      using T = decltype(t);
      sum_slice(b, lo(rank_), lo(rank_ + 1), static_cast<T*>(data));
    });
    group_->Wait(rank_, false, timeout_);
    const size_t bytes = type_size(type);
    for (int k = 0; k < n; ++k) {
      if (k == rank_) continue;
      std::memcpy(static_cast<char*>(data) + lo(k) * bytes, static_cast<const char*>(b[static_cast<size_t>(k)]) + lo(k) * bytes,
                  static_cast<size_t>(lo(k + 1) - lo(k)) * bytes);
    }
    group_->Wait(rank_, true, timeout_);  // no rank returns (and reuses its buffer) while another still reads it
  }

  void Broadcast(void* data, int64_t bytes, int root) override {
    std::vector<void*>& b = group_->buffers();
    b[static_cast<size_t>(rank_)] = data;
    group_->Wait(rank_, false, timeout_);
    if (rank_ != root && bytes > 0) std::memcpy(data, b[static_cast<size_t>(root)], static_cast<size_t>(bytes));
    group_->Wait(rank_, true, timeout_);
  }

  int64_t Max(int64_t value) override {
    std::vector<int64_t>& v = group_->values();
    v[static_cast<size_t>(rank_)] = value;
    group_->Wait(rank_, false, timeout_);
    const int64_t m = *std::max_element(v.begin(), v.end());
    group_->Wait(rank_, true, timeout_);
    return m;
  }

  using Communicator::Abort;
  [[noreturn]] void Abort(int status, const std::string& reason) override {
    group_->Abort(reason);
    throw Error(reason.empty() ? str_cat("rank ", rank_, " of ", size(), " stopped its group (status ", status, ")")
                               : reason);
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
