// Gradient statistics (cortado/solvers/grad_stats.hpp) and `trainer grad_stats`:
// the FP16 classification against the conversion itself, the loss scale, the
// loss at that scale against brute force, bins of gradients whose values are
// known exactly, per-layer reads through an in-place layer, and the command.
#include "cortado/solvers/grad_stats.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include "cortado/io/proto_io.hpp"
#include "cortado/util/rng.hpp"
#include "command.hpp"
#include "test_paths.hpp"

namespace cortado {
namespace {

uint64_t sum_bins(const GradHistogram& h) { return std::accumulate(h.bins.begin(), h.bins.end(), uint64_t(0)); }

int bin_of(int e) { return e - GradHistogram::kMinExp; }

std::unique_ptr<Net> make_net(const std::string& text) {
  NetParameter p;
  ParseTextProto(text, "grad_stats_test.prototxt", &p);
  p.mutable_state()->set_phase(TRAIN);
  ForceFloatTypes(&p);
  return std::make_unique<Net>(p);
}

// ---- GradHistogram ------------------------------------------------------------------

TEST(GradHistogram, ClassifiesLikeTheFloat16Conversion) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> v = {
      0.f, -0.f, inf, -inf, nan,
      std::ldexp(1.f, -25),                   // ties to even: zero
      std::ldexp(1.5f, -25),                  // rounds up to 2^-24: subnormal
      std::ldexp(1.f, -26), 1e-30f,           // zero
      -std::ldexp(1.f, -14),                  // smallest normal
      std::ldexp(1.f, -14) * (1 - std::ldexp(1.f, -12)),  // rounds up to 2^-14: normal
      std::ldexp(1.f, -20),                   // subnormal
      65504.f, 65519.f,                       // finite in FP16
      65520.f, 1e6f,                          // overflow
      0.75f, 3.f};
  GradHistogram h;
  h.Add(v.data(), v.size());
  EXPECT_EQ(h.count, v.size());
  EXPECT_EQ(h.zeros, 2u);
  EXPECT_EQ(h.nonfinite, 3u);
  EXPECT_EQ(h.nonzero(), v.size() - 5);
  EXPECT_EQ(sum_bins(h), h.nonzero());
  EXPECT_EQ(h.fp16_zero, 3u);       // 2^-25, 2^-26, 1e-30
  EXPECT_EQ(h.fp16_subnormal, 2u);  // 1.5 * 2^-25, 2^-20
  EXPECT_EQ(h.fp16_overflow, 2u);   // 65520, 1e6
  EXPECT_EQ(h.max_abs, 1e6);
  // Brute force over the same values.
  uint64_t zero = 0, sub = 0, over = 0;
  for (float x : v) {
    if (x == 0 || !std::isfinite(x)) continue;
    const float16 q(x);
    const float b = std::fabs(static_cast<float>(q));
    zero += b == 0;
    over += isinf(q);
    sub += b != 0 && b < std::ldexp(1.f, -14);
  }
  EXPECT_EQ(h.fp16_zero, zero);
  EXPECT_EQ(h.fp16_subnormal, sub);
  EXPECT_EQ(h.fp16_overflow, over);
  // Bins: floor(log2|x|), clamped at both ends.
  EXPECT_EQ(h.bins[bin_of(-1)], 1u);   // 0.75
  EXPECT_EQ(h.bins[bin_of(1)], 1u);    // 3
  EXPECT_EQ(h.bins[bin_of(-14)], 1u);  // -2^-14
  EXPECT_EQ(h.bins[bin_of(-15)], 1u);  // just below 2^-14
  EXPECT_EQ(h.bins[bin_of(-25)], 2u);  // 2^-25, 1.5 * 2^-25
  EXPECT_EQ(h.bins[bin_of(-40)], 1u);  // 1e-30 clamps into the first bin
  EXPECT_EQ(h.bins[bin_of(15)], 3u);   // 65504, 65519, 65520 (2^15.9999)
  EXPECT_EQ(h.bins[bin_of(19)], 1u);   // 1e6 = 2^19.93
  EXPECT_EQ(h.bins.back(), 0u);
}

TEST(GradHistogram, ClampsIntoTheLastBinAndReadsFloat16AndDouble) {
  const std::vector<double> d = {std::ldexp(1.0, 30), std::ldexp(1.0, 20), std::ldexp(1.0, -100)};
  GradHistogram h;
  h.Add(d.data(), d.size());
  EXPECT_EQ(h.bins.back(), 2u);
  EXPECT_EQ(h.bins.front(), 1u);
  const std::vector<float16> f = {float16(0.5f), float16(-0.f), float16::from_bits(0x0001)};  // 2^-24
  h.Add(f.data(), f.size());
  EXPECT_EQ(h.bins[bin_of(-1)], 1u);
  EXPECT_EQ(h.bins[bin_of(-24)], 1u);
  EXPECT_EQ(h.zeros, 1u);
  EXPECT_EQ(h.fp16_subnormal, 1u);
  EXPECT_EQ(h.count, 6u);
}

TEST(GradHistogram, ZeroAtScaleMatchesBruteForce) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> log2(-45, 5);
  std::vector<float> v;
  for (int i = 0; i < 20000; ++i) v.push_back(static_cast<float>((i % 2 ? -1 : 1) * std::exp2(log2(gen))));
  for (int e = -45; e <= 5; ++e) v.push_back(std::ldexp(1.f, e));  // exact powers of two: the ties
  GradHistogram h;
  h.Add(v.data(), v.size());
  for (int k = -3; k <= 45; ++k) {
    uint64_t brute = 0;
    for (float x : v) brute += static_cast<float>(float16(x * std::ldexp(1.f, k))) == 0;
    EXPECT_EQ(h.ZeroAtScale(k), brute) << "scale 2^" << k;
  }
  EXPECT_EQ(h.ZeroAtScale(0), h.fp16_zero);
  GradHistogram m;
  m.Merge(h);
  m.Merge(h);
  EXPECT_EQ(m.ZeroAtScale(10), 2 * h.ZeroAtScale(10));
  EXPECT_EQ(m.count, 2 * h.count);
  EXPECT_EQ(m.max_abs, h.max_abs);
}

