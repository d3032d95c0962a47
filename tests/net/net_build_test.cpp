// The net built in stages (net.hpp): a net with no layers is an error naming
// the file; every independent error of a model is reported in one message,
// in file order, each with its line, and a layer fed by a failed layer adds
// none; the layer traits of the registry (layer_traits.hpp) and what they
// decide: the GEMM math warning, the net's inputs, a rank's shard of a data
// source, the batch a benchmark sets.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cortado/io/proto_io.hpp"
#include "cortado/layer_registry.hpp"
#include "cortado/layer_traits.hpp"
#include "cortado/net/net.hpp"
#include "command.hpp"
#include "log_lines.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"

namespace cortado {
namespace {

std::string Write(const test::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir / name;
  std::ofstream(path) << text;
  return path;
}

// The message of the Error that building the net at `path` throws ("" if none).
std::string BuildError(const std::string& path, Phase phase = TRAIN) {
  try {
    Net net(path, phase);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

test::CommandRun Trainer(const std::string& args) {
  return test::RunCommand("GLOG_logtostderr=1 timeout 300 '" + test::TrainerPath() + "' " + args);
}

// ---- a net with no layers ---------------------------------------------------------

TEST(NetBuild, ModelWithNoLayersIsAnErrorNamingTheFile) {
  test::TempDir dir;
  const std::string empty = Write(dir, "empty.prototxt", "# nothing but a name\nname: \"nothing\"\n");
  const std::string e = BuildError(empty);
  EXPECT_EQ(e.rfind(empty + ": ", 0), 0u) << e;
  EXPECT_NE(e.find("net 'nothing' has no layers"), std::string::npos) << e;
  EXPECT_NE(e.find("the file defines none"), std::string::npos) << e;
  // A file with nothing at all.
  const std::string blank = Write(dir, "blank.prototxt", "");
  EXPECT_EQ(BuildError(blank).rfind(blank + ": net has no layers", 0), 0u) << BuildError(blank);
}

TEST(NetBuild, NetLeftWithNoLayersByTheFilterNamesTheFileAndState) {
  test::TempDir dir;
  const std::string path = Write(dir, "test_only.prototxt", R"(name: "t"
layer { name: "x" type: "DummyData" top: "x" dummy_data_param { shape { dim: 2 } } include { phase: TEST } }
layer { name: "s" type: "Silence" bottom: "x" include { phase: TEST } }
)");
  const std::string e = BuildError(path, TRAIN);
  EXPECT_EQ(e.rfind(path + ": net 't' has no layers in phase TRAIN", 0), 0u) << e;
  EXPECT_NE(e.find("leave out all 2 of them"), std::string::npos) << e;
  EXPECT_EQ(BuildError(path, TEST), "");  // the TEST net has both layers
}

TEST(NetBuild, TrainerTimeOnAModelWithNoLayersExitsNonZeroNamingTheFile) {
  test::TempDir dir;
  const std::string empty = Write(dir, "empty.prototxt", "name: \"nothing\"\n");
  for (const std::string phase : {"TRAIN", "TEST"}) {
    const test::CommandRun r = Trainer("time --model='" + empty + "' --iterations=2 --phase=" + phase);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find(empty + ": net 'nothing' has no layers"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("forward_ms_median"), std::string::npos) << "timed an empty net:\n" << r.output;
  }
}

// ---- every error at once ----------------------------------------------------------

// Three independent mistakes: an unknown type (line 4), a bad field (line 8),
// a missing bottom (line 10). relu1 reads conv1's top and ip2 conv2's: they
// are not checked, so they add no error.
const char* kThreeErrors = R"(name: "three"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } shape { dim: 2 } } }
layer { name: "conv1" type: "Convolutoin" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "conv2" type: "Convolution" bottom: "data" top: "conv2"
  convolution_param { num_output: 0 kernel_size: 3 } }
layer { name: "ip2" type: "InnerProduct" bottom: "conv2" top: "ip2" inner_product_param { num_output: 10 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip3" bottom: "label" top: "loss" }
)";

void ExpectThreeErrors(const std::string& message, const std::string& path) {
  const std::vector<std::string> lines = Lines(message);
  ASSERT_EQ(lines.size(), 4u) << message;
  EXPECT_EQ(lines[0].rfind(path + ":4: layer 'conv1' (Convolutoin): type: unknown layer type 'Convolutoin'", 0), 0u)
      << message;
  EXPECT_EQ(lines[1].rfind(path + ":8: layer 'conv2' (Convolution): convolution_param.num_output: ", 0), 0u)
      << message;
  EXPECT_NE(lines[1].find("got 0"), std::string::npos) << message;
  EXPECT_EQ(lines[2], path + ":10: layer 'loss' (SoftmaxWithLoss): bottom[0]: bottom blob 'ip3' (bottom #0) is not "
                             "produced by any earlier layer in this phase")
      << message;
  EXPECT_EQ(lines[3].rfind("3 errors in " + path, 0), 0u) << message;
  for (const char* unchecked : {"'relu1'", "'ip2'"}) EXPECT_EQ(message.find(unchecked), std::string::npos) << message;
}

TEST(NetBuild, ThreeIndependentErrorsAreReportedTogetherInFileOrder) {
  test::TempDir dir;
  const std::string path = Write(dir, "three.prototxt", kThreeErrors);
  ExpectThreeErrors(BuildError(path), path);
}

TEST(NetBuild, TrainerReportsTheThreeErrorsAndExitsNonZero) {
  test::TempDir dir;
  const std::string path = Write(dir, "three.prototxt", kThreeErrors);
  const test::CommandRun r = Trainer("time --model='" + path + "' --iterations=1");
  EXPECT_EQ(r.status, 1) << r.output;
  const size_t at = r.output.find("error: " + path + ":4:");
  ASSERT_NE(at, std::string::npos) << r.output;
  ExpectThreeErrors(r.output.substr(at + 7), path);
}

// One mistake alone reads as it always did: the first error of the three is
// the same text when it is the only one, and there is no count line.
TEST(NetBuild, OneErrorAloneIsTheSameMessage) {
  test::TempDir dir;
  std::string one = kThreeErrors;
  one.replace(one.find("num_output: 0"), 13, "num_output: 4");
  one.replace(one.find("\"ip3\""), 5, "\"ip2\"");
  const std::string path = Write(dir, "three.prototxt", one);
  const std::string alone = BuildError(path);
  const std::string three = BuildError(Write(dir, "three.prototxt", kThreeErrors));
  EXPECT_EQ(alone, Lines(three)[0]);
  EXPECT_EQ(alone.find('\n'), std::string::npos) << alone;
}

// A failed layer's tops are unknown all the way down, in place or through
// the splits; an independent layer after them is still checked.
TEST(NetBuild, ErrorsDoNotCascadeDownstream) {
  test::TempDir dir;
  const std::string path = Write(dir, "chain.prototxt", R"(name: "chain"
layer { name: "data" type: "DummyData" top: "data" dummy_data_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
layer { name: "pool" type: "Pooling" bottom: "data" top: "pool" pooling_param { kernel_size: 9 } }
layer { name: "relu" type: "ReLU" bottom: "pool" top: "pool" }
layer { name: "a" type: "Power" bottom: "pool" top: "a" }
layer { name: "b" type: "Eltwise" bottom: "pool" bottom: "a" top: "b" }
layer { name: "c" type: "Concat" bottom: "b" bottom: "data" top: "c" concat_param { axis: 7 } }
layer { name: "d" type: "Flatten" bottom: "data" top: "d" flatten_param { axis: 9 } }
)");
  const std::string e = BuildError(path);
  const std::vector<std::string> lines = Lines(e);
  ASSERT_EQ(lines.size(), 3u) << e;
  EXPECT_EQ(lines[0].rfind(path + ":3: layer 'pool' (Pooling): pooling_param.kernel_size", 0), 0u) << e;
  EXPECT_EQ(lines[1].rfind(path + ":8: layer 'd' (Flatten): ", 0), 0u) << e;
  EXPECT_EQ(lines[2].rfind("2 errors in " + path, 0), 0u) << e;
}

// The net's own fields and the layers' structure are reported with the rest;
// a layer with both include and exclude rules is checked as if it had
// neither, so its consumers add nothing.
TEST(NetBuild, NetFieldsAndStructureErrorsAreCollected) {
  test::TempDir dir;
  const std::string path = Write(dir, "structure.prototxt", R"(name: "s"
global_grad_scale: -1
layer { name: "data" type: "DummyData" top: "data" dummy_data_param { shape { dim: 2 dim: 3 } } }
layer { name: "r" type: "ReLU" bottom: "data" top: "r" include { phase: TRAIN } exclude { phase: TEST } }
layer { name: "r" type: "ReLU" bottom: "r" top: "r2" }
layer { name: "t" type: "TanH" bottom: "r2" top: "data" }
layer { name: "u" type: "Sigmoid" bottom: "data" top: "u" propagate_down: true propagate_down: false }
)");
  const std::vector<std::string> lines = Lines(BuildError(path));
  ASSERT_EQ(lines.size(), 6u) << BuildError(path);
  EXPECT_EQ(lines[0].rfind(path + ":2: global_grad_scale: must be positive", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind(path + ":4: layer 'r' (ReLU): exclude: specify either include or exclude", 0), 0u)
      << lines[1];
  EXPECT_EQ(lines[2], path + ":5: layer 'r' (ReLU): name: a layer of this name already exists");
  EXPECT_EQ(lines[3], path + ":6: layer 't' (TanH): top[0]: top blob 'data' is already produced by another layer");
  EXPECT_EQ(lines[4].rfind(path + ":7: layer 'u' (Sigmoid): propagate_down: has 2 values for 1 bottoms", 0), 0u)
      << lines[4];
  EXPECT_EQ(lines[5].rfind("5 errors in " + path, 0), 0u) << lines[5];
}

// ---- layer traits -----------------------------------------------------------------

TEST(LayerTraits, RegistryStatesTheTraitsOfEveryType) {
  const std::set<std::string> gemm{"Convolution", "Deconvolution", "InnerProduct"};
  const std::set<std::string> shard{"Data", "ImageData", "HDF5Data"};
  for (const std::string& type : LayerTypes()) {
    const LayerTraits& t = layer_traits(type);
    EXPECT_EQ(t.gemm, gemm.count(type) > 0) << type;
    EXPECT_EQ(t.shard_param != nullptr, shard.count(type) > 0) << type;
    EXPECT_EQ(t.net_input, type == "Input") << type;
    EXPECT_EQ(t.rank_file_param != nullptr, type == "HDF5Output") << type;
    EXPECT_EQ(t.batch_param != nullptr, type == "Data" || type == "DummyData" || type == "Input") << type;
    // The fields a trait names exist, with the members ShardForRank uses.
    if (t.shard_param) {
      const auto* f = LayerParameter::descriptor()->FindFieldByName(t.shard_param);
      ASSERT_NE(f, nullptr) << type;
      EXPECT_NE(f->message_type()->FindFieldByName("shard_id"), nullptr) << type;
      EXPECT_NE(f->message_type()->FindFieldByName("num_shards"), nullptr) << type;
    }
  }
  const LayerTraits& none = layer_traits("NoSuchType");
  EXPECT_FALSE(none.gemm || none.net_input || none.shard_param || none.rank_file_param || none.batch_param);
}

// SetBatchSize's layer by layer part (the whole is tested in
// trainer_time_test.cpp): a source without batch_param keeps its batch.
TEST(LayerTraits, SetLayerBatchChangesOnlyTheSourcesWithBatchParam) {
  LayerParameter images;
  images.set_type("ImageData");
  images.mutable_image_data_param()->set_batch_size(5);
  EXPECT_FALSE(SetLayerBatch(&images, 2));
  EXPECT_EQ(images.image_data_param().batch_size(), 5u);
  LayerParameter data;
  data.set_type("Data");  // no data_param yet: made, with the batch
  EXPECT_TRUE(SetLayerBatch(&data, 2));
  EXPECT_EQ(data.data_param().batch_size(), 2u);
  LayerParameter input;
  input.set_type("Input");
  input.mutable_input_param()->add_shape();  // no dimension: left empty
  input.mutable_input_param()->add_shape()->add_dim(9);
  EXPECT_TRUE(SetLayerBatch(&input, 2));
  EXPECT_EQ(input.input_param().shape(0).dim_size(), 0);
  EXPECT_EQ(input.input_param().shape(1).dim(0), 2);
}

// Rank r of R reads shard s + rS of RS: together the ranks read exactly the
// layer's own positions s, s + S, ..., each once.
TEST(LayerTraits, ShardForRankSplitsEachDataSourceAmongTheRanks) {
  auto positions = [](uint32_t s, uint32_t n, uint32_t limit) {
    std::vector<uint32_t> p;
    for (uint32_t k = s; k < limit; k += n) p.push_back(k);
    return p;
  };
  for (const std::string type : {"Data", "ImageData", "HDF5Data"}) {
    const int ranks = 3;
    std::multiset<uint32_t> together;
    for (int r = 0; r < ranks; ++r) {
      LayerParameter lp;
      lp.set_type(type);
      // The layer reads shard 1 of 2.
      const auto* f = LayerParameter::descriptor()->FindFieldByName(layer_traits(type).shard_param);
      google::protobuf::Message* m = lp.GetReflection()->MutableMessage(&lp, f);
      m->GetReflection()->SetUInt32(m, m->GetDescriptor()->FindFieldByName("shard_id"), 1);
      m->GetReflection()->SetUInt32(m, m->GetDescriptor()->FindFieldByName("num_shards"), 2);
      EXPECT_TRUE(ShardForRank(&lp, r, ranks)) << type;
      const uint32_t s = m->GetReflection()->GetUInt32(*m, m->GetDescriptor()->FindFieldByName("shard_id"));
      const uint32_t n = m->GetReflection()->GetUInt32(*m, m->GetDescriptor()->FindFieldByName("num_shards"));
      EXPECT_EQ(s, 1u + 2u * r) << type;
      EXPECT_EQ(n, 6u) << type;
      for (uint32_t p : positions(s, n, 100)) together.insert(p);
    }
    const std::vector<uint32_t> own = positions(1, 2, 100);
    EXPECT_EQ(std::vector<uint32_t>(together.begin(), together.end()), own) << type;
  }
  // Unset fields are shard 0 of 1.
  LayerParameter data;
  data.set_type("Data");
  ShardForRank(&data, 1, 4);
  EXPECT_EQ(data.data_param().shard_id(), 1u);
  EXPECT_EQ(data.data_param().num_shards(), 4u);
}

TEST(LayerTraits, ShardForRankNamesEachRanksOutputFileAndLeavesOthers) {
  LayerParameter out;
  out.set_type("HDF5Output");
  out.mutable_hdf5_output_param()->set_file_name("out/feat.h5");
  LayerParameter zero = out;
  EXPECT_TRUE(ShardForRank(&out, 2, 3));
  EXPECT_EQ(out.hdf5_output_param().file_name(), "out/feat_rank2.h5");
  EXPECT_TRUE(ShardForRank(&zero, 0, 3));
  EXPECT_EQ(zero.hdf5_output_param().file_name(), "out/feat.h5");
  // One rank, or a layer with neither trait: nothing changes.
  LayerParameter data;
  data.set_type("Data");
  data.mutable_data_param()->set_shard_id(1);
  data.mutable_data_param()->set_num_shards(2);
  const std::string before = data.SerializeAsString();
  EXPECT_FALSE(ShardForRank(&data, 0, 1));
  EXPECT_EQ(data.SerializeAsString(), before);
  LayerParameter relu;
  relu.set_type("ReLU");
  const std::string plain = relu.SerializeAsString();
  EXPECT_FALSE(ShardForRank(&relu, 1, 2));
  EXPECT_EQ(relu.SerializeAsString(), plain);
}

// gemm: FLOAT16 math on BF16 storage is ignored for the GEMM layers, and the
// net says so naming them (not the ReLU, whose math type means nothing).
// net_input: the Input layer's tops are the net's inputs.
TEST(LayerTraits, GemmMathWarningAndNetInputs) {
  NetParameter p;
  ParseTextProto(R"(
    default_forward_type: BFLOAT16 default_backward_type: BFLOAT16 default_forward_math: FLOAT16
    layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" inner_product_param { num_output: 2 } }
    layer { name: "relu" type: "ReLU" bottom: "y" top: "y" })", "bf16.prototxt", &p);
  test::LogLines log;
  Net net(p);
  const auto warned = log.with("these BFLOAT16 layers compute in FLOAT");
  ASSERT_EQ(warned.size(), 1u);
  EXPECT_EQ(warned[0].first, google::GLOG_WARNING);
  EXPECT_EQ(warned[0].second.substr(warned[0].second.rfind(": ") + 2), "ip") << warned[0].second;
  ASSERT_EQ(net.input_blobs().size(), 1u);
  EXPECT_EQ(net.input_blobs()[0], net.blob_by_name("x").get());
}

}  // namespace
}  // namespace cortado
