// The Solver's TensorBoard events (solver.hpp, tensorboard_dir): the values
// of the log lines at their iterations, the gradient histograms unscaled
// (loss scale, iter_size), tensorboard_histogram_interval, and its check.
// tests/scripts/tensorboard_test.py runs trainer train --tensorboard and
// reads the file with TensorBoard's own reader.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cortado/io/proto_io.hpp"
#include "cortado/solvers/solver.hpp"
#include "event_files.hpp"
#include "log_lines.hpp"
#include "temp_dir.hpp"

namespace cortado {
namespace {

// loss = sum(W x + b) with x = 0: dL/dW = 0, dL/db = N = 2 per output; the
// loss gradient is scaled by 8 (global_grad_scale).
const char* kLinear = R"(
  global_grad_scale: 8
  layer { name: "x" type: "DummyData" top: "x" dummy_data_param { shape { dim: 2 dim: 3 } data_filler { type: "constant" value: 0 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
    inner_product_param { num_output: 2 weight_filler { type: "constant" value: 0.5 } bias_filler { type: "constant" value: 1 } } }
  layer { name: "l" type: "Flatten" bottom: "y" top: "loss" loss_weight: 1 })";

std::unique_ptr<Solver> MakeSolver(const std::string& solver_text) {
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto(solver_text, "solver.prototxt", &sp, &info);
  ParseTextProto(kLinear, "net.prototxt", sp.mutable_net_param());
  return Solver::Create(sp, info);
}

// The events of the one file in `dir`, by tag and step.
std::map<std::string, std::map<int64_t, test::ReadEvent>> EventsIn(const Solver& s) {
  test::EventSchema schema;
  std::map<std::string, std::map<int64_t, test::ReadEvent>> out;
  for (test::ReadEvent& e : test::ParseEvents(test::ReadFileBytes(s.event_file()), &schema))
    if (!e.tag.empty()) out[e.tag][e.step] = e;
  return out;
}

std::set<int64_t> Steps(const std::map<int64_t, test::ReadEvent>& m) {
  std::set<int64_t> s;
  for (const auto& kv : m) s.insert(kv.first);
  return s;
}

TEST(SolverEvents, LogValuesAndUnscaledGradientHistograms) {
  test::TempDir dir("solver_events");
  test::LogLines log;
  auto s = MakeSolver(str_cat("base_lr: 0.5 lr_policy: 'step' gamma: 0.5 stepsize: 2 max_iter: 4 display: 2 ",
                              "iter_size: 2 test_iter: 1 test_interval: 2 test_compute_loss: true ",
                              "tensorboard_dir: '", dir / "tb", "'"));
  EXPECT_EQ(s->event_file(), "");  // opened by the first Step
  s->Solve();
  ASSERT_NE(s->event_file(), "");
  auto ev = EventsIn(*s);

  // "Iteration N, loss = X" at 0, 2 and 4 (Solve's last display).
  std::map<int64_t, double> logged;
  for (const auto& line : log.with(", loss = ")) {
    int iter = 0;
    double loss = 0;
    if (std::sscanf(line.second.c_str(), "Iteration %d, loss = %lf", &iter, &loss) == 2) logged[iter] = loss;
  }
  ASSERT_EQ(logged.size(), 3u);
  ASSERT_EQ(Steps(ev["train/loss"]), (std::set<int64_t>{0, 2, 4}));
  for (const auto& kv : logged) EXPECT_NEAR(ev["train/loss"][kv.first].simple_value, kv.second, 1e-5 * std::abs(kv.second));
  EXPECT_FLOAT_EQ(ev["train/loss"][0].simple_value, 4);  // sum of the biases over 2 samples

  EXPECT_EQ(Steps(ev["train/lr"]), (std::set<int64_t>{0, 2}));
  EXPECT_FLOAT_EQ(ev["train/lr"][0].simple_value, 0.5);
  EXPECT_FLOAT_EQ(ev["train/lr"][2].simple_value, 0.25);
  EXPECT_FLOAT_EQ(ev["train/loss_scale"][2].simple_value, 8);
  EXPECT_FLOAT_EQ(ev["train/skipped_steps"][2].simple_value, 0);
  EXPECT_EQ(Steps(ev["train/images_per_s"]), (std::set<int64_t>{2}));  // none before the first interval
  EXPECT_GT(ev["train/images_per_s"][2].simple_value, 0);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(Steps(ev[str_cat("train_net/loss/", k)]), (std::set<int64_t>{0, 2})) << k;
    EXPECT_EQ(Steps(ev[str_cat("test_net/loss/", k)]), (std::set<int64_t>{0, 2, 4})) << k;  // test_initialization
  }
  EXPECT_FLOAT_EQ(ev["train_net/loss/0"][0].simple_value, 1);  // one bias
  // The test loss at 4 is the log's.
  ASSERT_EQ(log.with("Test loss: ").size(), 3u);
  double test_loss = 0;
  ASSERT_EQ(std::sscanf(log.with("Test loss: ").back().second.c_str(), "Test loss: %lf", &test_loss), 1);
  EXPECT_NEAR(ev["test/loss"][4].simple_value, test_loss, 1e-5 * std::abs(test_loss));

  // Histograms at the displays with an update (0, 2): the gradient of the
  // mean loss, whatever the scale and iter_size.
  ASSERT_EQ(Steps(ev["grad/ip/1"]), (std::set<int64_t>{0, 2}));
  const test::ReadEvent& bias = ev["grad/ip/1"][2];
  EXPECT_EQ(bias.num, 2);
  EXPECT_EQ(bias.min, 2);
  EXPECT_EQ(bias.max, 2);
  EXPECT_EQ(bias.sum, 4);
  const test::ReadEvent& weights = ev["grad/ip/0"][0];
  EXPECT_EQ(weights.num, 6);
  EXPECT_EQ(weights.max, 0);
}

TEST(SolverEvents, HistogramInterval) {
  test::TempDir dir("solver_events");
  auto s = MakeSolver(str_cat("base_lr: 0.1 lr_policy: 'fixed' max_iter: 6 display: 2 ",
                              "tensorboard_histogram_interval: 4 tensorboard_dir: '", dir / "tb", "'"));
  s->Solve();
  auto ev = EventsIn(*s);
  EXPECT_EQ(Steps(ev["train/loss"]), (std::set<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(Steps(ev["grad/ip/0"]), (std::set<int64_t>{0, 4}));

  test::TempDir none_dir("solver_events");
  auto none = MakeSolver(str_cat("base_lr: 0.1 lr_policy: 'fixed' max_iter: 2 display: 1 ",
                                 "tensorboard_histogram_interval: -1 tensorboard_dir: '", none_dir / "tb", "'"));
  none->Solve();
  auto none_ev = EventsIn(*none);
  EXPECT_EQ(none_ev.count("grad/ip/0"), 0u);
  EXPECT_EQ(Steps(none_ev["train/loss"]), (std::set<int64_t>{0, 1, 2}));

  try {
    MakeSolver("base_lr: 0.1 lr_policy: 'fixed' display: 2\ntensorboard_histogram_interval: 3");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("solver.prototxt:2: tensorboard_histogram_interval"), std::string::npos)
        << e.what();
  }
}

TEST(SolverEvents, NoFolderNoFile) {
  auto s = MakeSolver("base_lr: 0.1 lr_policy: 'fixed' max_iter: 2 display: 1");
  s->Solve();
  EXPECT_EQ(s->event_file(), "");
}

}  // namespace
}  // namespace cortado
