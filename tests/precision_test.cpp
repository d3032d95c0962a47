// Run-time precision (precision.hpp): the defaults each precision sets, the
// fields a file states winning over them, the summaries the trainer logs,
// and trainer's --precision flag end to end on a tiny net.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cortado/io/proto_io.hpp"
#include "cortado/net/net.hpp"
#include "cortado/precision.hpp"
#include "cortado/solvers/solver.hpp"
#include "command.hpp"
#include "test_paths.hpp"

namespace cortado {
namespace {

NetParameter ParseNet(const std::string& text) {
  NetParameter p;
  ParseTextProto(text, "net", &p);
  return p;
}

SolverParameter ParseSolver(const std::string& text) {
  SolverParameter p;
  ParseTextProto(text, "solver", &p);
  return p;
}

// A net with one layer that states its own types (the loss, kept in FLOAT).
const char kNet[] = R"(
  name: "Tiny"
  layer { name: "data" type: "DummyData" top: "data" top: "label"
          dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 2 }
                             data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
          inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss"
          forward_type: FLOAT backward_type: FLOAT }
)";

TEST(ParsePrecision, ReadsTheThreeNamesInAnyCase) {
  EXPECT_EQ(ParsePrecision("fp32"), Precision::kFp32);
  EXPECT_EQ(ParsePrecision("FP16"), Precision::kFp16);
  EXPECT_EQ(ParsePrecision("bf16"), Precision::kBf16);
  for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16})
    EXPECT_EQ(ParsePrecision(PrecisionName(p)), p);
}

TEST(ParsePrecision, AnotherNameIsAnErrorListingTheChoices) {
  try {
    ParsePrecision("fp8");
    FAIL() << "fp8 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--precision=fp8: expected fp32, fp16 or bf16");
  }
}

// The table of precision.hpp, and the fp16 row equal to what the FP16
// variant files of models/ stated (train_val_fp16: the four defaults).
TEST(ApplyPrecision, SetsTheNetDefaultsOfEachPrecision) {
  struct Row {
    Precision p;
    Type forward, backward, forward_math, backward_math;
  };
  const Row rows[] = {{Precision::kFp32, FLOAT, FLOAT, FLOAT, FLOAT},
                      {Precision::kFp16, FLOAT16, FLOAT16, FLOAT, FLOAT},
                      {Precision::kBf16, BFLOAT16, BFLOAT16, FLOAT, FLOAT}};
  for (const Row& r : rows) {
    SCOPED_TRACE(PrecisionName(r.p));
    NetParameter net = ParseNet(kNet);
    EXPECT_TRUE(ApplyPrecision(r.p, &net).empty());
    EXPECT_TRUE(net.has_default_forward_type());
    EXPECT_EQ(net.default_forward_type(), r.forward);
    EXPECT_EQ(net.default_backward_type(), r.backward);
    EXPECT_EQ(net.default_forward_math(), r.forward_math);
    EXPECT_EQ(net.default_backward_math(), r.backward_math);
    // The layers are not touched: the loss keeps its own types, the others
    // state none and take the defaults when the net is built.
    EXPECT_FALSE(net.layer(1).has_forward_type());
    EXPECT_EQ(net.layer(2).forward_type(), FLOAT);
  }
}

TEST(ApplyPrecision, ANetsStatedDefaultsWinAndAreNoted) {
  NetParameter net = ParseNet(std::string("default_forward_type: FLOAT16 default_backward_math: FLOAT\n") + kNet);
  const std::vector<std::string> notes = ApplyPrecision(Precision::kBf16, &net);
  EXPECT_EQ(net.default_forward_type(), FLOAT16);   // stated: kept
  EXPECT_EQ(net.default_backward_type(), BFLOAT16);  // silent: set
  EXPECT_EQ(net.default_backward_math(), FLOAT);
  // Only the stated value that differs is noted; the agreeing one is not.
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "default_forward_type FLOAT16 (stated by the net; bf16 would set BFLOAT16)");
}

TEST(ApplyPrecision, SetsTheSolverFieldsOfEachPrecision) {
  for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
    SCOPED_TRACE(PrecisionName(p));
    SolverParameter s = ParseSolver("base_lr: 0.01");
    EXPECT_TRUE(ApplyPrecision(p, &s).empty());
    EXPECT_TRUE(s.has_solver_data_type());
    EXPECT_EQ(s.solver_data_type(), FLOAT);
    // Dynamic loss scaling for FP16 only; BF16 has FP32's exponent range.
    EXPECT_EQ(s.has_dynamic_loss_scale(), p == Precision::kFp16);
    EXPECT_EQ(s.dynamic_loss_scale(), p == Precision::kFp16);
  }
}

TEST(ApplyPrecision, ASolversStatedFieldsWinAndAreNoted) {
  SolverParameter s = ParseSolver("base_lr: 0.01 dynamic_loss_scale: false solver_data_type: FLOAT16");
  const std::vector<std::string> notes = ApplyPrecision(Precision::kFp16, &s);
  EXPECT_FALSE(s.dynamic_loss_scale());
  EXPECT_EQ(s.solver_data_type(), FLOAT16);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], "solver_data_type FLOAT16 (stated by the solver; fp16 would set FLOAT)");
  EXPECT_EQ(notes[1], "dynamic_loss_scale false (stated by the solver; fp16 would set true)");
}

