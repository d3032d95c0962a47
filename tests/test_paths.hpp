#pragma once
// Where the tests find their data and the command-line tools.
//
// tests/CMakeLists.txt compiles in the paths of the build: the source tree's
// tests/ folder (CORTADO_TEST_DATA_DIR; its parent is the repository root,
// where models/ lives) and the tools (CORTADO_TRAINER, CORTADO_CONVERT_MNIST,
// and in OpenCV builds CORTADO_CONVERT_IMAGESET, CORTADO_COMPUTE_IMAGE_MEAN).
// An environment variable of the same name, when set and not empty, replaces
// the compiled-in path at run time, so that a copy of the test binary runs
// from another folder (the GPU bundle of scripts/gpu_bundle.sh sets them all).
#include <cstdlib>
#include <string>

namespace cortado {
namespace test {

/// The value of the environment variable `name` if it is set and not empty,
/// else `built` (the path compiled in).
inline std::string PathSetting(const char* name, const char* built) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string(built);
}

/// The tests/ folder: bad_input/, models/ (CORTADO_TEST_DATA_DIR).
inline std::string TestDataDir() { return PathSetting("CORTADO_TEST_DATA_DIR", CORTADO_TEST_DATA_DIR); }

/// The repository root (the parent of TestDataDir()), which holds models/.
inline std::string SourceRoot() { return TestDataDir() + "/.."; }

/// The trainer executable (CORTADO_TRAINER).
inline std::string TrainerPath() { return PathSetting("CORTADO_TRAINER", CORTADO_TRAINER); }

/// The convert_mnist executable (CORTADO_CONVERT_MNIST).
inline std::string ConvertMnistPath() { return PathSetting("CORTADO_CONVERT_MNIST", CORTADO_CONVERT_MNIST); }

}  // namespace test
}  // namespace cortado
