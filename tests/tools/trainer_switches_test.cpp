// The trainer's switch flags (switches.hpp): --help names every switch, a
// flag overrides the net's field (the log shows the effect), a bad value is
// one message naming the flag, and an old script's environment variable is
// named once with the flag that replaced it, and changes nothing.
#include <gtest/gtest.h>

#include <string>

#include "cortado/common.hpp"
#include "cortado/switches.hpp"
#include "command.hpp"
#include "test_paths.hpp"

namespace cortado {
namespace {

const std::string kModel = "tests/bad_input/ok_lenet_dummy.prototxt";

test::CommandRun Trainer(const std::string& args, const std::string& env = "") {
  return test::RunCommand("cd '" + test::SourceRoot() + "' && " + env + " GLOG_logtostderr=1 timeout 300 '" +
                          test::TrainerPath() + "' " + args);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(TrainerSwitches, HelpNamesEverySwitch) {
  const test::CommandRun r = Trainer("--help");
  for (const SwitchInfo& sw : SwitchTable()) {
    EXPECT_NE(r.output.find(str_cat("--", sw.name, "=", sw.values)), std::string::npos) << sw.name;
    EXPECT_NE(r.output.find(sw.help), std::string::npos) << sw.name;
  }
  for (const char* flag : {"-plot_script", "-python"}) EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
  EXPECT_EQ(r.output.find("CORTADO_NHWC"), std::string::npos) << "--help still names an environment variable";
}

// --channels_last=all: LeNet's convolutions and poolings store NHWC on the
// CPU, which the log says; without it, nothing is NHWC.
TEST(TrainerSwitches, AFlagOverridesTheNetsField) {
  const test::CommandRun plain = Trainer("time --iterations=1 --model=" + kModel);
  ASSERT_EQ(plain.status, 0) << plain.output;
  EXPECT_EQ(plain.output.find("blobs NHWC in"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("nhwc_blobs=0"), std::string::npos) << plain.output;
  const test::CommandRun nhwc = Trainer("time --iterations=1 --channels_last=all --model=" + kModel);
  ASSERT_EQ(nhwc.status, 0) << nhwc.output;
  EXPECT_NE(nhwc.output.find("Switches over the files' fields: --channels_last=all"), std::string::npos)
      << nhwc.output;
  EXPECT_NE(nhwc.output.find("blobs NHWC in"), std::string::npos) << nhwc.output;
  EXPECT_EQ(nhwc.output.find("nhwc_blobs=0"), std::string::npos) << nhwc.output;
}

TEST(TrainerSwitches, BadValuesEndInOneMessageNamingTheFlag) {
  const std::pair<const char*, const char*> cases[] = {
      {"--share_diffs=2", "trainer: error: --share_diffs=2: expected 0 or 1"},
      {"--channels_last=yes", "--channels_last=yes: expected 0, 1 or all"},
      {"--cudnn_pad_channels=3", "--cudnn_pad_channels=3: expected 0, 4 or 8, got 3"},
      {"--cpu_share=maybe", "--cpu_share=maybe: expected 0 or 1"},
  };
  for (const auto& [flag, message] : cases) {
    const test::CommandRun r = Trainer(str_cat("time --iterations=1 --model=", kModel, " ", flag));
    EXPECT_EQ(r.status, 1) << flag << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << flag << "\n" << r.output;
    EXPECT_EQ(r.output.find("Timing"), std::string::npos) << "the run went on: " << r.output;
  }
}

TEST(TrainerSwitches, ARetiredVariableIsNamedOnceAndChangesNothing) {
  const test::CommandRun r = Trainer("time --iterations=1 --model=" + kModel, "CORTADO_NHWC=all");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(Count(r.output, "CORTADO_NHWC=all is no longer read; set the net's field channels_last (trainer "
                            "--channels_last) instead"),
            1u)
      << r.output;
  EXPECT_NE(r.output.find("nhwc_blobs=0"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace cortado
