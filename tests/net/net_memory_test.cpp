// The Net's memory plans (net_memory.hpp): blobs whose diffs are never live
// together share a buffer, a residual sum computes in a bottom nobody reads
// after it, and training gives the same bits as with a buffer per blob
// (the net's fields share_diffs: false, share_data: false).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cortado/context.hpp"
#include "cortado/net/net.hpp"
#include "cortado/util/cuda.hpp"
#include "cortado/net/net_memory.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/util/rng.hpp"
#include "model_files.hpp"
#include "test_util.hpp"
#include "test_scopes.hpp"

namespace cortado {
namespace {

template <typename P>
class NetMemoryTest : public ::testing::Test {};
TYPED_TEST_SUITE(NetMemoryTest, test::AllPairs, test::PairNames);

// `p` with both plans on or off (the net's share_diffs and share_data).
NetParameter WithSharing(NetParameter p, bool on) {
  p.set_share_diffs(on);
  p.set_share_data(on);
  return p;
}

// A small net with what a diff plan must get right: in-place chains (fused
// and not), a Split feeding a residual sum, a Concat of two branches,
// pooling, a Flatten view, a branch that does not propagate back
// (propagate_down: false, so its Split top's diff must stay zero), layers of
// several sizes, and two outputs.
const char* kNet = R"(
  layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
  layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
    convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 }
                        bias_filler { type: "uniform" min: -0.2 max: 0.2 } } }
  layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1" }
  layer { name: "scale1" type: "Scale" bottom: "conv1" top: "conv1"
    scale_param { bias_term: true filler { type: "uniform" min: 0.5 max: 1.5 } } }
  layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
  layer { name: "conv2a" type: "Convolution" bottom: "conv1" top: "conv2a"
    convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "relu2a" type: "ReLU" bottom: "conv2a" top: "relu2a" }
  layer { name: "conv2b" type: "Convolution" bottom: "relu2a" top: "conv2b"
    convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "sum2" type: "Eltwise" bottom: "conv1" bottom: "conv2b" top: "sum2" }
  layer { name: "relu2" type: "ReLU" bottom: "sum2" top: "sum2" }
  layer { name: "pool2" type: "Pooling" bottom: "sum2" top: "pool2"
    pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
  layer { name: "conv3a" type: "Convolution" bottom: "pool2" top: "conv3a"
    convolution_param { num_output: 3 kernel_size: 1 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "conv3b" type: "Convolution" bottom: "pool2" top: "conv3b"
    convolution_param { num_output: 5 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "tanh3b" type: "TanH" bottom: "conv3b" top: "tanh3b" }
  layer { name: "cat3" type: "Concat" bottom: "conv3a" bottom: "tanh3b" top: "cat3" }
  layer { name: "pool3" type: "Pooling" bottom: "cat3" top: "pool3"
    pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
  layer { name: "flat" type: "Flatten" bottom: "pool3" top: "flat" }
  layer { name: "ip1" type: "InnerProduct" bottom: "flat" top: "ip1"
    inner_product_param { num_output: 6 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "sig1" type: "Sigmoid" bottom: "ip1" top: "sig1" }
  layer { name: "ip2" type: "InnerProduct" bottom: "sig1" top: "out"
    inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "aux" type: "InnerProduct" bottom: "pool2" top: "aux" propagate_down: false
    inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.3 } } })";

template <typename P>
NetParameter MakeNet(const std::string& text) {
  NetParameter p;
  ParseTextProto(text, "net.prototxt", &p);
  p.set_default_forward_type(type_of<typename P::Ftype>());
  p.set_default_backward_type(type_of<typename P::Btype>());
  p.set_force_backward(true);
  p.mutable_state()->set_phase(TRAIN);
  return p;
}

struct NetPair {
  std::unique_ptr<Net> shared, plain;
};

NetPair Build(const NetParameter& p, std::shared_ptr<const Context> ctx = nullptr) {
  NetPair n;
  n.shared = std::make_unique<Net>(WithSharing(p, true), SourceInfo(), ctx);
  n.plain = std::make_unique<Net>(WithSharing(p, false), SourceInfo(), ctx);
  for (size_t i = 0; i < n.shared->params().size(); ++i)
    test::SetData(n.plain->params()[i].get(), test::GetData(*n.shared->params()[i]));
  return n;
}

size_t DistinctData(const Net& net) {
  std::set<const Tensor*> t;
  for (const auto& b : net.blobs()) t.insert(&b->data());
  return t.size();
}

const Blob& BlobNamed(const Net& net, const std::string& name) { return *net.blob_by_name(name); }

size_t DistinctDiffs(const Net& net) {
  std::set<const Tensor*> t;
  for (const auto& b : net.blobs()) t.insert(&b->diff());
  return t.size();
}

// Blobs of `net` that share a diff buffer without sharing their data (a
// view, Flatten's top, shares both, as in Caffe).
int DiffsSharedByTwoValues(const Net& net) {
  int n = 0;
  for (size_t i = 0; i < net.blobs().size(); ++i)
    for (size_t j = i + 1; j < net.blobs().size(); ++j)
      n += &net.blobs()[i]->diff() == &net.blobs()[j]->diff() && &net.blobs()[i]->data() != &net.blobs()[j]->data();
  return n;
}

// Forward and backward `rounds` times on both nets, with the same inputs and
// output gradients (DummyData-free nets; a net's own data layers are reseeded).
template <typename P>
void RunBoth(NetPair* n, int rounds, uint32_t seed = 5) {
  for (int r = 0; r < rounds; ++r) {
    for (Net* net : {n->shared.get(), n->plain.get()}) {
      set_random_seed(1000 + r);
      for (size_t i = 0; i < net->input_blobs().size(); ++i)
        test::FillUniform(net->input_blobs()[i], -1.5, 1.5, seed + 17 * static_cast<uint32_t>(r + i));
      net->ClearParamDiffs();
      net->Forward();
      for (size_t o = 0; o < net->output_blobs().size(); ++o) {
        Blob* top = net->output_blobs()[o];
        if (net->blob_loss_weight(net->output_blob_indices()[o]) != 0) continue;  // the loss weight stays
        test::SetDiff(top, test::RandomVector(top->count(), 97 + static_cast<uint32_t>(o + 3 * r)),
                      type_of<typename P::Btype>());
      }
      net->Backward();
    }
  }
}

// Bit for bit: outputs, input gradients, parameters and their gradients.
void ExpectSameBits(const NetPair& n) {
  const Net& a = *n.shared;
  const Net& b = *n.plain;
  for (size_t o = 0; o < a.output_blobs().size(); ++o)
    ASSERT_EQ(test::GetData(*a.output_blobs()[o]), test::GetData(*b.output_blobs()[o])) << "output " << o;
  for (size_t i = 0; i < a.input_blobs().size(); ++i)
    ASSERT_EQ(test::GetDiff(*a.input_blobs()[i]), test::GetDiff(*b.input_blobs()[i])) << "input diff " << i;
  for (size_t i = 0; i < a.params().size(); ++i) {
    ASSERT_EQ(test::GetData(*a.params()[i]), test::GetData(*b.params()[i])) << "param data " << i;
    ASSERT_EQ(test::GetDiff(*a.params()[i]), test::GetDiff(*b.params()[i])) << "param diff " << i;
  }
}

// In every layer that runs backward, two different blobs it touches never
// hold one diff buffer unless they did without the plan (a view).
void ExpectNoSharingWithinALayer(const Net& shared, const Net& plain) {
  for (size_t i = 0; i < shared.layers().size(); ++i) {
    if (!shared.layer_need_backward()[i]) continue;
    std::vector<const Blob*> a, b;
    for (const BlobVec* v : {&shared.bottom_vecs()[i], &shared.top_vecs()[i]}) a.insert(a.end(), v->begin(), v->end());
    for (const BlobVec* v : {&plain.bottom_vecs()[i], &plain.top_vecs()[i]}) b.insert(b.end(), v->begin(), v->end());
    for (size_t x = 0; x < a.size(); ++x)
      for (size_t y = x + 1; y < a.size(); ++y) {
        if (a[x] == a[y] || &a[x]->diff() != &a[y]->diff()) continue;
        EXPECT_EQ(&b[x]->diff(), &b[y]->diff())
            << "layer " << shared.layer_names()[i] << " shares a diff between two of its blobs";
      }
  }
}

TYPED_TEST(NetMemoryTest, SharesBuffersAndTrainsToTheSameBits) {
  NetPair n = Build(MakeNet<TypeParam>(kNet));
  // The plan shared something, and the unplanned net has a buffer per blob.
  EXPECT_LT(DistinctDiffs(*n.shared), DistinctDiffs(*n.plain));
  ExpectNoSharingWithinALayer(*n.shared, *n.plain);
  RunBoth<TypeParam>(&n, 3);
  ExpectSameBits(n);
}

TYPED_TEST(NetMemoryTest, InputsOutputsAndUnwrittenDiffsKeepTheirOwn) {
  // Losses instead of force_backward (which would make aux propagate too).
  std::string text = kNet;
  for (const std::string top : {"top: \"out\"", "top: \"aux\""})
    text.replace(text.find(top), top.size(), top + " loss_weight: 1");
  NetParameter p = MakeNet<TypeParam>(text);
  p.set_force_backward(false);
  NetPair n = Build(p);
  const Net& net = *n.shared;
  std::map<const Tensor*, int> users;
  for (const auto& b : net.blobs()) ++users[&b->diff()];
  for (const Blob* b : net.input_blobs()) EXPECT_EQ(users[&b->diff()], 1);
  for (const Blob* b : net.output_blobs()) EXPECT_EQ(users[&b->diff()], 1);
  // pool2 feeds conv3a, conv3b and aux (which does not propagate): the
  // Split's top for aux is read by the Split's backward but written by no
  // layer, so it keeps its own zero buffer.
  int aux_split_tops = 0;
  for (size_t i = 0; i < net.blobs().size(); ++i) {
    const std::string& name = net.blob_names()[i];
    if (name.find("pool2_pool2_") == 0 && name.find("_split_2") != std::string::npos) {
      ++aux_split_tops;
      EXPECT_EQ(users[&net.blobs()[i]->diff()], 1) << name;
      EXPECT_EQ(net.blobs()[i]->asum_diff(), 0.0) << name;
    }
  }
  EXPECT_EQ(aux_split_tops, 1) << "the test expects the Split top pool2_pool2_0_split_2";
  RunBoth<TypeParam>(&n, 2);
  for (size_t i = 0; i < net.blobs().size(); ++i) {
    const std::string& name = net.blob_names()[i];
    if (name.find("pool2_pool2_") == 0 && name.find("_split_2") != std::string::npos)
      EXPECT_EQ(net.blobs()[i]->asum_diff(), 0.0) << name << " after backward";
  }
  ExpectSameBits(n);
}

// A new batch size: the blobs whose count changes leave their shared
// buffers, and the results stay those of the unshared net.
TYPED_TEST(NetMemoryTest, ReshapedNetStaysCorrect) {
  NetPair n = Build(MakeNet<TypeParam>(kNet));
  RunBoth<TypeParam>(&n, 1);
  for (Net* net : {n.shared.get(), n.plain.get()}) {
    net->input_blobs()[0]->Reshape({3, 3, 8, 8});
    net->Reshape();
  }
  ExpectNoSharingWithinALayer(*n.shared, *n.plain);
  RunBoth<TypeParam>(&n, 2, 9);
  ExpectSameBits(n);
}

// The data plan: sum2 = conv1 + conv2b computes in conv2b's memory (its
// producer, a Convolution, reads x and dy backward, and sum2 is its only
// reader); conv1 feeds a Split and keeps its own.
TYPED_TEST(NetMemoryTest, SumComputesInTheBottomNobodyReadsAfterIt) {
  NetPair n = Build(MakeNet<TypeParam>(kNet));
  const Net& a = *n.shared;
  const Net& b = *n.plain;
  EXPECT_EQ(&BlobNamed(a, "conv2b").data(), &BlobNamed(a, "sum2").data());
  EXPECT_NE(&BlobNamed(a, "conv1").data(), &BlobNamed(a, "sum2").data());
  EXPECT_NE(&BlobNamed(b, "conv2b").data(), &BlobNamed(b, "sum2").data());
  EXPECT_EQ(DistinctData(a) + 1, DistinctData(b));
  RunBoth<TypeParam>(&n, 2);
  ExpectSameBits(n);
}

// A projection block's residual add fused into the BatchNorm chain before it
// (net_fusion.hpp), on the layer's own kernels, which allow aliased operands:
// the sum is computed in the shortcut's memory and the head's input gradient
// may share the sum's buffer, with the unshared net's bits. (Where cuDNN's
// BatchNorm is planned, neither: net_layout_test's
// GpuCudnnBatchNormRunsAProjectionBlock.)
TYPED_TEST(NetMemoryTest, FusedResidualOnTheOwnKernelsSharesAndMatches) {
  const char* block = R"(
    layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 6 dim: 5 } } }
    layer { name: "conv1" type: "Convolution" bottom: "data" top: "a"
      convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "gaussian" std: 0.5 } } }
    layer { name: "bn1" type: "BatchNorm" bottom: "a" top: "a" }
    layer { name: "conv2" type: "Convolution" bottom: "data" top: "b"
      convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.4 } } }
    layer { name: "bn2" type: "BatchNorm" bottom: "b" top: "b" }
    layer { name: "scale2" type: "Scale" bottom: "b" top: "b"
      scale_param { bias_term: true filler { type: "uniform" min: 0.5 max: 1.5 } } }
    layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b" top: "c" }
    layer { name: "relu" type: "ReLU" bottom: "c" top: "c" }
    layer { name: "conv3" type: "Convolution" bottom: "c" top: "d"
      convolution_param { num_output: 2 kernel_size: 1 weight_filler { type: "gaussian" std: 0.5 } } })";
  NetPair n = Build(MakeNet<TypeParam>(block));
  const Net& a = *n.shared;
  ASSERT_TRUE(a.blob_by_name("b/bn_input")) << "bn2 no longer reads a renamed bottom";
  EXPECT_EQ(&BlobNamed(a, "b/bn_input").diff(), &BlobNamed(a, "c").diff());
  EXPECT_NE(&BlobNamed(a, "a").diff(), &BlobNamed(a, "c").diff());
  EXPECT_EQ(&BlobNamed(a, "a").data(), &BlobNamed(a, "c").data());
  RunBoth<TypeParam>(&n, 2);
  ExpectSameBits(n);
}

