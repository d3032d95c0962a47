#pragma once
// Where each rank of this process is, for the diagnosis of a run that hangs
// or fails: the messages of a job that ends as a whole name the failing
// rank's iteration and phase from here.
//
// The Solver marks its rank's phase (the forward/backward of an iteration,
// the gradient sums, the update, a snapshot, the final display, ...) with a
// string of static storage and the iteration; the marks cost one relaxed
// atomic store each. dump_rank_phases() writes every marked rank's last
// phase to a file descriptor and is async-signal-safe, so that the trainer
// can print it when `timeout` or a user's `kill` ends a hung run (SIGTERM):
// two ranks waiting in different collectives show at once.
//
// Ranks index slots 0..kMaxRankSlots-1 (a process runs at most that many
// ranks; higher ranks, as under mpirun, share slot rank % kMaxRankSlots).

#include <string>

namespace cortado {

constexpr int kMaxRankSlots = 64;

/// Marks rank `rank`'s phase at iteration `iter`; `phase` must outlive the
/// process (a string literal).
void set_rank_phase(int rank, const char* phase, int iter);
/// Forgets rank `rank`'s mark (a new job's ranks start unmarked).
void clear_rank_phase(int rank);
/// Where rank `rank` is, for a message: " at iteration 12 (the gradient
/// sums)", or "" when it has no mark (not training yet, or its slot holds
/// another rank's mark).
std::string at_rank_phase(int rank);
/// Writes one line per marked rank ("rank 1: iteration 20, gradient sums").
void dump_rank_phases(int fd);
/// On `signal`, writes the ranks' phases to stderr, then runs the handler
/// installed before (glog's stack dump, or the default: the process ends).
void dump_rank_phases_on(int signal);
/// What the handler of dump_rank_phases_on writes first, before the ranks'
/// lines (a string literal, or one that lives until the process ends): the
/// trainer says who it is and that a launcher ends the other ranks this way
/// when one of them has died.
void set_signal_preamble(const char* text);

}  // namespace cortado
