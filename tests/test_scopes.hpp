#pragma once
// What a test changes for the process or its thread and must put back when it
// ends, passed or not: an environment variable, the thread's stream.

#include <cstdlib>
#include <optional>
#include <string>

#include "cortado/context.hpp"

namespace cortado {
namespace test {

/// Sets (or, with nullptr, unsets) an environment variable for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

/// Gives the thread its default stream back when a test's GPU context goes
/// away (the context's stream must not outlive it as the thread's).
struct RestoreStream {
  ~RestoreStream() { Context::Cpu()->Activate(); }
};

}  // namespace test
}  // namespace cortado