// Where a bottom's data is still read, the sum keeps a buffer of its own.
TEST(NetMemory, DataPlanLeavesBottomsThatAreRead) {
  using P = test::TypePair<float, float>;
  // Whether sum2 computes in the memory of one of its bottoms.
  auto sums_in_a_bottom = [](const NetParameter& p) {
    Net net(p);
    const Tensor* sum = &BlobNamed(net, "sum2").data();
    const auto& names = net.layer_names();
    const size_t layer = static_cast<size_t>(std::find(names.begin(), names.end(), "sum2") - names.begin());
    const BlobVec& bottoms = net.bottom_vecs().at(layer);
    return std::any_of(bottoms.begin(), bottoms.end(), [&](const Blob* b) { return &b->data() == sum; });
  };
  auto edited = [](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  EXPECT_TRUE(sums_in_a_bottom(MakeNet<P>(kNet)));
  // PROD reads its bottoms and its top backward.
  EXPECT_FALSE(sums_in_a_bottom(
      MakeNet<P>(edited(kNet, "top: \"sum2\" }", "top: \"sum2\" eltwise_param { operation: PROD } }"))));
  // A TanH between conv2b and the sum reads its output, the sum's bottom, backward.
  const std::string with_tanh =
      edited(edited(kNet, "bottom: \"conv2b\" top: \"sum2\"", "bottom: \"t2b\" top: \"sum2\""),
             "  layer { name: \"sum2\"",
             "  layer { name: \"tanh2b\" type: \"TanH\" bottom: \"conv2b\" top: \"t2b\" }\n  layer { name: \"sum2\"");
  EXPECT_FALSE(sums_in_a_bottom(MakeNet<P>(with_tanh)));
  // A net without backward (a TEST net, feature extraction) shows every blob's own values.
  NetParameter test_net = MakeNet<P>(kNet);
  test_net.mutable_state()->set_phase(TEST);
  test_net.set_force_backward(false);
  EXPECT_FALSE(sums_in_a_bottom(test_net));
  // Off by the net's field share_data, the diff plan still on.
  NetParameter off = MakeNet<P>(kNet);
  off.set_share_data(false);
  EXPECT_FALSE(sums_in_a_bottom(off));
  Net net(off);
  EXPECT_NE(&BlobNamed(net, "sum2").data(), &BlobNamed(net, "conv2b").data());
  EXPECT_GT(DiffsSharedByTwoValues(net), 0) << "share_data: false turned the diff plan off too";
}

// share_diffs: false gives every blob its own diff buffer; a net without
// backward plans nothing either.
TEST(NetMemory, OffByTheFieldAndForNetsWithoutBackward) {
  NetParameter p = MakeNet<test::TypePair<float, float>>(kNet);
  EXPECT_GT(DiffsSharedByTwoValues(Net(p)), 0) << "the default (share_diffs: true) shares";
  {
    NetParameter off = p;
    off.set_share_diffs(false);
    Net net(off);
    EXPECT_EQ(DiffsSharedByTwoValues(net), 0);
    EXPECT_EQ(&BlobNamed(net, "sum2").data(), &BlobNamed(net, "conv2b").data())
        << "share_diffs: false turned the data plan off too";
  }
  p.set_force_backward(false);  // no loss: nothing runs backward
  Net net(p);
  EXPECT_EQ(DiffsSharedByTwoValues(net), 0);
  EXPECT_EQ(ShareDiffBuffers(net).groups, 0);
}

// The model files (synthetic stage): the plan holds its rules on every one,
// and ResNet-18 trains one step to the same bits with and without it.
TEST(NetMemory, ModelFilesShareWithinTheRules) {
  const std::pair<const char*, Precision> models[] = {{"resnet50", Precision::kFp16},
                                                      {"resnet50_nvcaffe", Precision::kFp16},
                                                      {"googlenet", Precision::kFp32},
                                                      {"resnet18", Precision::kFp32}};
  for (const auto& [m, precision] : models) {
    NetParameter p = test::SyntheticModelNet(m, precision);
    SetBatchSize(&p, 1);
    p.mutable_state()->set_phase(TRAIN);
    NetPair n = Build(p);
    const size_t shared = DistinctDiffs(*n.shared), plain = DistinctDiffs(*n.plain);
    EXPECT_LT(shared, plain) << m;
    // ResNet-50: about 20 buffers where there were about 110.
    if (std::string(m).find("resnet50") == 0) EXPECT_LT(shared * 3, plain) << m << ": " << shared << " against " << plain;
    ExpectNoSharingWithinALayer(*n.shared, *n.plain);
    // The data plan: one residual sum per block computes in its last
    // BatchNorm's output (ResNet-50 16 blocks, ResNet-18 8, GoogLeNet none).
    const size_t blocks = std::string(m).find("resnet50") == 0 ? 16 : std::string(m).find("resnet18") == 0 ? 8 : 0;
    EXPECT_EQ(DistinctData(*n.shared) + blocks, DistinctData(*n.plain)) << m;
  }
}

// ---- BatchNorm out of place ------------------------------------------------------------

std::vector<std::string> Names(const google::protobuf::RepeatedPtrField<std::string>& r) {
  return std::vector<std::string>(r.begin(), r.end());
}
using Strings = std::vector<std::string>;

TEST(NetMemory, BatchNormOutOfPlaceRenamesItsProducersTop) {
  NetParameter p = MakeNet<test::TypePair<float, float>>(kNet);
  EXPECT_EQ(BatchNormOutOfPlace(&p), 1);
  EXPECT_EQ(Names(p.layer(1).top()), Strings{"conv1/bn_input"});  // conv1
  EXPECT_EQ(Names(p.layer(2).bottom()), Strings{"conv1/bn_input"});  // bn1
  EXPECT_EQ(Names(p.layer(2).top()), Strings{"conv1"});
  EXPECT_EQ(Names(p.layer(3).bottom()), Strings{"conv1"});  // scale1, in place after it as before
  EXPECT_EQ(Names(p.layer(5).bottom()), Strings{"conv1"});  // conv2a reads the BatchNorm's output
  EXPECT_EQ(BatchNormOutOfPlace(&p), 0) << "a second pass finds nothing in place";

  // A free name: "conv1/bn_input" is taken.
  std::string text = kNet;
  const std::string aux = "top: \"aux\"";
  text.replace(text.find(aux), aux.size(), "top: \"conv1/bn_input\"");
  NetParameter q = MakeNet<test::TypePair<float, float>>(text);
  EXPECT_EQ(BatchNormOutOfPlace(&q), 1);
  EXPECT_EQ(Names(q.layer(2).bottom()), Strings{"conv1/bn_input2"});

  // Left alone: the producer's top is touched in place before the BatchNorm,
  // the producer has no bottoms (an Input a user fills by name), the
  // BatchNorm is not in place.
  for (const char* net : {R"(
      layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }
      layer { name: "conv" type: "Convolution" bottom: "x" top: "c" convolution_param { num_output: 2 kernel_size: 1 } }
      layer { name: "relu" type: "ReLU" bottom: "c" top: "c" }
      layer { name: "bn" type: "BatchNorm" bottom: "c" top: "c" })",
                          R"(
      layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }
      layer { name: "bn" type: "BatchNorm" bottom: "x" top: "x" })",
                          R"(
      layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }
      layer { name: "conv" type: "Convolution" bottom: "x" top: "c" convolution_param { num_output: 2 kernel_size: 1 } }
      layer { name: "bn" type: "BatchNorm" bottom: "c" top: "b" })"}) {
    NetParameter r = MakeNet<test::TypePair<float, float>>(net);
    const std::string before = r.DebugString();
    EXPECT_EQ(BatchNormOutOfPlace(&r), 0) << net;
    EXPECT_EQ(r.DebugString(), before);
  }

  // ResNet-50's files: every BatchNorm (53) follows its convolution in place.
  for (const char* m : {"resnet50", "resnet50_nvcaffe"}) {
    NetParameter r = Net::FilterNet(test::SyntheticModelNet(m, Precision::kFp16));
    EXPECT_EQ(BatchNormOutOfPlace(&r), 53) << m;
  }
}

