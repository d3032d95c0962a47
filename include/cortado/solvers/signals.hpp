#pragma once
// SIGINT / SIGHUP during training: each signal maps to an action the solver
// takes at the end of the current iteration (snapshot, stop, or nothing).

namespace cortado {

enum class SolverAction { NONE, STOP, SNAPSHOT };

/// Parses "stop", "snapshot" or "none"; throws Error naming `flag` otherwise.
SolverAction ParseSolverAction(const char* flag, const char* value);

class SignalHandler {
 public:
  /// Installs handlers for SIGINT and SIGHUP; the destructor restores the old ones.
  SignalHandler(SolverAction sigint_effect, SolverAction sighup_effect);
  ~SignalHandler();
  /// The action for signals received since the last call (STOP wins).
  SolverAction CheckForSignals() const;

 private:
  SolverAction sigint_, sighup_;
};

}  // namespace cortado
