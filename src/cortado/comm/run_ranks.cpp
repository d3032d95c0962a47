#include "cortado/comm/run_ranks.hpp"

#include <algorithm>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include "cortado/comm/machine_ranks.hpp"
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

void RunRanks(const std::vector<int>& devices, const std::function<void(const Rank&)>& body, RankEngine engine) {
  const int n = static_cast<int>(devices.size());
  const std::vector<std::shared_ptr<Communicator>> comms =
      ResolveEngine(devices, engine) == RankEngine::kNccl ? NcclGroup(devices) : LocalGroup(n);
  const ThreadRanksScope machine_ranks(n);  // the ranks' defaults share the cores (comm/machine_ranks.hpp)
  std::mutex mutex;
  std::string first_error;  // the first rank to fail; the others' stops follow from it
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      set_thread_logs_info(r == 0);
      Rank rank;
      rank.rank = r;
      rank.ranks = n;
      rank.comm = comms[static_cast<size_t>(r)];
      try {
        const int device = devices[static_cast<size_t>(r)];
        rank.ctx = device < 0 ? Context::Cpu() : Context::Create(device);
        body(rank);
      } catch (const std::exception& e) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (first_error.empty()) first_error = str_cat("rank ", r, " of ", n, ": ", e.what());
        }
        try {
          rank.comm->Abort(1);  // wakes the ranks waiting for this one; throws here
        } catch (const std::exception&) {
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (!first_error.empty()) throw Error(first_error);
}

}  // namespace cortado
