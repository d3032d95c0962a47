// The ImageNet model folders under models/ (written by scripts/make_models.py):
// - every file is there and parses;
// - the deploy net builds on the CPU, gives "prob" of 10x1000, and its
//   learnable parameters (BatchNorm's running statistics are parameters with
//   lr_mult 0, not learnable) add up to the published count, or, where no
//   count is published, to the count worked out here from the architecture;
// - each solver builds its train and test nets (Data layers swapped for a
//   DummyData of batch 1, so no ImageNet is needed), and the train net has
//   the deploy net's parameters plus GoogLeNet's auxiliary classifiers;
// - the FP16 files are the FP32 ones plus the four type fields (nets) or the
//   FP16 net and dynamic loss scaling (solvers);
// - the dummy nets are train_val's layers with one DummyData of train_val's
//   batch and crop instead of the Data layers, and no Accuracy.
// The real tool runs on every dummy net in the models.time.* ctest cases.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "cortado/net.hpp"
#include "cortado/solver.hpp"
#include "cortado/util/io.hpp"
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

const char* const kFiles[] = {"train_val.prototxt",       "train_val_fp16.prototxt",       "deploy.prototxt",
                              "train_val_dummy.prototxt", "train_val_dummy_fp16.prototxt", "solver.prototxt",
                              "solver_fp16.prototxt",     "solver_dummy.prototxt",         "solver_dummy_fp16.prototxt"};

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

void ClearNetTypes(NetParameter* p) {
  p->clear_default_forward_type();
  p->clear_default_backward_type();
  p->clear_default_forward_math();
  p->clear_default_backward_math();
}

class Models : public ::testing::TestWithParam<Model> {};

TEST_P(Models, FilesExistAndParse) {
  const Model& m = GetParam();
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

// The train_val net as its solvers see it: the real solver file (its fields
// validated by the Solver), TRAIN and TEST nets built from train_val.
TEST_P(Models, SolverBuildsTrainAndTestNets) {
  const Model& m = GetParam();
  for (const char* file : {"solver.prototxt", "solver_fp16.prototxt"}) {
    SCOPED_TRACE(file);
    SolverParameter s = ReadSolver(m, file);
    s.set_net(kRoot + "/" + s.net());
    s.clear_snapshot_prefix();
    s.set_snapshot(0);
    SolverSetup setup;
    setup.edit_net = WithoutImageNet;
    const std::unique_ptr<Solver> solver = Solver::Create(s, SourceInfo(), setup);
    EXPECT_EQ(LearnableCount(*solver->net()), m.train_params);
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

TEST_P(Models, Fp16NetsAreTheFp32NetsWithTypes) {
  const Model& m = GetParam();
  for (const std::string base : {"train_val", "train_val_dummy"}) {
    const NetParameter fp32 = ReadNet(m, base + ".prototxt");
    NetParameter fp16 = ReadNet(m, base + "_fp16.prototxt");
    EXPECT_EQ(fp16.default_forward_type(), FLOAT16) << base;
    EXPECT_EQ(fp16.default_backward_type(), FLOAT16) << base;
    EXPECT_EQ(fp16.default_forward_math(), FLOAT) << base;
    EXPECT_EQ(fp16.default_backward_math(), FLOAT) << base;
    EXPECT_FALSE(fp32.has_default_forward_type() || fp32.has_default_backward_type()) << base;
    ClearNetTypes(&fp16);
    std::string diff;
    MessageDifferencer d;
    d.ReportDifferencesToString(&diff);
    EXPECT_TRUE(d.Compare(fp32, fp16)) << base << ": " << diff;
  }
}

TEST_P(Models, Fp16SolversAreTheFp32SolversWithLossScaling) {
  const Model& m = GetParam();
  for (const std::string base : {"solver", "solver_dummy"}) {
    const SolverParameter fp32 = ReadSolver(m, base + ".prototxt");
    SolverParameter fp16 = ReadSolver(m, base + "_fp16.prototxt");
    EXPECT_TRUE(fp16.dynamic_loss_scale()) << base;
    EXPECT_EQ(fp16.solver_data_type(), FLOAT) << base;
    EXPECT_EQ(fp16.net(), fp32.net().substr(0, fp32.net().size() - 9) + "_fp16.prototxt") << base;
    EXPECT_EQ(fp16.snapshot_prefix(), fp32.snapshot_prefix() + "_fp16") << base;
    fp16.clear_dynamic_loss_scale();
    fp16.clear_solver_data_type();
    fp16.set_net(fp32.net());
    fp16.set_snapshot_prefix(fp32.snapshot_prefix());
    std::string diff;
    MessageDifferencer d;
    d.ReportDifferencesToString(&diff);
    EXPECT_TRUE(d.Compare(fp32, fp16)) << base << ": " << diff;
  }
}

TEST_P(Models, DummyNetIsTrainValWithoutImageNet) {
  const Model& m = GetParam();
  const NetParameter tv = ReadNet(m, "train_val.prototxt");
  const NetParameter dummy = ReadNet(m, "train_val_dummy.prototxt");
  ASSERT_GE(tv.layer_size(), 2);
  ASSERT_EQ(tv.layer(0).type(), "Data");
  const int batch = static_cast<int>(tv.layer(0).data_param().batch_size());
  EXPECT_EQ(static_cast<int>(tv.layer(0).transform_param().crop_size()), m.crop);

  ASSERT_GE(dummy.layer_size(), 1);
  const LayerParameter& d = dummy.layer(0);
  EXPECT_EQ(d.type(), "DummyData");
  EXPECT_EQ(d.include_size() + d.exclude_size(), 0);
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
  EXPECT_EQ(d.dummy_data_param().data_filler(1).type(), "constant");
  EXPECT_EQ(d.dummy_data_param().data_filler(1).value(), 0.f);  // label 0

  std::vector<const LayerParameter*> expected;
  for (const LayerParameter& l : tv.layer())
    if (l.type() != "Data" && l.type() != "Accuracy") expected.push_back(&l);
  ASSERT_EQ(dummy.layer_size() - 1, static_cast<int>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_TRUE(MessageDifferencer::Equals(*expected[i], dummy.layer(static_cast<int>(i) + 1)))
        << "layer " << i + 1 << " '" << dummy.layer(static_cast<int>(i) + 1).name() << "' differs from train_val's '"
        << expected[i]->name() << "'";

  for (const char* file : {"solver_dummy.prototxt", "solver_dummy_fp16.prototxt"}) {
    const SolverParameter s = ReadSolver(m, file);
    EXPECT_NE(s.net().find("/train_val_dummy"), std::string::npos) << file;
    EXPECT_EQ(s.test_iter_size(), 0) << file;
    EXPECT_EQ(s.test_interval(), 0) << file;
    EXPECT_EQ(s.display(), 10) << file;
    EXPECT_EQ(s.max_iter(), 100) << file;
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
