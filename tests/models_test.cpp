// The ImageNet model folders under models/ (written by scripts/make_models.py):
// - each folder holds one net, one deploy net and one solver, and they parse;
// - the deploy net builds on the CPU, gives "prob" of 10x1000, and its
//   learnable parameters (BatchNorm's running statistics are parameters with
//   lr_mult 0, not learnable) add up to the published count, or, where no
//   count is published, to the count worked out here from the architecture;
// - the solver builds its train and test nets (Data layers swapped for a
//   DummyData of batch 1, so no ImageNet is needed), in FP32 as written and
//   with the fp16 precision applied, and the train net has the deploy net's
//   parameters plus GoogLeNet's auxiliary classifiers;
// - the files state no types, and --precision=fp16 gives them what the FP16
//   variant files stated before (the four net defaults; solver_data_type
//   FLOAT and dynamic loss scaling);
// - the stage "synthetic" swaps the Data layers for one DummyData of
//   train_val's batch and crop, in both phases, and leaves the rest alone.
// The real tool runs every net in the synthetic stage and each precision in
// the models.time.* ctest cases.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "cortado/io/proto_io.hpp"
#include "cortado/net/net.hpp"
#include "cortado/precision.hpp"
#include "cortado/solvers/solver.hpp"
#include "test_paths.hpp"

