// trainer time as a benchmark tool, and the pieces it is built from:
// SetBatchSize, SolverSetup::edit_net and Solver::ApplyUpdate.
//
// The tool tests run the built trainer on tests/models/tiny_time.prototxt
// and read what it prints: the key=value line, the layers-by-cost table and
// the by-type table.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/text_format.h>
#include <unistd.h>

#include "cortado/io/proto_io.hpp"
#include "cortado/net/net.hpp"
#include "cortado/solvers/solver.hpp"
#include "command.hpp"
#include "test_paths.hpp"

namespace cortado {
namespace {

const std::string kRoot = test::SourceRoot();
const std::string kTiny = "tests/models/tiny_time.prototxt";

NetParameter Parse(const std::string& text) {
  NetParameter p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p));
  return p;
}

TEST(SetBatchSize, ChangesTheFirstDimensionOfEveryDataSource) {
  NetParameter p = Parse(R"(
    layer { name: "d" type: "Data" top: "x" top: "y" data_param { source: "s" batch_size: 64 } }
    layer { name: "dd" type: "DummyData" top: "a" top: "b"
            dummy_data_param { shape { dim: 8 dim: 3 dim: 5 } shape { dim: 8 } } }
    layer { name: "legacy" type: "DummyData" top: "c"
            dummy_data_param { num: 7 channels: 2 height: 3 width: 4 } }
    layer { name: "in" type: "Input" top: "i" input_param { shape { dim: 10 dim: 3 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "i" top: "o" inner_product_param { num_output: 64 } })");
  EXPECT_EQ(SetBatchSize(&p, 3), 4);
  EXPECT_EQ(p.layer(0).data_param().batch_size(), 3u);
  EXPECT_EQ(p.layer(1).dummy_data_param().shape(0).dim(0), 3);
  EXPECT_EQ(p.layer(1).dummy_data_param().shape(0).dim(1), 3);  // only the first dimension
  EXPECT_EQ(p.layer(1).dummy_data_param().shape(0).dim(2), 5);
  EXPECT_EQ(p.layer(1).dummy_data_param().shape(1).dim(0), 3);
  EXPECT_EQ(p.layer(2).dummy_data_param().num(0), 3u);
  EXPECT_EQ(p.layer(2).dummy_data_param().channels(0), 2u);
  EXPECT_EQ(p.layer(3).input_param().shape(0).dim(0), 3);
  EXPECT_EQ(p.layer(3).input_param().shape(0).dim(1), 3);
  EXPECT_EQ(p.layer(4).inner_product_param().num_output(), 64u);  // not a data source
}

TEST(SetBatchSize, CountsNothingWithoutDataSourcesAndRejectsZero) {
  NetParameter p = Parse(R"(layer { name: "ip" type: "InnerProduct" bottom: "x" top: "o" })");
  EXPECT_EQ(SetBatchSize(&p, 5), 0);
  EXPECT_THROW(SetBatchSize(&p, 0), Error);
}

SolverParameter TinySolver() {
  SolverParameter sp;
  sp.set_net(kRoot + "/" + kTiny);
  sp.set_type("SGD");
  sp.set_base_lr(0.1f);
  sp.set_lr_policy("fixed");
  sp.set_momentum(0.9f);
  sp.add_test_iter(1);
  sp.set_test_interval(100);
  return sp;
}

TEST(SolverSetup, EditNetReachesTheTrainAndTestNets) {
  SolverSetup setup;
  std::vector<Phase> seen;
  setup.edit_net = [&seen](NetParameter* p) {
    seen.push_back(p->state().phase());
    SetBatchSize(p, 3);
  };
  std::unique_ptr<Solver> s = Solver::Create(TinySolver(), SourceInfo(), setup);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], TRAIN);
  EXPECT_EQ(seen[1], TEST);
  EXPECT_EQ(s->net()->blob_by_name("data")->shape(0), 3);
  EXPECT_EQ(s->net()->blob_by_name("label")->shape(0), 3);
  ASSERT_EQ(s->test_nets().size(), 1u);
  EXPECT_EQ(s->test_nets()[0]->blob_by_name("data")->shape(0), 3);
  // Without an edit the file's batch stands.
  std::unique_ptr<Solver> plain = Solver::Create(TinySolver());
  EXPECT_EQ(plain->net()->blob_by_name("data")->shape(0), 4);
}

