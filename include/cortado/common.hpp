#pragma once
// Errors, checks and the handful of definitions every file needs.
//
// Two kinds of failure, never mixed (as in PyTorch's c10):
// - cortado::Error: bad user input (a prototxt, a path, a shape, a corrupt
//   record). The message names the file and line, the layer and the field,
//   the value found and what was expected. Tools catch it, print it, and exit
//   with status 1.
// - CORTADO_CHECK: an internal invariant. Failing one is a bug in Cortado; it
//   aborts through glog with the location.

#include <glog/logging.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "cortado/config.hpp"

namespace cortado {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
inline void format_to(std::ostringstream&) {}
template <typename A, typename... R>
void format_to(std::ostringstream& os, const A& a, const R&... r) {
  os << a;
  format_to(os, r...);
}
}  // namespace detail

/// Concatenates its arguments with operator<<.
template <typename... A>
std::string str_cat(const A&... a) {
  std::ostringstream os;
  detail::format_to(os, a...);
  return os.str();
}

/// Throws cortado::Error with the concatenated arguments.
template <typename... A>
[[noreturn]] void fail(const A&... a) {
  throw Error(str_cat(a...));
}

}  // namespace cortado

#define CORTADO_CHECK(cond) CHECK(cond)
#define CORTADO_CHECK_EQ(a, b) CHECK_EQ(a, b)
#define CORTADO_CHECK_LT(a, b) CHECK_LT(a, b)
#define CORTADO_CHECK_LE(a, b) CHECK_LE(a, b)
#define CORTADO_CHECK_GE(a, b) CHECK_GE(a, b)