// The Net applies it to TRAIN nets: the same bits as the in-place net
// (the net's field batch_norm_out_of_place: false), the BatchNorm's blob
// showing the same values, and the producer's output under the new name.
TYPED_TEST(NetMemoryTest, BatchNormOutOfPlaceTrainsToTheSameBits) {
  const NetParameter p = MakeNet<TypeParam>(kNet);
  NetParameter in_place = p;
  in_place.set_batch_norm_out_of_place(false);
  NetPair n;
  n.shared = std::make_unique<Net>(p, SourceInfo());  // the default: out of place
  n.plain = std::make_unique<Net>(in_place, SourceInfo());
  for (size_t i = 0; i < n.shared->params().size(); ++i)
    test::SetData(n.plain->params()[i].get(), test::GetData(*n.shared->params()[i]));
  ASSERT_NE(n.shared->blob_by_name("conv1/bn_input"), nullptr);
  EXPECT_EQ(n.plain->blob_by_name("conv1/bn_input"), nullptr);
  RunBoth<TypeParam>(&n, 3);
  ExpectSameBits(n);
  EXPECT_EQ(test::GetData(BlobNamed(*n.shared, "conv1")), test::GetData(BlobNamed(*n.plain, "conv1")));

  NetParameter t = p;
  t.mutable_state()->set_phase(TEST);
  EXPECT_EQ(Net(t, SourceInfo()).blob_by_name("conv1/bn_input"), nullptr) << "a TEST net keeps it in place";
}