TEST(GradStats, LargestSafeScale) {
  for (double m : {1e-9, 3e-5, 0.233, 1.0, 2.0, 65504.0 / 4, 1000.0, 70000.0, 1e7}) {
    const int k = LargestSafeScaleLog2(m);
    EXPECT_LT(std::ldexp(m, k), 65504.0) << m;
    EXPECT_GE(std::ldexp(m, k + 1), 65504.0) << m;
  }
  EXPECT_EQ(LargestSafeScaleLog2(1.0), 15);            // 32768 < 65504 <= 65536
  EXPECT_EQ(LargestSafeScaleLog2(65504.0 / 4), 1);     // 2 * 16376 = 32752; 4x would equal 65504
  EXPECT_EQ(LargestSafeScaleLog2(65504.0), -1);
}

TEST(GradStats, ForceFloatTypesKeepsDouble) {
  NetParameter p;
  ParseTextProto(R"(
    default_forward_type: FLOAT16 default_backward_type: FLOAT16 default_forward_math: FLOAT16
    layer { name: "a" type: "ReLU" }
    layer { name: "b" type: "ReLU" forward_type: FLOAT16 backward_type: FLOAT }
    layer { name: "c" type: "ReLU" forward_type: DOUBLE backward_type: DOUBLE })", "t", &p);
  ForceFloatTypes(&p);
  EXPECT_EQ(p.default_forward_type(), FLOAT);
  EXPECT_EQ(p.default_backward_type(), FLOAT);
  EXPECT_EQ(p.default_forward_math(), FLOAT);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(p.layer(i).forward_type(), FLOAT);
    EXPECT_EQ(p.layer(i).backward_type(), FLOAT);
    EXPECT_EQ(p.layer(i).forward_math(), FLOAT);
  }
  EXPECT_EQ(p.layer(2).forward_type(), DOUBLE);
  EXPECT_EQ(p.layer(2).backward_type(), DOUBLE);
  NetParameter d;
  ParseTextProto("default_forward_type: DOUBLE default_backward_type: DOUBLE layer { name: 'a' type: 'ReLU' }", "t",
                 &d);
  ForceFloatTypes(&d);
  EXPECT_EQ(d.layer(0).forward_type(), DOUBLE);
  EXPECT_EQ(d.layer(0).backward_type(), DOUBLE);
}