namespace cortado {
namespace {

using google::protobuf::util::MessageDifferencer;

const std::string kRoot = test::SourceRoot();

// ---- parameter arithmetic ---------------------------------------------------

int64_t Conv(int64_t in, int64_t out, int64_t k, int64_t group = 1, bool bias = true) {
  return out * (in / group) * k * k + (bias ? out : 0);
}
int64_t Fc(int64_t in, int64_t out) { return in * out + out; }
int64_t BnScaleBias(int64_t c) { return 2 * c; }  // gamma and beta; the statistics are not learned

// AlexNet with BatchNorm + Scale after each convolution: the convolutions lose
// their bias, each gains a scale and a bias per channel.
int64_t AlexNetBnCount() {
  struct C { int64_t in, out, k, group; };
  const C convs[] = {{3, 96, 11, 1}, {96, 256, 5, 2}, {256, 384, 3, 1}, {384, 384, 3, 2}, {384, 256, 3, 2}};
  int64_t n = 0;
  for (const C& c : convs) n += Conv(c.in, c.out, c.k, c.group, false) + BnScaleBias(c.out);
  return n + Fc(256 * 6 * 6, 4096) + Fc(4096, 4096) + Fc(4096, 1000);
}

// GoogLeNet's inception module: 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool
// projection; returns the parameters and sets `out` to the output channels.
int64_t Inception(int64_t in, int64_t n1, int64_t r3, int64_t n3, int64_t r5, int64_t n5, int64_t pp, int64_t* out) {
  *out = n1 + n3 + n5 + pp;
  return Conv(in, n1, 1) + Conv(in, r3, 1) + Conv(r3, n3, 3) + Conv(in, r5, 1) + Conv(r5, n5, 5) + Conv(in, pp, 1);
}

// The auxiliary classifier on a 14x14 map: 5x5/3 average pooling to 4x4, a
// 1x1 convolution to 128, fc 1024, fc 1000.
int64_t AuxHead(int64_t in) { return Conv(in, 128, 1) + Fc(128 * 4 * 4, 1024) + Fc(1024, 1000); }

// GoogLeNet without (deploy) or with (train) the two auxiliary classifiers.
int64_t GoogLeNetCount(bool aux) {
  int64_t n = Conv(3, 64, 7) + Conv(64, 64, 1) + Conv(64, 192, 3);
  int64_t c = 192;
  const int64_t table[9][6] = {{64, 96, 128, 16, 32, 32},    {128, 128, 192, 32, 96, 64},
                               {192, 96, 208, 16, 48, 64},   {160, 112, 224, 24, 64, 64},
                               {128, 128, 256, 24, 64, 64},  {112, 144, 288, 32, 64, 64},
                               {256, 160, 320, 32, 128, 128}, {256, 160, 320, 32, 128, 128},
                               {384, 192, 384, 48, 128, 128}};
  for (int i = 0; i < 9; ++i) {
    const int64_t* t = table[i];
    n += Inception(c, t[0], t[1], t[2], t[3], t[4], t[5], &c);
    if (aux && i == 2) n += AuxHead(c);  // after 4a (512 channels)
    if (aux && i == 5) n += AuxHead(c);  // after 4d (528 channels)
  }
  return n + Fc(c, 1000);
}

// ---- the model table -----------------------------------------------------------

struct Model {
  const char* dir;
  int crop;
  int64_t deploy_params;  // learnable parameters of deploy.prototxt
  int64_t train_params;   // learnable parameters of the train net
};

// Published counts: AlexNet (BVLC, grouped) 60,965,224; VGG-16 138,357,544;
// ResNet-18 11,689,512; ResNet-50 25,557,032, plus the 64 biases of conv1,
// which Kaiming He's Caffe release has (the only biased convolution there) and
// these nets keep so that its weights load.
const Model kModels[] = {
    {"alexnet", 227, 60965224, 60965224},
    {"alexnet_bn", 227, AlexNetBnCount(), AlexNetBnCount()},
    {"googlenet", 224, GoogLeNetCount(false), GoogLeNetCount(true)},
    {"vgg16", 224, 138357544, 138357544},
    {"resnet50", 224, 25557032 + 64, 25557032 + 64},
    {"resnet50_nvcaffe", 224, 25557032 + 64, 25557032 + 64},
    {"resnet18", 224, 11689512, 11689512},
};

const char* const kFiles[] = {"train_val.prototxt", "deploy.prototxt", "solver.prototxt"};

void PrintTo(const Model& m, std::ostream* os) { *os << m.dir; }

std::string PathOf(const Model& m, const std::string& file) { return kRoot + "/models/" + m.dir + "/" + file; }

NetParameter ReadNet(const Model& m, const std::string& file) {
  NetParameter p;
  ReadTextProto(PathOf(m, file), &p);
  return p;
}

SolverParameter ReadSolver(const Model& m, const std::string& file) {
  SolverParameter p;
  ReadTextProto(PathOf(m, file), &p);
  return p;
}

int64_t LearnableCount(const Net& net) {
  int64_t n = 0;
  for (size_t i = 0; i < net.learnable_params().size(); ++i)
    if (net.params_lr()[i] != 0) n += net.learnable_params()[i]->count();
  return n;
}

// Replaces each Data layer by a DummyData of batch 1 with the same name,
// tops, rules and crop, so that a net reading ImageNet builds without it.
// Fillers are dropped (constant 0): these nets are built for their structure,
// and filling VGG's 138M weights twice would cost more than the rest of the
// file; the fillers run in the models.time.* cases.
void WithoutImageNet(NetParameter* p) {
  for (LayerParameter& l : *p->mutable_layer()) {
    if (l.has_convolution_param()) {
      l.mutable_convolution_param()->clear_weight_filler();
      l.mutable_convolution_param()->clear_bias_filler();
    }
    if (l.has_inner_product_param()) {
      l.mutable_inner_product_param()->clear_weight_filler();
      l.mutable_inner_product_param()->clear_bias_filler();
    }
    if (l.type() != "Data") continue;
    const int crop = static_cast<int>(l.transform_param().crop_size());
    l.set_type("DummyData");
    l.clear_data_param();
    l.clear_transform_param();
    DummyDataParameter* d = l.mutable_dummy_data_param();
    BlobShape* data = d->add_shape();
    for (int dim : {1, 3, crop, crop}) data->add_dim(dim);
    d->add_shape()->add_dim(1);
  }
}

class Models : public ::testing::TestWithParam<Model> {};

TEST_P(Models, OneFilePerRoleAndTheyParse) {
  const Model& m = GetParam();
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator(kRoot + "/models/" + m.dir))
    if (e.path().extension() == ".prototxt") found.push_back(e.path().filename().string());
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, (std::vector<std::string>{"deploy.prototxt", "solver.prototxt", "train_val.prototxt"}));
  for (const char* f : kFiles) {
    ASSERT_TRUE(FileExists(PathOf(m, f))) << PathOf(m, f);
    if (std::string(f).rfind("solver", 0) == 0) {
      const SolverParameter s = ReadSolver(m, f);
      EXPECT_TRUE(s.has_net()) << f;
      EXPECT_TRUE(FileExists(kRoot + "/" + s.net())) << f << ": net " << s.net();
      EXPECT_EQ(s.snapshot_prefix().rfind(std::string("models/") + m.dir + "/", 0), 0u) << f;
      EXPECT_TRUE(s.has_random_seed()) << f;
      EXPECT_EQ(s.solver_mode(), SolverParameter::GPU) << f;
    } else {
      const NetParameter n = ReadNet(m, f);
      EXPECT_GT(n.layer_size(), 10) << f;
    }
  }
}

