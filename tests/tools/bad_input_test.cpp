// Bad input ends in one clear message and exit status 1, never a crash.
//
// Each file of tests/bad_input is a small LeNet-like net (DummyData or Input
// layers, so no dataset is needed) or a solver with one mistake. The built
// trainer runs on it (`time --model=F --iterations=1`, or
// `train --solver=F`) from the repository root, and the test checks:
// - the exit status is exactly 1 (not a signal, not an abort's 134 or 139);
// - the message names "<file>:<line>:" with the line of the offending field
//   (or of the layer, or of the deepest block that exists, when the field is
//   absent), the layer's name in quotes, and the field;
// - nothing looks like a crash: no "Check failed", "terminate called",
//   "SIGSEGV", "*** Aborted".
// Two control files (ok_lenet_dummy, solver_ok) must run and exit 0, so a
// broken harness cannot pass every case. A second group checks the parser's
// error locations in-process.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <set>
#include <string>

#include "cortado.pb.h"
#include "cortado/io/proto_io.hpp"
#include "cortado/util/cuda.hpp"
#include "command.hpp"
#include "test_paths.hpp"

namespace cortado {
namespace {

struct BadCase {
  const char* file;     // in tests/bad_input (it may be missing on purpose)
  bool solver;          // train --solver=FILE, else time --model=FILE
  int line;             // expected line (0: only the file is named)
  const char* layer;    // the layer named in quotes ("": not in a layer)
  const char* field;    // the field named in the message ("": none)
  const char* also;     // one more substring the message must hold ("": none)
  const char* in_file;  // the file the message names, when not `file` (a solver's net)
};

// Lines are those marked "# <- error" in the files.
const BadCase kCases[] = {
    // Parse errors: the parser's line and column, the layer and the field path.
    {"syntax_error.prototxt", false, 43, "conv2", "convolution_param.num_output", "Expected \":\"", ""},
    {"unknown_field.prototxt", false, 43, "conv2", "num_outputs", "ConvolutionParameter", ""},
    {"negative_num_output.prototxt", false, 65, "ip1", "inner_product_param.num_output", "", ""},
    {"bad_enum.prototxt", false, 32, "pool1", "pooling_param.pool", "MAXX", ""},
    // Net structure.
    {"unknown_layer_type.prototxt", false, 39, "conv2", "type", "Convolutoin", ""},
    {"missing_bottom.prototxt", false, 89, "loss", "bottom", "labels", ""},
    {"wrong_bottom_count.prototxt", false, 88, "loss", "bottom", "takes 2", ""},
    {"duplicate_top.prototxt", false, 41, "conv2", "top", "conv1", ""},
    {"duplicate_layer_name.prototxt", false, 38, "conv1", "name", "already exists", ""},
    {"shared_param_mismatch.prototxt", false, 81, "ip2", "param", "shared_w", ""},
    {"phase_filtered.prototxt", false, 56, "conv2", "convolution_param.num_output", "got 0", ""},
    {"include_and_exclude.prototxt", false, 73, "relu1", "exclude", "not both", ""},
    // A net-wide switch the parser accepts and the Net does not.
    {"cudnn_pad_channels.prototxt", false, 4, "", "cudnn.pad_channels", "expected 0, 4 or 8, got 3", ""},
    // Shapes and values found by the layers.
    {"eltwise_shape_mismatch.prototxt", false, 41, "sum", "bottom", "(2, 3, 24, 24)", ""},
    {"concat_shape_mismatch.prototxt", false, 41, "concat", "bottom", "(2, 4, 24, 24)", ""},
    {"kernel_too_large.prototxt", false, 44, "conv2", "convolution_param.kernel_size", "13", ""},
    {"pool_kernel_too_large.prototxt", false, 55, "pool2", "pooling_param.kernel_size", "9", ""},
    {"zero_num_output.prototxt", false, 21, "conv1", "convolution_param.num_output", "got 0", ""},
    {"huge_num_output.prototxt", false, 43, "conv2", "convolution_param.num_output", "4000000000", ""},
    // The field is absent: the line of its enclosing block.
    {"missing_num_output.prototxt", false, 80, "ip2", "inner_product_param.num_output", "required", ""},
    {"bad_input_shape.prototxt", false, 10, "input", "input_param.shape", "3 tops", ""},
    {"huge_shape.prototxt", false, 10, "data", "dummy_data_param.shape", "", ""},
    // Found in the first forward pass, not at set-up.
    {"label_out_of_range.prototxt", false, 89, "loss", "bottom", "12", ""},
    // Paths.
    {"missing_data_source.prototxt", false, 10, "mnist", "data_param.source", "no_such_lmdb", ""},
    {"data_source_not_lmdb.prototxt", false, 11, "mnist", "data_param.source", "data.mdb", ""},
    {"no_such_model.prototxt", false, 0, "", "", "cannot open", ""},
    // Solvers.
    {"solver_unknown_lr_policy.prototxt", true, 5, "", "lr_policy", "invv", ""},
    {"solver_syntax_error.prototxt", true, 5, "", "lr_policy", "Expected string", ""},
    {"solver_missing_net.prototxt", true, 2, "", "net", "no_such_net.prototxt", ""},
    {"solver_net_error.prototxt", true, 21, "conv1", "convolution_param.num_output", "got 0",
     "zero_num_output.prototxt"},
    {"solver_net_param_error.prototxt", true, 21, "ip", "inner_product_param.num_output", "got 0", ""},
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.file; }

// Files of the corpus that must run cleanly (the controls).
const char* const kGood[] = {"ok_lenet_dummy.prototxt", "solver_ok.prototxt"};

const std::string kRoot = test::SourceRoot();
const std::string kDir = "tests/bad_input/";  // relative to kRoot, where trainer runs

using TrainerRun = test::CommandRun;

// Runs trainer on `file` from the repository root; captures stdout and stderr.
TrainerRun run_trainer_args(const std::string& args) {
  // GLOG_logtostderr: no log files left in /tmp. `timeout`: a hang fails
  // instead of blocking the suite (it exits 124).
  const std::string cmd = "cd '" + kRoot + "' && GLOG_logtostderr=1 timeout 300 '" +
                          test::TrainerPath() + "' " + args;
  return test::RunCommand(cmd);
}

TrainerRun run_trainer(const std::string& file, bool solver) {
  return run_trainer_args(solver ? "train --solver='" + kDir + file + "'"
                                 : "time --model='" + kDir + file + "' --iterations=1");
}

void expect_no_crash(const std::string& out) {
  for (const char* bad : {"Check failed", "terminate called", "SIGSEGV", "SIGABRT", "*** Aborted",
                          "Segmentation fault", "core dumped"}) {
    EXPECT_EQ(out.find(bad), std::string::npos) << "the output shows a crash (\"" << bad << "\")";
  }
}

// The end of the output, where the error is (the log before it is long).
std::string tail(const std::string& out) {
  const size_t keep = 3000;
  return "trainer output" + std::string(out.size() > keep ? " (end)" : "") + ":\n" +
         (out.size() > keep ? out.substr(out.size() - keep) : out);
}

std::string param_name(const std::string& file) {
  std::string s = file.substr(0, file.find('.'));
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

class BadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInput, ClearMessageAndExitStatusOne) {
  const BadCase& c = GetParam();
  const TrainerRun r = run_trainer(c.file, c.solver);
  SCOPED_TRACE(tail(r.output));
  EXPECT_EQ(r.status, 1) << "expected exit status 1 (124: timed out; 128+N or -1: killed by signal N)";
  expect_no_crash(r.output);
  EXPECT_NE(r.output.find(" error: "), std::string::npos) << "no error message";

