// The switches (switches.hpp): the table and the fields agree, a flag's
// text becomes the field's value over the file's, a bad value names the
// flag (and in a file, the file, the line and the field), the process's
// switches take effect, and the retired environment variables are named
// with what replaced them and otherwise ignored.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cortado/io/proto_io.hpp"
#include "cortado/net/net.hpp"
#include "cortado/switches.hpp"
#include "cortado/util/cpu_parallel.hpp"
#include "cortado/util/gemm_bf16.hpp"
#include "test_scopes.hpp"

namespace cortado {
namespace {

namespace pb = google::protobuf;

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Whether the field at `path` in `m` holds its default value.
bool HoldsDefault(const pb::Message& root, const std::string& path) {
  const pb::Message* m = &root;
  size_t start = 0;
  for (size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1)
    m = &m->GetReflection()->GetMessage(*m, m->GetDescriptor()->FindFieldByName(path.substr(start, dot - start)));
  const pb::FieldDescriptor* f = m->GetDescriptor()->FindFieldByName(path.substr(start));
  const pb::Reflection* r = m->GetReflection();
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_BOOL: return r->GetBool(*m, f) == f->default_value_bool();
    case pb::FieldDescriptor::CPPTYPE_ENUM: return r->GetEnum(*m, f)->number() == f->default_value_enum()->number();
    case pb::FieldDescriptor::CPPTYPE_UINT32: return r->GetUInt32(*m, f) == f->default_value_uint32();
    case pb::FieldDescriptor::CPPTYPE_FLOAT: return r->GetFloat(*m, f) == f->default_value_float();
    default: ADD_FAILURE() << path << ": a switch of an unexpected type";
  }
  return false;
}

// Every entry names a field, and its default as a flag sets the field's own
// default: the table, which --help prints, cannot drift from the schema.
TEST(Switches, TableMatchesTheFields) {
  std::set<std::string> names;
  for (const SwitchInfo& sw : SwitchTable()) {
    EXPECT_TRUE(names.insert(sw.name).second) << sw.name << " twice";
    EXPECT_FALSE(std::string(sw.help).empty()) << sw.name;
    if (sw.scope == SwitchScope::kProcess) continue;
    Switches s;
    s.Set(sw.name, sw.fallback);
    NetParameter net;
    SolverParameter solver;
    s.Apply(&net);
    s.Apply(&solver);
    const pb::Message& m = sw.scope == SwitchScope::kNet ? static_cast<const pb::Message&>(net) : solver;
    EXPECT_TRUE(HoldsDefault(m, sw.field)) << sw.name << "=" << sw.fallback;
  }
  EXPECT_EQ(names.size(), 14u);
}

TEST(Switches, FlagTextSetsTheField) {
  auto net_with = [](const std::string& name, const std::string& value) {
    Switches s;
    s.Set(name, value, "--");
    NetParameter p;
    s.Apply(&p);
    return p;
  };
  EXPECT_EQ(net_with("channels_last", "0").channels_last(), NetParameter::OFF);
  EXPECT_EQ(net_with("channels_last", "1").channels_last(), NetParameter::GPU_16BIT);
  EXPECT_EQ(net_with("channels_last", "all").channels_last(), NetParameter::ALL);
  EXPECT_EQ(net_with("channels_last", "gpu_16bit").channels_last(), NetParameter::GPU_16BIT);
  EXPECT_EQ(net_with("channels_last", "ALL").channels_last(), NetParameter::ALL);
  EXPECT_EQ(net_with("cudnn_api", "graph").cudnn().api(), CuDNNParameter::GRAPH);
  EXPECT_EQ(net_with("cudnn_api", "LEGACY").cudnn().api(), CuDNNParameter::LEGACY);
  EXPECT_TRUE(net_with("cudnn_batch_norm", "1").cudnn().batch_norm());
  EXPECT_EQ(net_with("cudnn_pad_channels", "8").cudnn().pad_channels(), 8u);
  EXPECT_EQ(net_with("cudnn_workspace_mb", "256").cudnn().workspace_mb(), 256u);
  EXPECT_FALSE(net_with("share_diffs", "0").share_diffs());
  EXPECT_FALSE(net_with("share_data", "false").share_data());
  EXPECT_FALSE(net_with("batch_norm_out_of_place", "0").batch_norm_out_of_place());
  EXPECT_TRUE(net_with("sync_layers", "true").sync_layers());
  Switches s;
  s.Set("cuda_graphs", "0", "--");
  s.Set("defer_steps", "0", "--");
  s.Set("collective_timeout", "2.5", "--");
  SolverParameter sp;
  s.Apply(&sp);
  EXPECT_FALSE(sp.cuda_graphs());
  EXPECT_FALSE(sp.defer_steps());
  EXPECT_EQ(sp.collective_timeout(), 2.5f);
  EXPECT_EQ(s.Summary(), "--cuda_graphs=0 --defer_steps=0 --collective_timeout=2.5");
  for (const char* bad : {"-1", "ten", "inf", "nan", "", "1e99"}) {
    try {
      Switches().Set("collective_timeout", bad, "--");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(str_cat("--collective_timeout=", bad, ": expected a number of seconds")),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(Switches().empty());
  EXPECT_FALSE(s.empty());
}

// A flag wins over the file; what the flags do not name keeps the file's value.
TEST(Switches, FlagsOverrideTheFileAndLeaveTheRest) {
  NetParameter p;
  ParseTextProto("share_diffs: false channels_last: ALL cudnn { api: GRAPH workspace_mb: 64 }", "net.prototxt", &p);
  Switches s;
  s.Set("share_diffs", "1");
  s.Set("cudnn_pad_channels", "4");
  s.Apply(&p);
  EXPECT_TRUE(p.share_diffs());
  EXPECT_EQ(p.channels_last(), NetParameter::ALL);
  EXPECT_EQ(p.cudnn().api(), CuDNNParameter::GRAPH);
  EXPECT_EQ(p.cudnn().workspace_mb(), 64u);
  EXPECT_EQ(p.cudnn().pad_channels(), 4u);
  SolverParameter sp;
  ParseTextProto("cuda_graphs: false", "solver.prototxt", &sp);
  s.Apply(&sp);
  EXPECT_FALSE(sp.cuda_graphs()) << "net switches do not touch the solver";
}

TEST(Switches, BadValuesNameTheFlag) {
  const std::vector<std::pair<std::pair<const char*, const char*>, const char*>> cases = {
      {{"share_diffs", "2"}, "--share_diffs=2: expected 0 or 1"},
      {{"share_data", "yes"}, "--share_data=yes: expected 0 or 1"},
      {{"channels_last", "2"}, "--channels_last=2: expected 0, 1 or all (channels_last: OFF, GPU_16BIT, ALL)"},
      {{"channels_last", "nhwc"}, "--channels_last=nhwc: expected 0, 1 or all"},
      {{"cudnn_api", "1"}, "--cudnn_api=1: expected legacy or graph (cudnn.api: LEGACY, GRAPH)"},
      {{"cudnn_pad_channels", "3"}, "--cudnn_pad_channels=3: expected 0, 4 or 8, got 3"},
      {{"cudnn_pad_channels", "four"}, "--cudnn_pad_channels=four: expected a whole number"},
      {{"cudnn_workspace_mb", "-1"}, "--cudnn_workspace_mb=-1: expected a whole number"},
      {{"cudnn_workspace_mb", "99999999"}, "--cudnn_workspace_mb=99999999: expected a number of MiB from 0 to 16777216"},
      {{"cuda_graphs", "off"}, "--cuda_graphs=off: expected 0 or 1"},
      {{"cpu_share", "2"}, "--cpu_share=2: expected 0 or 1"},
      {{"cpu_bf16_dot", ""}, "--cpu_bf16_dot=: expected 0 or 1"},
      {{"share_diff", "0"}, "--share_diff: not a switch (the switches: share_diffs, share_data"},
  };
  for (const auto& [nv, want] : cases) {
    const std::string msg = ErrorOf([&] { Switches().Set(nv.first, nv.second, "--"); });
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
  }
}

// In a file: the file, the line and the field, as every other net error.
TEST(Switches, BadFieldInAFileNamesItsLine) {
  NetParameter p;
  SourceInfo info;
  ParseTextProto(R"(name: "n"
cudnn {
  workspace_mb: 99999999
  pad_channels: 5
}
layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 1 dim: 2 } } })",
                 "net.prototxt", &p, &info);
  const std::string msg = ErrorOf([&] { Net net(p, info); });
  EXPECT_NE(msg.find("net.prototxt:4: cudnn.pad_channels: expected 0, 4 or 8, got 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("net.prototxt:3: cudnn.workspace_mb: expected a number of MiB from 0 to 16777216, got 99999999"),
            std::string::npos)
      << msg;
  p.mutable_cudnn()->set_pad_channels(8);
  p.mutable_cudnn()->set_workspace_mb(16);
  EXPECT_EQ(ErrorOf([&] { Net net(p, info); }), "");
}

