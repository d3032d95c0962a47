#pragma once
// A fault injected on purpose into one rank of a training job, to check
// that the job fails as a whole (DESIGN, "Across devices"): every other rank
// ends soon after with a message naming the failing rank and its
// iteration, none hangs in a collective, and the snapshots already written
// stay whole. `trainer train --inject_fault=RANK:ITERATION:ACTION` sets one
// (docs/multi_gpu.md, "When a rank fails"); the Solver carries it out in
// the middle of the backward of that iteration, on that rank:
//
// - throw: the rank throws Error, as a layer that fails does;
// - kill:  the rank's process ends at once with SIGKILL (kill -9), as one
//          killed by the system (out of memory) does; with thread ranks
//          that is the whole process, so it is meant for mpirun's ranks;
// - hang:  the rank sleeps for ever, as one stuck outside the collectives
//          (a reader that never returns) does: the others end after the
//          solver's collective_timeout.

#include <string>

namespace cortado {

struct InjectedFault {
  enum Action { kNone, kThrow, kKill, kHang };
  int rank = 0;
  int iteration = 0;
  Action action = kNone;
  bool armed() const { return action != kNone; }
};

/// Parses "RANK:ITERATION:ACTION" (ACTION one of throw, kill, hang); ""
/// gives none. A bad spec is an Error naming `flag` and what is expected.
InjectedFault ParseInjectedFault(const std::string& spec, const std::string& flag = "--inject_fault");

/// Carries `fault` out, on the rank and at the iteration it names, in the
/// backward of layer `layer` (for the message).
void CarryOut(const InjectedFault& fault, const std::string& layer);

}  // namespace cortado