TEST(SolverApplyUpdate, UpdatesTheWeightsWithoutAdvancingTheIteration) {
  std::unique_ptr<Solver> s = Solver::Create(TinySolver());
  Net* net = s->net();
  Blob* w = net->learnable_params()[0];
  const std::vector<float> before(w->cpu_data<float>(), w->cpu_data<float>() + w->count());
  net->ClearParamDiffs();
  net->ForwardBackward();
  const std::vector<float> grad(w->cpu_diff<float>(), w->cpu_diff<float>() + w->count());
  EXPECT_TRUE(s->ApplyUpdate());
  EXPECT_EQ(s->iter(), 0);
  // First SGD step from zero history: W -= lr * dW.
  const float* after = w->cpu_data<float>();
  double changed = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_NEAR(after[i], before[i] - 0.1f * grad[i], 1e-6f) << i;
    changed += std::abs(after[i] - before[i]);
  }
  EXPECT_GT(changed, 0);
}

using ToolRun = test::CommandRun;

ToolRun trainer(const std::string& args) {
  const std::string cmd = "cd '" + kRoot + "' && GLOG_logtostderr=1 timeout 300 '" + test::TrainerPath() +
                          "' " + args;
  return test::RunCommand(cmd);
}

// The key=value pairs of the "time:" line.
std::map<std::string, std::string> KeyValues(const std::string& out) {
  std::map<std::string, std::string> kv;
  const size_t at = out.find("time: device=");
  if (at == std::string::npos) return kv;
  std::istringstream line(out.substr(at + 6, out.find('\n', at) - at - 6));
  std::string item;
  while (line >> item) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos) kv[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return kv;
}

struct Row {
  int rank;
  std::string layer, type;
  double forward, backward, total, share;
};

// The rows of the layers-by-cost table.
std::vector<Row> CostTable(const std::string& out) {
  std::vector<Row> rows;
  size_t at = out.find("Layers by cost");
  if (at == std::string::npos) return rows;
  std::istringstream in(out.substr(at));
  std::string line;
  std::getline(in, line);  // title
  std::getline(in, line);  // header
  while (std::getline(in, line) && line.rfind("By layer type", 0) != 0) {
    std::istringstream f(line);
    Row r;
    std::string share;
    if (!(f >> r.rank >> r.layer >> r.type >> r.forward >> r.backward >> r.total >> share)) break;
    r.share = std::stod(share);
    rows.push_back(r);
  }
  return rows;
}

// Caffe's log prefix (I1206 21:13:23.352751 ...), which Caffe's and NVCaffe's
// log parsers read: no year unless --log_year_in_prefix asks for it.
TEST(TrainerLog, LinesCarryNoYearUnlessAsked) {
  const std::regex caffe(R"((^|\n)I\d{4} \d\d:\d\d:\d\d\.\d{6} )"), with_year(R"((^|\n)I\d{8} \d\d:)");
  const ToolRun plain = trainer("time --model=" + kTiny + " --iterations=1 --warmup=1");
  ASSERT_EQ(plain.status, 0) << plain.output;
  EXPECT_TRUE(std::regex_search(plain.output, caffe)) << plain.output;
  EXPECT_FALSE(std::regex_search(plain.output, with_year)) << plain.output;
  const ToolRun year = trainer("time --model=" + kTiny + " --iterations=1 --warmup=1 --log_year_in_prefix=true");
  ASSERT_EQ(year.status, 0) << year.output;
  EXPECT_TRUE(std::regex_search(year.output, with_year)) << year.output;
}