// The Net hands its cudnn field to every layer, and its sync_layers is its own.
TEST(Switches, TheNetGivesItsLayersItsCudnnField) {
  NetParameter p;
  ParseTextProto(R"(cudnn { api: GRAPH pad_channels: 4 } sync_layers: true
layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 1 dim: 2 } } }
layer { name: "r" type: "ReLU" bottom: "x" top: "y" })",
                 "net.prototxt", &p);
  Net net(p);
  EXPECT_TRUE(net.sync_layers());
  for (const auto& l : net.layers()) {
    EXPECT_EQ(l->cudnn_param().api(), CuDNNParameter::GRAPH) << l->name();
    EXPECT_EQ(l->cudnn_param().pad_channels(), 4u) << l->name();
  }
  p.clear_sync_layers();
  EXPECT_FALSE(Net(p).sync_layers());
}

// The process's switches: the CPU's shared cores and the BF16 kernel.
TEST(Switches, ProcessSwitchesTakeEffect) {
  ASSERT_FALSE(cpu_share_off()) << "the default follows the free cores";
  const bool dot = detail::bf16_dot_enabled();
  Switches s;
  s.Set("cpu_share", "0");
  s.Set("cpu_bf16_dot", "0");
  s.ApplyToProcess();
  EXPECT_TRUE(cpu_share_off());
  EXPECT_EQ(cpu_workers(), cpu_threads()) << "every thread, whatever the load";
  EXPECT_FALSE(detail::bf16_dot_enabled());
  Switches on;
  on.Set("cpu_share", "1");
  on.ApplyToProcess();
  EXPECT_FALSE(cpu_share_off());
  EXPECT_FALSE(detail::bf16_dot_enabled()) << "a switch not given stays as it is";
  set_cpu_bf16_dot(dot);
  EXPECT_EQ(detail::bf16_dot_enabled(), dot);
}

