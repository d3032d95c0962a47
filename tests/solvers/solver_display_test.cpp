// The Solver's display (solver.cpp): beside images/s, the epochs done of the
// total where the net reads a Data layer, and the time to max_iter at the
// pace of the last displays.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cortado/io/proto_io.hpp"
#include "cortado/solvers/solver.hpp"
#include "datum_db.hpp"
#include "log_lines.hpp"
#include "temp_dir.hpp"

namespace cortado {
namespace {

std::vector<std::string> Lines(const std::vector<std::string>& all, const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& l : all)
    if (l.find(text) != std::string::npos) out.push_back(l);
  return out;
}

std::unique_ptr<Solver> MakeSolver(const std::string& net_text) {
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto("base_lr: 0.01 lr_policy: 'fixed' max_iter: 20 display: 5 random_seed: 1", "solver.prototxt", &sp,
                 &info);
  ParseTextProto(net_text, "net.prototxt", sp.mutable_net_param());
  return Solver::Create(sp, info, SolverSetup());
}

const char* kBody = R"(
  layer { name: "ip" type: "InnerProduct" bottom: "x" top: "z"
    inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "z" bottom: "y" top: "loss" })";

TEST(SolverDisplay, ShowsEpochsAndTheTimeToGo) {
  test::TempDir dir;
  const std::string db = dir / "db";
  test::WriteRawDatumDb(db, 40, 1, 4, 4, [](int i, int k) { return static_cast<uint8_t>((7 * i + k) % 251); },
                        [](int i) { return i % 3; });
  auto s = MakeSolver(std::string(R"(layer { name: "d" type: "Data" top: "x" top: "y"
    data_param { source: ")") + db + R"(" batch_size: 8 backend: LMDB } })" + kBody);
  test::LogLines log;
  s->Step(11);
  // 8 images an iteration of 40 records: 5 iterations an epoch, 20 in all.
  const std::vector<std::string> shown = Lines(log.lines(), "images/s");
  ASSERT_EQ(shown.size(), 2u) << "displays at 5 and 10";
  EXPECT_NE(shown[0].find("; epoch 1.00 of 4.00; "), std::string::npos) << shown[0];
  EXPECT_NE(shown[1].find("; epoch 2.00 of 4.00; "), std::string::npos) << shown[1];
  for (const std::string& l : shown) EXPECT_NE(l.find(" to go"), std::string::npos) << l;
}

TEST(SolverDisplay, NoEpochsWithoutADataLayer) {
  auto s = MakeSolver(std::string(R"(layer { name: "d" type: "DummyData" top: "x" top: "y"
    dummy_data_param { shape { dim: 8 dim: 1 dim: 4 dim: 4 } shape { dim: 8 } } })") + kBody);
  test::LogLines log;
  s->Step(6);
  const std::vector<std::string> shown = Lines(log.lines(), "images/s");
  ASSERT_EQ(shown.size(), 1u);
  EXPECT_EQ(shown[0].find("epoch"), std::string::npos) << shown[0];
  EXPECT_NE(shown[0].find(" to go"), std::string::npos) << shown[0];
}

}  // namespace
}  // namespace cortado
