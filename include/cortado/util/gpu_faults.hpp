#pragma once
// How a GPU run that goes wrong ends, with a message, instead of hanging or
// failing far from its cause (docs/gpu.md, "When a GPU run fails"):
//
// - A net whose field sync_layers is true (trainer --sync_layers=1) waits on
//   a GPU for its stream after every layer's Forward and Backward and takes
//   the pending CUDA error with SynchronizeAndTakeError, so that a kernel
//   that faulted (an illegal address, a failed launch) is reported with the
//   layer that launched it (name and type) and the pass (net.hpp). Off by
//   default: CUDA reports an asynchronous fault at the next call that
//   waits, often layers later.
// - CORTADO_NCCL_TIMEOUT=seconds (read from the environment at each use): a
//   rank waiting for its NCCL gradient sums polls NCCL's asynchronous errors
//   instead of blocking, and ends the job
//   with NCCL's message when one is raised (a peer that died, a network that
//   broke), or after this many seconds without the sums finishing (a peer
//   that stopped calling the collectives). Default 600; 0: no time limit
//   (errors are still polled).
//
// A value of it other than those described is an Error naming the variable,
// the value and what is expected.

#include <string>

#include "cortado/context.hpp"

namespace cortado {

/// CORTADO_NCCL_TIMEOUT: seconds (a decimal number, at least 0); 0 means no
/// limit. Unset or empty: kNcclTimeoutDefault.
double NcclTimeoutSeconds();
constexpr double kNcclTimeoutDefault = 600;

/// Waits for ctx's stream and takes the calling thread's pending CUDA error
/// (a kernel that faulted or did not launch since the last check, or a
/// failed runtime call): its name and message, or "" when there is none.
/// Always "" on the CPU. A fault that corrupted the context stays: every
/// later CUDA call fails too.
std::string SynchronizeAndTakeError(const Context& ctx);

}  // namespace cortado