TEST(NetMemory, ResNet18StepGivesTheSameBits) {
  NetParameter p = test::SyntheticModelNet("resnet18", Precision::kFp32);
  SetBatchSize(&p, 1);
  p.mutable_state()->set_phase(TRAIN);
  NetPair n = Build(p);
  RunBoth<test::TypePair<float, float>>(&n, 1);
  ExpectSameBits(n);
}

// On the GPU: the same net, planned and not, within the rounding that the
// GPU's kernels may add between two builds (cuDNN chooses its algorithms per
// net), as net_fusion_test.cpp allows.
TYPED_TEST(NetMemoryTest, GpuSharesAndMatchesUnshared) {
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  std::shared_ptr<Context> gpu = Context::Create(0);
  test::RestoreStream restore;
  gpu->Activate();
  NetPair n = Build(MakeNet<TypeParam>(kNet), gpu);
  EXPECT_LT(DistinctDiffs(*n.shared), DistinctDiffs(*n.plain));
  RunBoth<TypeParam>(&n, 2);
  gpu->Synchronize();
  const double ulps = test::is_half_pair<TypeParam>() ? 8 : 64;
  const Net& a = *n.shared;
  const Net& b = *n.plain;
  for (size_t i = 0; i < a.params().size(); ++i) {
    const std::vector<double> got = test::GetDiff(*a.params()[i]), want = test::GetDiff(*b.params()[i]);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      const double tol = ulps * type_epsilon<test::Coarser<TypeParam>>() * std::max(1.0, std::fabs(want[k]));
      ASSERT_NEAR(got[k], want[k], tol) << "param diff " << i << " index " << k;
    }
  }
#endif
}

}  // namespace
}  // namespace cortado