// ---- GradStats on nets --------------------------------------------------------------

// One sample x = 2^-10 (4 features), two classes, zero weights and bias: the
// softmax is (1/2, 1/2) and with label 0 and loss weight 2^-8 the logit
// gradient is exactly (-2^-9, +2^-9). So the weight gradient is +-2^-19 (8
// values, FP16 subnormals), the bias gradient +-2^-9 (2 values), the loss
// layer's bottom gradient +-2^-9 (2 values), every iteration.
const char* kExact = R"(
name: "exact"
default_forward_type: FLOAT16 default_backward_type: FLOAT16
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 1 dim: 4 } shape { dim: 1 }
    data_filler { type: "constant" value: 0.0009765625 } data_filler { type: "constant" value: 0 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 2 weight_filler { type: "constant" value: 0 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" loss_weight: 0.00390625 }
)";

TEST(GradStats, KnownGradientsLandInTheirBins) {
  auto net = make_net(kExact);
  GradStats stats(net.get());
  const GradStatsResult& r = stats.Run(3);
  EXPECT_EQ(r.net_name, "exact");
  EXPECT_EQ(r.iterations, 3);
  ASSERT_EQ(r.layers.size(), 3u);
  EXPECT_EQ(r.layers[0].name, "data");
  EXPECT_TRUE(r.layers[0].activation.empty());  // nothing back-propagates into the data
  EXPECT_TRUE(r.layers[0].weight.empty());
  const LayerGradStats& ip = r.layers[1];
  EXPECT_EQ(ip.type, "InnerProduct");
  EXPECT_TRUE(ip.activation.empty());  // its bottom is data: no gradient needed
  EXPECT_EQ(ip.weight.count, 3u * 10);  // per-iteration diffs, not accumulated
  EXPECT_EQ(ip.weight.bins[bin_of(-19)], 3u * 8);
  EXPECT_EQ(ip.weight.bins[bin_of(-9)], 3u * 2);
  EXPECT_EQ(sum_bins(ip.weight), ip.weight.count);
  EXPECT_EQ(ip.weight.fp16_subnormal, 3u * 8);
  EXPECT_EQ(ip.weight.fp16_zero, 0u);
  EXPECT_DOUBLE_EQ(ip.weight.max_abs, std::ldexp(1.0, -9));  // 3 iterations would make 3 * 2^-9 if accumulated
  const LayerGradStats& loss = r.layers[2];
  EXPECT_EQ(loss.activation.count, 3u * 2);  // the logits only: labels get no gradient
  EXPECT_EQ(loss.activation.bins[bin_of(-9)], 3u * 2);
  EXPECT_TRUE(loss.weight.empty());
  // Overall and the scale: max 2^-9, so S = 2^24 (2^15 = 32768 < 65504 <= 65536).
  EXPECT_EQ(r.activation.count, 6u);
  EXPECT_EQ(r.weight.count, 30u);
  EXPECT_EQ(r.all.count, 36u);
  ASSERT_TRUE(r.has_loss_scale);
  EXPECT_EQ(r.loss_scale_log2, 24);
  EXPECT_EQ(r.loss_scale, std::ldexp(1.0, 24));
  EXPECT_EQ(r.all.fp16_zero_at_scale, 0u);
  // The report and the CSV say so.
  const std::string report = GradStatsReport(r);
  EXPECT_NE(report.find("S = 2^24 = 16777216"), std::string::npos) << report;
  EXPECT_NE(report.find("ip"), std::string::npos);
  std::ostringstream csv;
  WriteGradStatsCsv(r, csv);
  EXPECT_NE(csv.str().find("layer,ip,InnerProduct,weight,exp,-19,24\n"), std::string::npos) << csv.str();
  EXPECT_NE(csv.str().find("layer,ip,InnerProduct,weight,exp,-9,6\n"), std::string::npos);
  EXPECT_NE(csv.str().find("net,,,activation,exp,-9,6\n"), std::string::npos);
  EXPECT_NE(csv.str().find("net,,,weight,zero,,0\n"), std::string::npos);
}

// Small output weights, 10 classes: the logits are near zero, so the logit
// gradients are about loss_weight * 0.1 / 8 and 0.9 / 8, and those below ip2
// are 1000 times smaller still.
std::string small_net(const std::string& loss_weight) {
  return R"(
name: "small"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 8 dim: 32 } shape { dim: 8 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 2 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param { num_output: 16 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 10 weight_filler { type: "gaussian" std: 0.001 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" loss_weight: )" +
         loss_weight + " }\n";
}

TEST(GradStats, TinyLossWeightUnderflowsAndScalingRecovers) {
  set_random_seed(1701);
  auto tiny = make_net(small_net("1e-6"));
  const GradStatsResult t = GradStats(tiny.get()).Run(4);
  set_random_seed(1701);
  auto unit = make_net(small_net("1"));
  const GradStatsResult u = GradStats(unit.get()).Run(4);
  // Same values apart from the factor 1e6: same counts.
  EXPECT_EQ(t.all.count, u.all.count);
  EXPECT_GT(t.all.nonzero(), 0u);
  EXPECT_GT(t.all.zero_share(), 0.5) << GradStatsReport(t);
  EXPECT_GT(t.weight.zero_share(), 0.8) << GradStatsReport(t);
  EXPECT_LT(u.all.zero_share(), 0.01) << GradStatsReport(u);
  EXPECT_NEAR(u.all.max_abs / t.all.max_abs, 1e6, 1e6 * 1e-4);
  // The scale: a power of two with S * max < 65504 <= 2 * S * max.
  for (const GradStatsResult* r : {&t, &u}) {
    ASSERT_TRUE(r->has_loss_scale);
    EXPECT_EQ(r->loss_scale, std::ldexp(1.0, r->loss_scale_log2));
    EXPECT_LT(r->loss_scale * r->all.max_abs, 65504.0);
    EXPECT_GE(2 * r->loss_scale * r->all.max_abs, 65504.0);
    EXPECT_LE(r->all.zero_share_at_scale(), r->all.zero_share());
    EXPECT_EQ(r->all.count, r->activation.count + r->weight.count);
  }
  // max|g| moves by 1e6 = 2^19.93: the scale by 2^19 or 2^20.
  EXPECT_GE(t.loss_scale_log2 - u.loss_scale_log2, 19);
  EXPECT_LE(t.loss_scale_log2 - u.loss_scale_log2, 20);
  EXPECT_LT(t.all.zero_share_at_scale(), 0.01) << GradStatsReport(t);
  for (const GradStatsResult* r : {&t, &u}) {
    for (const LayerGradStats& l : r->layers)
      for (const GradHistogram* h : {&l.activation, &l.weight})
        EXPECT_EQ(sum_bins(*h) + h->zeros + h->nonfinite, h->count) << l.name;
    EXPECT_EQ(sum_bins(r->all) + r->all.zeros + r->all.nonfinite, r->all.count);
  }
}

TEST(GradStats, InPlaceLayersAreReadPerLayer) {
  set_random_seed(3);
  auto net = make_net(small_net("1"));
  const GradStatsResult r = GradStats(net.get()).Run(2);
  const LayerGradStats* relu = nullptr;
  const LayerGradStats* ip2 = nullptr;
  for (const LayerGradStats& l : r.layers) {
    if (l.name == "relu1") relu = &l;
    if (l.name == "ip2") ip2 = &l;
  }
  ASSERT_TRUE(relu && ip2);
  // ip2's bottom gradient (dense) and the ReLU's (zero where ip1 < 0) share
  // one blob; reading after the whole backward would see the ReLU's twice.
  EXPECT_EQ(relu->activation.count, 2u * 8 * 16);
  EXPECT_EQ(ip2->activation.count, 2u * 8 * 16);
  EXPECT_EQ(ip2->activation.zeros, 0u);
  EXPECT_GT(relu->activation.zeros, relu->activation.count / 8);
}

TEST(GradStats, SharedParametersCountOnceUnderTheirOwner) {
  const char* text = R"(
name: "shared"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 2 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "a" type: "InnerProduct" bottom: "data" top: "a" param { name: "w" } param { name: "b" }
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "b" type: "InnerProduct" bottom: "a" top: "b" param { name: "w" } param { name: "b" }
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "b" bottom: "label" top: "loss" }
)";
  auto net = make_net(text);
  const GradStatsResult r = GradStats(net.get()).Run(1);
  EXPECT_EQ(r.layers[1].weight.count, 12u);
  EXPECT_TRUE(r.layers[2].weight.empty());
  EXPECT_EQ(r.weight.count, 12u);
}

// ---- trainer grad_stats -------------------------------------------------------------

const std::string kRoot = test::SourceRoot();

using TrainerRun = test::CommandRun;

TrainerRun run_trainer(const std::string& args, const std::string& env = "") {
  const std::string cmd = "cd '" + kRoot + "' && " + env + " GLOG_logtostderr=1 timeout 300 '" +
                          test::TrainerPath() + "' " + args;
  return test::RunCommand(cmd);
}

std::string temp_path(const std::string& suffix) {
  return ::testing::TempDir() + "grad_stats_test_" + std::to_string(::getpid()) + suffix;
}

TEST(TrainerGradStats, WritesReportAndCsv) {
  const std::string csv = temp_path(".csv");
  std::remove(csv.c_str());
  const TrainerRun r = run_trainer("grad_stats --model=tests/models/tiny_grad_stats.prototxt --iterations=3 --csv='" +
                            csv + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Gradient statistics of net 'TinyGradStats': 3 iterations in FP32"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("Suggested static loss scale: S = 2^"), std::string::npos) << r.output;
  std::ifstream in(csv);
  ASSERT_TRUE(in.good()) << csv;
  std::string line;
  int comments = 0, rows = 0, layer_rows = 0, header = 0;
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) {
      ++comments;
    } else if (line == "scope,layer,type,kind,bin,log2_lower,count") {
      ++header;
    } else {
      ++rows;
      layer_rows += line.rfind("layer,", 0) == 0;
    }
  }
  EXPECT_GE(comments, 1);
  EXPECT_EQ(header, 1);
  const int per_hist = GradHistogram::kNumBins + 2;
  // ip1 weight, relu1 / ip2 / loss activation, ip2 weight: 5 layer histograms, plus 2 overall.
  EXPECT_EQ(layer_rows, 5 * per_hist);
  EXPECT_EQ(rows, 7 * per_hist);
  std::remove(csv.c_str());
}

