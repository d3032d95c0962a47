#include "cortado/comm/run_ranks.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include "cortado/comm/machine_ranks.hpp"
#include "cortado/comm/rank_phase.hpp"
#include "cortado/common.hpp"
#include "cortado/util/logging.hpp"

namespace cortado {

RankEngine ResolveEngine(const std::vector<int>& devices, RankEngine engine) {
  if (devices.empty()) fail("no ranks to run: the device list is empty");
  const bool cpu = std::any_of(devices.begin(), devices.end(), [](int d) { return d < 0; });
  const bool repeated = std::set<int>(devices.begin(), devices.end()).size() != devices.size();
  if (engine == RankEngine::kNccl) {
    if (!NcclBuilt()) fail("the NCCL engine: this build has no NCCL");
    if (cpu) fail("the NCCL engine: every rank needs a GPU");
    if (repeated) fail("the NCCL engine: every rank needs a GPU of its own (NCCL takes one rank per device)");
    return engine;
  }
  if (engine == RankEngine::kThreads) return engine;
  return NcclBuilt() && !cpu && !repeated ? RankEngine::kNccl : RankEngine::kThreads;
}

std::shared_ptr<Communicator> GpuProcessRank(std::shared_ptr<Communicator> world, const std::vector<int>& ids,
                                             int local_rank) {
  if (ids.empty()) fail("no GPU ids for the rank");
  const bool repeated = std::set<int>(ids.begin(), ids.end()).size() != ids.size();
  const bool wraps = static_cast<size_t>(local_rank) >= ids.size();
  // Every rank computes `repeated` alike; `wraps` only on its own machine.
  if (!NcclBuilt() || repeated || world->Max(wraps ? 1 : 0) != 0) return world;
  return NcclOverHost(std::move(world), ids[static_cast<size_t>(local_rank) % ids.size()]);
}

namespace {

std::atomic<int> g_left_running{0};

// "rank 1 of 3 failed at iteration 12 (the update): <what>", unless the
// message already says which rank it is (a collective's timeout, an abort
// another rank started).
std::string failure_message(int r, int n, const std::string& what) {
  const std::string self = str_cat("rank ", r, " of ", n);
  if (what.compare(0, self.size(), self) == 0) return what;
  return str_cat(self, " failed", at_rank_phase(r), ": ", what);
}

}  // namespace

int ranks_left_running() { return g_left_running.load(); }

void RunRanks(const std::vector<int>& devices, const std::function<void(const Rank&)>& body, RankEngine engine,
              double stop_seconds) {
  const int n = static_cast<int>(devices.size());
  const std::vector<std::shared_ptr<Communicator>> comms =
      ResolveEngine(devices, engine) == RankEngine::kNccl ? NcclGroup(devices) : LocalGroup(n);
  const ThreadRanksScope machine_ranks(n);  // the ranks' defaults share the cores (comm/machine_ranks.hpp)
  // Shared with the threads, which a failure may leave running past this
  // call: they hold it alive.
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    std::string first_error;  // the rank that failed first; the others' stops follow from it
    std::chrono::steady_clock::time_point failed_at;
    std::vector<bool> done;
  };
  for (int r = 0; r < n; ++r) clear_rank_phase(r);  // marks of an earlier job in this process
  auto state = std::make_shared<State>();
  state->done.assign(static_cast<size_t>(n), false);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([state, &devices, &body, comm = comms[static_cast<size_t>(r)], r, n] {
      set_thread_logs_info(r == 0);
      Rank rank;
      rank.rank = r;
      rank.ranks = n;
      rank.comm = comm;
      try {
        const int device = devices[static_cast<size_t>(r)];
        rank.ctx = device < 0 ? Context::Cpu() : Context::Create(device);
        body(rank);
      } catch (const std::exception& e) {
        const std::string message = failure_message(r, n, e.what());
        bool first = false;
        {
          std::lock_guard<std::mutex> lock(state->mutex);
          // A rank that stopped because another failed is not the cause.
          if (state->first_error.empty() && !dynamic_cast<const RankStopped*>(&e)) {
            state->first_error = message;
            state->failed_at = std::chrono::steady_clock::now();
            first = true;
          }
        }
        if (!first) LOG(ERROR) << message;
        try {
          rank.comm->Abort(1, message);  // wakes the ranks waiting for this one; throws here
        } catch (const std::exception&) {
        }
      }
      std::lock_guard<std::mutex> lock(state->mutex);
      state->done[static_cast<size_t>(r)] = true;
      state->cv.notify_all();
    });
  }
  std::vector<int> stuck;
  {
    std::unique_lock<std::mutex> lock(state->mutex);
    auto all_done = [&] { return std::all_of(state->done.begin(), state->done.end(), [](bool d) { return d; }); };
    while (!all_done()) {
      if (state->first_error.empty() || stop_seconds <= 0) {
        state->cv.wait(lock);
        continue;
      }
      const auto deadline = state->failed_at + std::chrono::duration<double>(stop_seconds);
      if (!state->cv.wait_until(lock, deadline, all_done)) {
        for (int r = 0; r < n; ++r)
          if (!state->done[static_cast<size_t>(r)]) stuck.push_back(r);
        break;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    std::thread& t = threads[static_cast<size_t>(r)];
    if (std::find(stuck.begin(), stuck.end(), r) != stuck.end()) {
      t.detach();
    } else {
      t.join();
    }
  }
  std::lock_guard<std::mutex> lock(state->mutex);
  if (state->first_error.empty()) return;
  std::string error = state->first_error;
  for (int r : stuck) {
    const std::string at = at_rank_phase(r);
    error += str_cat("; rank ", r, " did not stop within ", stop_seconds, " s",
                     at.empty() ? "" : " (it is" + at + ")", " and is left running");
  }
  g_left_running += static_cast<int>(stuck.size());
  throw Error(error);
}

}  // namespace cortado