// x -> ip1 -> TanH -> ip2 -> TanH -> ip3 -> loss: diffs of equal sizes whose
// spans do not touch, which the diff plan shares.
size_t DistinctDiffs(const NetParameter& p) {
  Net net(p);
  std::set<const Tensor*> t;
  for (const auto& b : net.blobs()) t.insert(&b->diff());
  return t.size();
}

TEST(Switches, RetiredVariablesAreNamedAndIgnored) {
  NetParameter p;
  ParseTextProto(R"(force_backward: true
layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 2 dim: 4 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "a" inner_product_param { num_output: 4 } }
layer { name: "t1" type: "TanH" bottom: "a" top: "b" }
layer { name: "ip2" type: "InnerProduct" bottom: "b" top: "c" inner_product_param { num_output: 4 } }
layer { name: "t2" type: "TanH" bottom: "c" top: "d" }
layer { name: "ip3" type: "InnerProduct" bottom: "d" top: "e" inner_product_param { num_output: 4 } }
layer { name: "loss" type: "Reduction" bottom: "e" top: "loss" loss_weight: 1 })",
                 "net.prototxt", &p);
  const size_t shared = DistinctDiffs(p);
  NetParameter off = p;
  off.set_share_diffs(false);
  ASSERT_LT(shared, DistinctDiffs(off)) << "the net shares nothing: the test would prove nothing";
  std::vector<std::unique_ptr<test::ScopedEnv>> unset;  // whatever the environment running the tests holds
  for (const char* v : {"CORTADO_NHWC", "CORTADO_CUDNN_BN", "CORTADO_CUDNN_API", "CORTADO_CUDNN_PAD_CHANNELS",
                        "CORTADO_CUDNN_WORKSPACE_MB", "CORTADO_CUDA_GRAPHS", "CORTADO_DEFER_STEPS",
                        "CORTADO_SYNC_LAYERS", "CORTADO_SHARE_DIFFS", "CORTADO_SHARE_DATA", "CORTADO_BN_OUT_OF_PLACE",
                        "CORTADO_CPU_SHARE", "CORTADO_CPU_BF16_DOT", "CORTADO_SCRIPTS_DIR", "CORTADO_PYTHON",
                        "CORTADO_NCCL_TIMEOUT"})
    unset.push_back(std::make_unique<test::ScopedEnv>(v, nullptr));
  EXPECT_TRUE(RetiredVariableWarnings().empty());
  {
    test::ScopedEnv diffs("CORTADO_SHARE_DIFFS", "0");
    test::ScopedEnv cpu("CORTADO_CPU_SHARE", "0");
    test::ScopedEnv python("CORTADO_PYTHON", "/usr/bin/python3");
    test::ScopedEnv nccl("CORTADO_NCCL_TIMEOUT", "30");
    test::ScopedEnv lib("CORTADO_LIB", "libcortado_c.so");  // the Python module's: not retired
    const std::vector<std::string> lines = RetiredVariableWarnings();
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_EQ(lines[0], "CORTADO_SHARE_DIFFS=0 is no longer read; set the net's field share_diffs "
                        "(trainer --share_diffs) instead");
    EXPECT_EQ(lines[1], "CORTADO_CPU_SHARE=0 is no longer read; set trainer --cpu_share (Python: "
                        "cortado.set_cpu_share) instead");
    EXPECT_NE(lines[2].find("CORTADO_PYTHON=/usr/bin/python3 is no longer read; set the trainer's grad_stats flag "
                            "--python"),
              std::string::npos)
        << lines[2];
    EXPECT_EQ(lines[3], "CORTADO_NCCL_TIMEOUT=30 is no longer read; set the solver's field collective_timeout "
                        "(seconds; every engine) instead");
    EXPECT_EQ(DistinctDiffs(p), shared) << "CORTADO_SHARE_DIFFS=0 changed the plan";
    EXPECT_FALSE(cpu_share_off()) << "CORTADO_CPU_SHARE=0 changed the threads";
  }
  test::ScopedEnv empty("CORTADO_SHARE_DIFFS", "");
  EXPECT_TRUE(RetiredVariableWarnings().empty()) << "an empty variable is unset";
}

}  // namespace
}  // namespace cortado
