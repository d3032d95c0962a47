#include "cortado/comm/rank_phase.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

namespace cortado {
namespace {

struct Slot {
  std::atomic<const char*> phase{nullptr};
  std::atomic<int> iter{0};
  std::atomic<int> rank{0};
};
Slot g_slots[kMaxRankSlots];

struct sigaction g_previous[NSIG];  // by signal number
std::atomic<const char*> g_preamble{nullptr};

void write_str(int fd, const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

// Decimal digits of v into buf (async-signal-safe; no locale, no allocation).
const char* itoa(int v, char* buf, size_t size) {
  char* p = buf + size - 1;
  *p = '\0';
  const bool negative = v < 0;
  unsigned u = negative ? 0u - static_cast<unsigned>(v) : static_cast<unsigned>(v);
  do {
    *--p = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u && p > buf + 1);
  if (negative) *--p = '-';
  return p;
}

void on_signal(int sig, siginfo_t* info, void* context) {
  if (const char* pre = g_preamble.load(std::memory_order_acquire)) {
    char buf[16];
    write_str(STDERR_FILENO, pre);
    write_str(STDERR_FILENO, " (signal ");
    write_str(STDERR_FILENO, itoa(sig, buf, sizeof(buf)));
    write_str(STDERR_FILENO, ")\n");
  }
  dump_rank_phases(STDERR_FILENO);
  const struct sigaction& prev = g_previous[sig];
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) {
      prev.sa_sigaction(sig, info, context);
      return;
    }
  } else if (prev.sa_handler == SIG_IGN) {
    return;
  } else if (prev.sa_handler != SIG_DFL) {
    prev.sa_handler(sig);
    return;
  }
  ::signal(sig, SIG_DFL);  // the default action: the process ends with `sig`
  ::raise(sig);
}

}  // namespace

void set_rank_phase(int rank, const char* phase, int iter) {
  Slot& s = g_slots[(rank % kMaxRankSlots + kMaxRankSlots) % kMaxRankSlots];
  s.rank.store(rank, std::memory_order_relaxed);
  s.iter.store(iter, std::memory_order_relaxed);
  s.phase.store(phase, std::memory_order_release);
}

void clear_rank_phase(int rank) {
  g_slots[(rank % kMaxRankSlots + kMaxRankSlots) % kMaxRankSlots].phase.store(nullptr, std::memory_order_release);
}

std::string at_rank_phase(int rank) {
  const Slot& s = g_slots[(rank % kMaxRankSlots + kMaxRankSlots) % kMaxRankSlots];
  const char* phase = s.phase.load(std::memory_order_acquire);
  if (!phase || s.rank.load(std::memory_order_relaxed) != rank) return std::string();
  return " at iteration " + std::to_string(s.iter.load(std::memory_order_relaxed)) + " (" + phase + ")";
}

void set_signal_preamble(const char* text) { g_preamble.store(text, std::memory_order_release); }

void dump_rank_phases(int fd) {
  bool any = false;
  char buf[16];
  for (const Slot& s : g_slots) {
    const char* phase = s.phase.load(std::memory_order_acquire);
    if (!phase) continue;
    if (!any) write_str(fd, "Where the ranks of this process were:\n");
    any = true;
    write_str(fd, "  rank ");
    write_str(fd, itoa(s.rank.load(std::memory_order_relaxed), buf, sizeof(buf)));
    write_str(fd, ": iteration ");
    write_str(fd, itoa(s.iter.load(std::memory_order_relaxed), buf, sizeof(buf)));
    write_str(fd, ", ");
    write_str(fd, phase);
    write_str(fd, "\n");
  }
}

void dump_rank_phases_on(int sig) {
  if (sig <= 0 || sig >= NSIG) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, &g_previous[sig]);
}

}  // namespace cortado
