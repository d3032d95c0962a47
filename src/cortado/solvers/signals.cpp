#include "cortado/solvers/signals.hpp"

#include <csignal>
#include <cstring>
#include <string>

#include "cortado/common.hpp"

namespace cortado {

namespace {
volatile std::sig_atomic_t g_sigint = 0;
volatile std::sig_atomic_t g_sighup = 0;
struct sigaction g_old_int, g_old_hup;

void handle(int sig) {
  if (sig == SIGINT) g_sigint = 1;
  if (sig == SIGHUP) g_sighup = 1;
}
}  // namespace

SolverAction ParseSolverAction(const char* flag, const char* value) {
  const std::string v(value);
  if (v == "stop") return SolverAction::STOP;
  if (v == "snapshot") return SolverAction::SNAPSHOT;
  if (v == "none") return SolverAction::NONE;
  fail("--", flag, "=", v, ": expected stop, snapshot or none");
}

SignalHandler::SignalHandler(SolverAction sigint_effect, SolverAction sighup_effect)
    : sigint_(sigint_effect), sighup_(sighup_effect) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = &handle;
  sa.sa_flags = SA_RESTART;
  sigfillset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGHUP, &sa, &g_old_hup);
}

SignalHandler::~SignalHandler() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGHUP, &g_old_hup, nullptr);
}

SolverAction SignalHandler::CheckForSignals() const {
  SolverAction a = SolverAction::NONE;
  if (g_sigint) {
    g_sigint = 0;
    a = sigint_;
  }
  if (g_sighup) {
    g_sighup = 0;
    if (a != SolverAction::STOP) a = sighup_;
  }
  return a;
}

}  // namespace cortado
