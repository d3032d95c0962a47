#pragma once
// How a GPU run that goes wrong ends, with a message, instead of hanging or
// failing far from its cause (docs/gpu.md, "When a GPU run fails"). How
// long a rank waits for its NCCL sums is the solver's collective_timeout
// (communicator.hpp).
//
// A net whose field sync_layers is true (trainer --sync_layers=1) waits on
// a GPU for its stream after every layer's Forward and Backward and takes
// the pending CUDA error with SynchronizeAndTakeError, so that a kernel that
// faulted (an illegal address, a failed launch) is reported with the layer
// that launched it (name and type) and the pass (net.hpp). Off by default:
// CUDA reports an asynchronous fault at the next call that waits, often
// layers later.

#include <string>

#include "cortado/context.hpp"

namespace cortado {

/// Waits for ctx's stream and takes the calling thread's pending CUDA error
/// (a kernel that faulted or did not launch since the last check, or a
/// failed runtime call): its name and message, or "" when there is none.
/// Always "" on the CPU. A fault that corrupted the context stays: every
/// later CUDA call fails too.
std::string SynchronizeAndTakeError(const Context& ctx);

}  // namespace cortado