TEST(TrainerTime, PrintsMediansTheCostTableAndPeakMemory) {
  const ToolRun r = trainer("time --model=" + kTiny + " --batch_size=3 --iterations=3 --warmup=1");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto kv = KeyValues(r.output);
  ASSERT_FALSE(kv.empty()) << r.output;
  EXPECT_EQ(kv.at("device"), "cpu");
  EXPECT_EQ(kv.at("batch"), "3");  // --batch_size, not the file's 4
  EXPECT_EQ(kv.at("iterations"), "3");
  EXPECT_EQ(kv.at("params"), std::to_string(8 * 3 * 3 * 3 + 8 + 5 * 8 * 5 * 5 + 5));
  const double f = std::stod(kv.at("forward_ms_median")), b = std::stod(kv.at("backward_ms_median"));
  const double u = std::stod(kv.at("update_ms_median")), t = std::stod(kv.at("total_ms_median"));
  EXPECT_GT(f, 0);
  EXPECT_GT(b, 0);
  EXPECT_GT(u, 0);  // the SGD update is timed in the TRAIN phase
  EXPECT_GT(t, 0);
  EXPECT_GT(std::stod(kv.at("images_per_s")), 0);
  // The training loop, timed as a whole after the parts.
  EXPECT_GT(std::stod(kv.at("loop_ms_mean")), 0);
  EXPECT_GT(std::stod(kv.at("loop_images_per_s")), 0);
  EXPECT_NE(r.output.find("Training loop (3 iterations back to back"), std::string::npos) << r.output;
  EXPECT_GT(std::stod(kv.at("peak_mem_mib")), 1);
  EXPECT_NE(r.output.find("update: SGD"), std::string::npos) << r.output;
  // An FP32 net with FP32 solver data converts nothing in an iteration.
  EXPECT_EQ(std::stod(kv.at("conversions_per_iter")), 0) << r.output;

  // Every layer once, most expensive first, shares adding up to 100%.
  const std::vector<Row> rows = CostTable(r.output);
  ASSERT_EQ(rows.size(), 6u) << r.output;
  std::set<std::string> names;
  double share = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].rank, static_cast<int>(i) + 1);
    names.insert(rows[i].layer);
    share += rows[i].share;
    EXPECT_NEAR(rows[i].total, rows[i].forward + rows[i].backward, 2e-3);
    if (i > 0) EXPECT_LE(rows[i].total, rows[i - 1].total) << rows[i].layer;
  }
  EXPECT_EQ(names, (std::set<std::string>{"data", "conv1", "relu1", "pool1", "ip1", "loss"}));
  EXPECT_NEAR(share, 100, 1);
  // The by-type summary names the types with their layer counts.
  EXPECT_NE(r.output.find("By layer type:"), std::string::npos);
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\n  Convolution +1 layers +[0-9.]+ ms"))) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\n  DummyData +1 layers"))) << r.output;
}

TEST(TrainerTime, TestPhaseHasNoUpdate) {
  const ToolRun r = trainer("time --model=" + kTiny + " --phase=TEST --iterations=2 --warmup=0");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto kv = KeyValues(r.output);
  ASSERT_FALSE(kv.empty()) << r.output;
  EXPECT_EQ(kv.at("batch"), "4");
  EXPECT_EQ(std::stod(kv.at("update_ms_median")), 0);
  EXPECT_NE(r.output.find("TEST phase: no update"), std::string::npos);
}

TEST(TrainerTime, SolverFlagChoosesTheRuleAndModelChoosesTheNet) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("cortado_time_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path solver = dir / "solver.prototxt";
  std::ofstream(solver) << "net: \"no_such_net.prototxt\"\ntype: \"Adam\"\nbase_lr: 0.001\nmomentum: 0.9\n"
                           "momentum2: 0.999\nlr_policy: \"fixed\"\ntest_iter: 5\ntest_interval: 10\n";
  ToolRun r = trainer("time --solver='" + solver.string() + "' --model=" + kTiny + " --iterations=1 --warmup=0");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("update: Adam"), std::string::npos) << r.output;
  // Without --model the solver's net is timed: here a missing file, named.
  r = trainer("time --solver='" + solver.string() + "' --iterations=1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("no_such_net.prototxt"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

TEST(TrainerTime, BadFlagsEndInOneMessage) {
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"time --model=" + kTiny + " --batch_size=-2", "--batch_size=-2"},
      {"time --model=" + kTiny + " --iterations=0", "--iterations=0"},
      {"time --iterations=1", "time needs --model"},
      {"time --solver=models/lenet/solver.prototxt --phase=TEST", "--phase=TEST needs --model"},
  };
  for (const Case& c : cases) {
    const ToolRun r = trainer(c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.find("Check failed"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace cortado