TEST(TrainerGradStats, UserErrorsExitWithStatusOne) {
  TrainerRun r = run_trainer("grad_stats --iterations=2");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("grad_stats needs --model"), std::string::npos) << r.output;
  r = run_trainer("grad_stats --model=tests/models/tiny_grad_stats.prototxt --iterations=0");
  EXPECT_EQ(r.status, 1) << r.output;
  r = run_trainer("grad_stats --model=tests/models/tiny_grad_stats.prototxt --iterations=1 --csv=/nonexistent/dir/x.csv");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/dir/x.csv"), std::string::npos) << r.output;
  r = run_trainer("grad_stats --model=tests/models/tiny_grad_stats.prototxt --iterations=1 --plot=x.png "
                  "--plot_script=no_such_dir/plot_grad_stats.py");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("no_such_dir/plot_grad_stats.py not found (--plot_script"), std::string::npos) << r.output;
}

// The plot needs matplotlib, which the tests do not require: skipped without it.
TEST(TrainerGradStats, Plot) {
  std::string python;
  for (const char* p : {"python3", "/usr/bin/python3"}) {  // a virtualenv's python3 may lack Debian's matplotlib
    if (std::system((std::string(p) + " -c 'import matplotlib' >/dev/null 2>&1").c_str()) == 0) {
      python = p;
      break;
    }
  }
  if (python.empty()) GTEST_SKIP() << "python3-matplotlib is not installed";
  const std::string png = temp_path(".png");
  std::remove(png.c_str());
  const TrainerRun r = run_trainer("grad_stats --model=tests/models/tiny_grad_stats.prototxt --iterations=2 --plot='" + png +
                                   "' --python='" + python + "' --plot_script=scripts/plot_grad_stats.py");
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(png, std::ios::binary);
  std::string magic(8, '\0');
  in.read(&magic[0], 8);
  EXPECT_EQ(magic, std::string("\x89PNG\r\n\x1a\n", 8));
  std::remove(png.c_str());
}

}  // namespace
}  // namespace cortado
