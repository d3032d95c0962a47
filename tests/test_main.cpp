// GoogleTest entry point: glog to stderr, warnings and above only, so that
// layer set-up INFO lines do not bury the test output.

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  FLAGS_logtostderr = 1;
  FLAGS_minloglevel = 1;
  google::InitGoogleLogging(argv[0]);
  return RUN_ALL_TESTS();
}
