#pragma once
// Runs a shell command for the tests of the command-line tools: its exit
// status and its standard output and error together. Callers put a
// `timeout` in front, so that a hang fails (status 124) instead of blocking
// the suite.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace cortado {
namespace test {

struct CommandRun {
  int status = -1;  // -1: did not start, or did not exit normally
  std::string output;
};

inline CommandRun RunCommand(const std::string& command) {
  CommandRun r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int st = pclose(p);
  if (st != -1 && WIFEXITED(st)) r.status = WEXITSTATUS(st);
  return r;
}

}  // namespace test
}  // namespace cortado