TEST_P(Models, DeployBuildsWithThePublishedParameterCount) {
  const Model& m = GetParam();
  NetParameter p = ReadNet(m, "deploy.prototxt");
  ASSERT_EQ(p.layer(0).type(), "Input");
  EXPECT_EQ(p.layer(p.layer_size() - 1).type(), "Softmax");
  for (const LayerParameter& l : p.layer())
    EXPECT_TRUE(l.type() != "SoftmaxWithLoss" && l.type() != "Accuracy" && l.type() != "Data") << l.name();
  p.mutable_state()->set_phase(TEST);
  Net net(p);
  ASSERT_TRUE(net.has_blob("prob"));
  EXPECT_EQ(net.blob_by_name("prob")->shape(), (std::vector<int>{10, 1000}));
  EXPECT_EQ(net.blob_by_name("data")->shape(), (std::vector<int>{10, 3, m.crop, m.crop}));
  ASSERT_EQ(net.output_blobs().size(), 1u);
  EXPECT_EQ(LearnableCount(net), m.deploy_params);
}

// The train_val net as its solver sees it: the real solver file (its fields
// validated by the Solver), TRAIN and TEST nets built from train_val, in FP32
// as written and in FP16 as trainer --precision=fp16 builds them.
TEST_P(Models, SolverBuildsTrainAndTestNets) {
  const Model& m = GetParam();
  for (const bool fp16 : {false, true}) {
    SCOPED_TRACE(fp16 ? "fp16" : "as written");
    SolverParameter s = ReadSolver(m, "solver.prototxt");
    s.set_net(kRoot + "/" + s.net());
    s.clear_snapshot_prefix();
    s.set_snapshot(0);
    if (fp16) ApplyPrecision(Precision::kFp16, &s);
    SolverSetup setup;
    setup.edit_net = [fp16](NetParameter* p) {
      WithoutImageNet(p);
      if (fp16) ApplyPrecision(Precision::kFp16, p);
    };
    const std::unique_ptr<Solver> solver = Solver::Create(s, SourceInfo(), setup);
    EXPECT_EQ(LearnableCount(*solver->net()), m.train_params);
    for (const auto& l : solver->net()->layers())
      EXPECT_EQ(l->forward_type(), fp16 ? FLOAT16 : FLOAT) << l->name();
    EXPECT_EQ(solver->param().dynamic_loss_scale(), fp16);
    EXPECT_EQ(solver->data_type(), FLOAT);
    ASSERT_EQ(solver->test_nets().size(), 1u);
    const Net& test = *solver->test_nets()[0];
    // Top-1 and top-5 accuracy in TEST, besides the loss(es).
    int top1 = 0, top5 = 0;
    for (const auto& l : test.layers())
      if (std::string(l->type()) == "Accuracy")
        ++(l->layer_param().accuracy_param().top_k() == 5 ? top5 : top1);
    EXPECT_GE(top1, 1);
    EXPECT_GE(top5, 1);
  }
}

// The precision comes from the flag alone: the files state no type and no
// scaling, so that --precision=fp16 gives exactly what train_val_fp16 and
// solver_fp16 stated before they were folded in (the net's four defaults;
// solver_data_type FLOAT and dynamic_loss_scale true).
TEST_P(Models, FilesStateNoTypesAndFp16IsTheFormerVariant) {
  const Model& m = GetParam();
  for (const char* f : {"train_val.prototxt", "deploy.prototxt"}) {
    NetParameter net = ReadNet(m, f);
    EXPECT_FALSE(net.has_default_forward_type() || net.has_default_backward_type() || net.has_default_forward_math() ||
                 net.has_default_backward_math())
        << f;
    for (const LayerParameter& l : net.layer())
      EXPECT_FALSE(l.has_forward_type() || l.has_backward_type() || l.has_forward_math() || l.has_backward_math())
          << f << ": " << l.name();
    EXPECT_TRUE(ApplyPrecision(Precision::kFp16, &net).empty()) << f;
    EXPECT_EQ(net.default_forward_type(), FLOAT16) << f;
    EXPECT_EQ(net.default_backward_type(), FLOAT16) << f;
    EXPECT_EQ(net.default_forward_math(), FLOAT) << f;
    EXPECT_EQ(net.default_backward_math(), FLOAT) << f;
  }
  SolverParameter s = ReadSolver(m, "solver.prototxt");
  EXPECT_FALSE(s.has_solver_data_type() || s.has_dynamic_loss_scale());
  EXPECT_TRUE(ApplyPrecision(Precision::kFp16, &s).empty());
  EXPECT_EQ(s.solver_data_type(), FLOAT);
  EXPECT_TRUE(s.dynamic_loss_scale());
}

