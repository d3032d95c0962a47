// The injected faults (comm/injected_fault.hpp).
#include "cortado/comm/injected_fault.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>
#include <vector>

#include "cortado/common.hpp"

namespace cortado {

InjectedFault ParseInjectedFault(const std::string& spec, const std::string& flag) {
  InjectedFault f;
  if (spec.empty()) return f;
  std::vector<std::string> parts;
  std::stringstream ss(spec);
  for (std::string part; std::getline(ss, part, ':');) parts.push_back(part);
  auto bad = [&]() {
    fail(flag, "=", spec, ": expected RANK:ITERATION:ACTION, with ACTION one of throw, kill, hang (e.g. 1:12:throw)");
  };
  if (parts.size() != 3) bad();
  auto number = [&](const std::string& s) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || v < 0 || v > 1 << 30) bad();
    return static_cast<int>(v);
  };
  f.rank = number(parts[0]);
  f.iteration = number(parts[1]);
  if (parts[2] == "throw") {
    f.action = InjectedFault::kThrow;
  } else if (parts[2] == "kill") {
    f.action = InjectedFault::kKill;
  } else if (parts[2] == "hang") {
    f.action = InjectedFault::kHang;
  } else {
    bad();
  }
  return f;
}

void CarryOut(const InjectedFault& fault, const std::string& layer) {
  switch (fault.action) {
    case InjectedFault::kNone:
      return;
    case InjectedFault::kThrow:
      fail("the injected fault (", fault.rank, ":", fault.iteration, ":throw) in the backward of layer '", layer, "'");
    case InjectedFault::kKill:
      ::kill(::getpid(), SIGKILL);
      break;
    case InjectedFault::kHang:
      break;
  }
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace cortado
