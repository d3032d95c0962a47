#pragma once
// Environment variables as the framework reads them: unset and empty are the same.

#include <cstdlib>

namespace cortado {

/// The value of environment variable `name`, or null when it is unset or empty.
inline const char* env_value(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

}  // namespace cortado
