#pragma once
// A fresh directory under the test temp dir (named after the process and a
// counter, so tests never share one), removed with everything in it at the
// end of its scope.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace cortado {
namespace test {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "cortado_test") {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::path(::testing::TempDir()) /
            (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// The path of `name` inside the directory.
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  /// The directory, with a trailing '/'.
  std::string root() const { return path_.string() + "/"; }

 private:
  std::filesystem::path path_;
};

}  // namespace test
}  // namespace cortado