// train_val in `phase` and `stages`, filtered as the Net filters it.
NetParameter Filtered(const NetParameter& tv, Phase phase, const std::vector<std::string>& stages) {
  NetParameter p = tv;
  p.mutable_state()->set_phase(phase);
  for (const std::string& s : stages) p.mutable_state()->add_stage(s);
  return Net::FilterNet(p);
}

TEST_P(Models, SyntheticStageSwapsTheDataLayersForDummyData) {
  const Model& m = GetParam();
  const NetParameter tv = ReadNet(m, "train_val.prototxt");
  for (const Phase phase : {TRAIN, TEST}) {
    SCOPED_TRACE(phase == TRAIN ? "TRAIN" : "TEST");
    const NetParameter real = Filtered(tv, phase, {});
    const NetParameter synthetic = Filtered(tv, phase, {"synthetic"});
    ASSERT_GE(real.layer_size(), 2);
    ASSERT_EQ(real.layer(0).type(), "Data");
    EXPECT_EQ(static_cast<int>(real.layer(0).transform_param().crop_size()), m.crop);
    // The train batch in both phases: the synthetic test net is a benchmark's.
    const int batch = static_cast<int>(Filtered(tv, TRAIN, {}).layer(0).data_param().batch_size());

    ASSERT_EQ(synthetic.layer_size(), real.layer_size());
    const LayerParameter& d = synthetic.layer(0);
    EXPECT_EQ(d.type(), "DummyData");
    ASSERT_EQ(d.top_size(), 2);
    EXPECT_EQ(d.top(0), "data");
    EXPECT_EQ(d.top(1), "label");
    ASSERT_EQ(d.dummy_data_param().shape_size(), 2);
    const BlobShape& data = d.dummy_data_param().shape(0);
    ASSERT_EQ(data.dim_size(), 4);
    EXPECT_EQ(data.dim(0), batch);
    EXPECT_EQ(data.dim(1), 3);
    EXPECT_EQ(data.dim(2), m.crop);
    EXPECT_EQ(data.dim(3), m.crop);
    ASSERT_EQ(d.dummy_data_param().shape(1).dim_size(), 1);
    EXPECT_EQ(d.dummy_data_param().shape(1).dim(0), batch);
    ASSERT_EQ(d.dummy_data_param().data_filler_size(), 2);
    // Random images (trainer time draws them once: redraw is the tool's, not the file's).
    EXPECT_EQ(d.dummy_data_param().data_filler(0).type(), "gaussian");
    EXPECT_FALSE(d.dummy_data_param().has_redraw());
    EXPECT_EQ(d.dummy_data_param().data_filler(1).type(), "constant");
    EXPECT_EQ(d.dummy_data_param().data_filler(1).value(), 0.f);  // label 0
    // Every other layer is the same in both.
    for (int i = 1; i < real.layer_size(); ++i)
      EXPECT_TRUE(MessageDifferencer::Equals(real.layer(i), synthetic.layer(i)))
          << "layer " << i << " '" << synthetic.layer(i).name() << "' differs from '" << real.layer(i).name() << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(ImageNet, Models, ::testing::ValuesIn(kModels),
                         [](const ::testing::TestParamInfo<Model>& info) { return std::string(info.param.dir); });

// The arithmetic above checked where a count is published: the same helpers
// give BVLC's AlexNet (grouped) 60,965,224, and GoogLeNet's commonly quoted
// "about 7M" without the auxiliary heads.
TEST(ModelsArithmetic, AgreesWithPublishedCounts) {
  const int64_t alexnet = Conv(3, 96, 11) + Conv(96, 256, 5, 2) + Conv(256, 384, 3) + Conv(384, 384, 3, 2) +
                          Conv(384, 256, 3, 2) + Fc(9216, 4096) + Fc(4096, 4096) + Fc(4096, 1000);
  EXPECT_EQ(alexnet, 60965224);
  // Per convolution channel, BatchNorm + Scale bring a scale and a bias where
  // the convolution loses its bias: one parameter more per channel.
  EXPECT_EQ(AlexNetBnCount(), alexnet + 96 + 256 + 384 + 384 + 256);
  EXPECT_GT(GoogLeNetCount(false), 6900000);
  EXPECT_LT(GoogLeNetCount(false), 7000000);
}

}  // namespace
}  // namespace cortado