  const std::string file = kDir + (*c.in_file ? c.in_file : c.file);
  if (c.line > 0) {
    // "file:line: " or "file:line:col: ".
    const std::string where = file + ":" + std::to_string(c.line) + ":";
    EXPECT_NE(r.output.find(where), std::string::npos) << "the message does not name " << where;
  } else {
    EXPECT_NE(r.output.find(file), std::string::npos) << "the message does not name " << file;
  }
  if (*c.layer) {
    const std::string quoted = std::string("'") + c.layer + "'";
    EXPECT_NE(r.output.find(quoted), std::string::npos) << "the message does not name the layer " << quoted;
  }
  if (*c.field) EXPECT_NE(r.output.find(c.field), std::string::npos) << "the message does not name the field " << c.field;
  if (*c.also) EXPECT_NE(r.output.find(c.also), std::string::npos) << "the message does not hold \"" << c.also << "\"";
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadInput, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<BadCase>& info) { return param_name(info.param.file); });

class GoodInput : public ::testing::TestWithParam<const char*> {};

TEST_P(GoodInput, RunsAndExitsZero) {
  const std::string file = GetParam();
  const TrainerRun r = run_trainer(file, file.rfind("solver", 0) == 0);
  SCOPED_TRACE(tail(r.output));
  EXPECT_EQ(r.status, 0);
  expect_no_crash(r.output);
}

INSTANTIATE_TEST_SUITE_P(Corpus, GoodInput, ::testing::ValuesIn(kGood),
                         [](const ::testing::TestParamInfo<const char*>& info) { return param_name(info.param); });

// Every file of the corpus is a case or a control, and every case's file
// exists unless it is missing on purpose: the table and the directory agree.
TEST(BadInputCorpus, TableMatchesDirectory) {
  std::set<std::string> listed(std::begin(kGood), std::end(kGood));
  for (const BadCase& c : kCases) listed.insert(c.file);
  listed.insert("solver_gpu_mode.prototxt");  // SolverDevice below: an error only where no device exists
  std::set<std::string> present;
  for (const auto& e : std::filesystem::directory_iterator(test::TestDataDir() + "/bad_input"))
    if (e.path().extension() == ".prototxt") present.insert(e.path().filename().string());
  for (const std::string& f : present) EXPECT_TRUE(listed.count(f)) << f << " is in the corpus but not in the table";
  for (const std::string& f : listed) {
    if (f.rfind("no_such_", 0) == 0) {
      EXPECT_FALSE(present.count(f)) << f << " must not exist";
    } else {
      EXPECT_TRUE(present.count(f)) << f << " is in the table but not in the corpus";
    }
  }
}

// ---- paths given on the command line -------------------------------------------

struct PathCase {
  const char* name;
  const char* args;  // relative paths are from the repository root
  const char* expect;  // what the message must hold
};

const PathCase kPathCases[] = {
    {"model_is_a_directory", "time --model=tests/bad_input --iterations=1", "tests/bad_input: is a directory"},
    {"solver_is_a_directory", "train --solver=tests/bad_input", "tests/bad_input: is a directory"},
    {"missing_solver", "train --solver=tests/bad_input/no_such_solver.prototxt",
     "tests/bad_input/no_such_solver.prototxt: cannot open"},
    {"missing_weights",
     "test --model=tests/bad_input/ok_lenet_dummy.prototxt --weights=tests/bad_input/no_such.caffemodel "
     "--iterations=1",
     "tests/bad_input/no_such.caffemodel: cannot open"},
    {"weights_not_binary",
     "test --model=tests/bad_input/ok_lenet_dummy.prototxt --weights=tests/bad_input/ok_lenet_dummy.prototxt "
     "--iterations=1",
     "tests/bad_input/ok_lenet_dummy.prototxt: not a valid binary"},
    {"missing_snapshot", "train --solver=tests/bad_input/solver_ok.prototxt --snapshot=tests/bad_input/no_such.solverstate",
     "tests/bad_input/no_such.solverstate: cannot open"},
    {"zero_iterations", "time --model=tests/bad_input/ok_lenet_dummy.prototxt --iterations=0", "--iterations=0"},
    {"bad_phase", "time --model=tests/bad_input/ok_lenet_dummy.prototxt --phase=VAL", "--phase=VAL"},
};

void PrintTo(const PathCase& c, std::ostream* os) { *os << c.args; }

class BadPath : public ::testing::TestWithParam<PathCase> {};

TEST_P(BadPath, ClearMessageAndExitStatusOne) {
  const PathCase& c = GetParam();
  const TrainerRun r = run_trainer_args(c.args);
  SCOPED_TRACE(tail(r.output));
  EXPECT_EQ(r.status, 1);
  expect_no_crash(r.output);
  EXPECT_NE(r.output.find(" error: "), std::string::npos) << "no error message";
  EXPECT_NE(r.output.find(c.expect), std::string::npos) << "the message does not hold \"" << c.expect << "\"";
}

INSTANTIATE_TEST_SUITE_P(CommandLine, BadPath, ::testing::ValuesIn(kPathCases),
                         [](const ::testing::TestParamInfo<PathCase>& info) { return std::string(info.param.name); });

// ---- the parser's locations, in-process -------------------------------------------

std::string parse_error(const std::string& text, google::protobuf::Message* msg) {
  try {
    ParseTextProto(text, "t.prototxt", msg);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ParseErrorLocation, EnumValueOnItsOwnLine) {
  // Protobuf reports an unknown enum value at the next token (here the next
  // line); the message names the value's line and column.
  NetParameter p;
  const std::string e = parse_error(
      "layer {\n"
      "  name: \"p\"\n"
      "  type: \"Pooling\"\n"
      "  pooling_param {\n"
      "    pool: AVERAGE\n"
      "  }\n"
      "}\n",
      &p);
  EXPECT_NE(e.find("t.prototxt:5:11:"), std::string::npos) << e;
  EXPECT_NE(e.find("(in layer 'p', field pooling_param.pool)"), std::string::npos) << e;
}

TEST(ParseErrorLocation, LayerNameAfterTheError) {
  NetParameter p;
  const std::string e = parse_error(
      "layer {\n"
      "  type: \"InnerProduct\"\n"
      "  inner_product_param { num_output: x }\n"
      "  name: \"late\"\n"
      "}\n",
      &p);
  EXPECT_NE(e.find("t.prototxt:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("(in layer 'late', field inner_product_param.num_output)"), std::string::npos) << e;
}

TEST(ParseErrorLocation, LayerInsideSolverNetParam) {
  SolverParameter p;
  const std::string e = parse_error(
      "base_lr: 0.1\n"
      "net_param {\n"
      "  layer { name: \"a\" type: \"ReLU\" }\n"
      "  layer {\n"
      "    name: \"b # not a comment\"\n"
      "    weight_filler: 3\n"
      "  }\n"
      "}\n",
      &p);
  EXPECT_NE(e.find("t.prototxt:6:"), std::string::npos) << e;
  EXPECT_NE(e.find("(in layer 'b # not a comment', field weight_filler)"), std::string::npos) << e;
}

TEST(ParseErrorLocation, TopLevelFieldOutsideLayers) {
  SolverParameter p;
  const std::string e = parse_error("base_lr: 0.1\nmax_iter: ten\n", &p);
  EXPECT_NE(e.find("t.prototxt:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("(field max_iter)"), std::string::npos) << e;
  EXPECT_EQ(e.find("in layer"), std::string::npos) << e;
}

TEST(SourceInfoFieldLine, IndexedRepeatedField) {
  NetParameter p;
  SourceInfo info;
  ParseTextProto(
      "layer {\n"
      "  name: \"loss\"\n"
      "  bottom: \"a\"\n"
      "  bottom: \"b\"\n"
      "  input_param {\n"
      "    shape { dim: 1 }\n"
      "    shape {\n"
      "      dim: 2\n"
      "    }\n"
      "  }\n"
      "}\n",
      "t.prototxt", &p, &info);
  EXPECT_EQ(info.field_line(0, "bottom"), 3);
  EXPECT_EQ(info.field_line(0, "bottom[0]"), 3);
  EXPECT_EQ(info.field_line(0, "bottom[1]"), 4);
  EXPECT_EQ(info.field_line(0, "bottom[7]"), 3);  // fewer values: the first
  EXPECT_EQ(info.field_line(0, "input_param.shape[1]"), 7);
  EXPECT_EQ(info.field_line(0, "input_param.shape[1].dim"), 8);
  EXPECT_EQ(info.field_line(0, "top"), 1);  // absent: the layer's line
}

// ---- the device a solver names -----------------------------------------------------

bool cuda_device_present() {
#ifdef CORTADO_USE_CUDA
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
#else
  return false;
#endif
}

// Caffe's rule: without --gpu, solver_mode: GPU trains on device_id. Where
// no device can run it, the message names the solver's line and says how to
// train on the CPU; --gpu=cpu does.
TEST(SolverDevice, GpuModeWithoutADeviceSaysHowToUseTheCpu) {
  if (cuda_device_present()) GTEST_SKIP() << "a CUDA device is present: the solver trains on it";
  const TrainerRun r = run_trainer("solver_gpu_mode.prototxt", true);
  SCOPED_TRACE(tail(r.output));
  EXPECT_EQ(r.status, 1);
  expect_no_crash(r.output);
  EXPECT_NE(r.output.find("tests/bad_input/solver_gpu_mode.prototxt:11:"), std::string::npos);
  EXPECT_NE(r.output.find("solver_mode: GPU"), std::string::npos);
  EXPECT_NE(r.output.find("--gpu=cpu"), std::string::npos);
  const TrainerRun cpu = run_trainer_args("train --solver=" + kDir + "solver_gpu_mode.prototxt --gpu=cpu");
  EXPECT_EQ(cpu.status, 0) << tail(cpu.output);
  EXPECT_NE(cpu.output.find("Optimization Done."), std::string::npos) << tail(cpu.output);
}

// Where Caffe is wrong: a net whose scores are NaN reports accuracy 0, not 1,
// and its NaN test loss is a warning in the log.
TEST(DivergedNet, NaNScoresGiveAccuracyZeroAndAWarning) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("cortado_diverged_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string solver = (dir / "solver.prototxt").string();
  FILE* f = std::fopen(solver.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(
      "net_param {\n"
      "  layer { name: 'x' type: 'DummyData' top: 'x' top: 'label'\n"
      "    dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 }\n"
      "      data_filler { type: 'constant' value: nan } data_filler { type: 'constant' value: 1 } } }\n"
      "  layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'y'\n"
      "    inner_product_param { num_output: 3 weight_filler { type: 'constant' value: 0.1 } } }\n"
      "  layer { name: 'acc' type: 'Accuracy' bottom: 'y' bottom: 'label' top: 'accuracy' include { phase: TEST } }\n"
      "  layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'y' bottom: 'label' top: 'loss' }\n"
      "}\n"
      "base_lr: 0.01 lr_policy: 'fixed' max_iter: 1 display: 1 test_iter: 1 test_interval: 1\n"
      "snapshot_after_train: false solver_mode: CPU\n",
      f);
  std::fclose(f);
  const TrainerRun r = run_trainer_args("train --solver=" + solver);
  SCOPED_TRACE(tail(r.output));
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("Test net output #0: accuracy = 0\n"), std::string::npos);
  EXPECT_NE(r.output.find("the test loss loss is nan"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cortado