TEST(NetTypesSummary, GroupsTheLayersOfTheBuiltNetByTheirTypes) {
  NetParameter p = ParseNet(kNet);
  p.mutable_state()->set_phase(TRAIN);
  ApplyPrecision(Precision::kFp16, &p);
  const Net net(p);
  EXPECT_EQ(NetTypesSummary(net),
            "Net 'Tiny' (TRAIN): 2 layers (data, ip) store FLOAT16/FLOAT16 (forward/backward) and compute in "
            "FLOAT/FLOAT; 1 layer (loss) stores FLOAT/FLOAT and computes in FLOAT/FLOAT");
  // Without a precision the file's own types: FLOAT everywhere, as in Caffe.
  NetParameter plain = ParseNet(kNet);
  plain.mutable_state()->set_phase(TEST);
  EXPECT_EQ(NetTypesSummary(Net(plain)),
            "Net 'Tiny' (TEST): 3 layers (data, ip, loss) store FLOAT/FLOAT (forward/backward) and compute in "
            "FLOAT/FLOAT");
}

std::unique_ptr<Solver> TinySolver(const std::string& net_fields, const std::string& solver_fields,
                                   Precision precision) {
  SolverParameter s = ParseSolver("base_lr: 0.01 lr_policy: 'fixed' " + solver_fields);
  *s.mutable_net_param() = ParseNet(net_fields + kNet);
  ApplyPrecision(precision, &s);
  ApplyPrecision(precision, s.mutable_net_param());
  return Solver::Create(s);
}

std::string Summary(Solver& s) {
  return SolverTypesSummary(s.param(), s.data_type(), s.net()->global_grad_scale());
}

TEST(SolverTypesSummary, SaysTheMasterWeightsAndTheLossScaling) {
  EXPECT_EQ(Summary(*TinySolver("", "", Precision::kFp16)),
            "Solver: master weights and history FLOAT, dynamic loss scaling (from 65536, window 2000)");
  EXPECT_EQ(Summary(*TinySolver("", "", Precision::kBf16)),
            "Solver: master weights and history FLOAT, no loss scaling");
  // A static scale in the net: used where the solver states no dynamic
  // scaling, and said to be unused where it does.
  EXPECT_EQ(Summary(*TinySolver("global_grad_scale: 1024\n", "dynamic_loss_scale: false", Precision::kFp16)),
            "Solver: master weights and history FLOAT, static loss scale 1024 (the net's global_grad_scale)");
  EXPECT_EQ(Summary(*TinySolver("global_grad_scale: 1024\n", "", Precision::kFp16)),
            "Solver: master weights and history FLOAT, dynamic loss scaling (from 65536, window 2000); the net's "
            "global_grad_scale 1024 is not used");
  EXPECT_EQ(Summary(*TinySolver("", "solver_data_type: FLOAT16", Precision::kFp16)),
            "Solver: master weights and history FLOAT16, dynamic loss scaling (from 65536, window 2000)");
}

// ---- trainer --precision ---------------------------------------------------------

test::CommandRun Trainer(const std::string& args) {
  return test::RunCommand("cd '" + test::SourceRoot() + "' && GLOG_logtostderr=1 timeout 300 '" +
                          test::TrainerPath() + "' " + args);
}

const std::string kTiny = "tests/models/tiny_time.prototxt";

TEST(TrainerPrecision, TimeLogsTheTypesTheFlagChose) {
  const test::CommandRun r = Trainer("time --model=" + kTiny + " --precision=fp16 --iterations=1 --warmup=1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Precision: --precision=fp16"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Net 'TinyTime' (TRAIN): 6 layers store "
                          "FLOAT16/FLOAT16 (forward/backward) and compute in FLOAT/FLOAT"),
            std::string::npos)
      << r.output;
  // time's stand-in update (no --solver) is the tool's own: unscaled.
  EXPECT_NE(r.output.find("Solver: master weights and history FLOAT, no loss scaling"), std::string::npos) << r.output;
}

TEST(TrainerPrecision, TimeAppliesItToTheSolverGiven) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("cortado_precision_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path solver = dir / "solver.prototxt";
  std::ofstream(solver) << "net: \"" << test::SourceRoot() << "/" << kTiny << "\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\n";
  const test::CommandRun r =
      Trainer("time --solver='" + solver.string() + "' --precision=fp16 --iterations=1 --warmup=1");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Solver: master weights and history FLOAT, dynamic loss scaling (from 65536, window 2000)"),
            std::string::npos)
      << r.output;
  fs::remove_all(dir);
}

TEST(TrainerPrecision, WithoutTheFlagTheFilesTypesRun) {
  const test::CommandRun r = Trainer("time --model=" + kTiny + " --iterations=1 --warmup=0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Precision: the files' own types (no --precision)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("store FLOAT/FLOAT (forward/backward)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no loss scaling"), std::string::npos) << r.output;
}

TEST(TrainerPrecision, ABadValueEndsInOneMessage) {
  for (const char* command : {"time --model=", "test --model=", "train --solver="}) {
    const test::CommandRun r = Trainer(std::string(command) + kTiny + " --precision=half");
    EXPECT_EQ(r.status, 1) << command << "\n" << r.output;
    EXPECT_NE(r.output.find("--precision=half: expected fp32, fp16 or bf16"), std::string::npos) << r.output;
  }
  const test::CommandRun r = Trainer("grad_stats --model=tests/models/tiny_grad_stats.prototxt --precision=fp16");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("grad_stats measures in FP32"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace cortado
