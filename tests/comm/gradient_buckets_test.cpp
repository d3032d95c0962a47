// The plan of the ranks' gradient sums (PlanGradientBuckets) and the
// GradientReducer that follows it: bucket sizes of about total/N per type,
// reverse layer order, every trained parameter in exactly one bucket, and,
// through a recording asynchronous communicator of two ranks, each bucket's
// sum started right after the backward of the layer the plan names (the
// gradients complete at that moment are exactly those of the layers from the
// last down to it).
#include "cortado/comm/gradient_reducer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cortado/io/proto_io.hpp"
#include "cortado/net/net.hpp"

namespace cortado {
namespace {

// FLOAT and FLOAT16 gradients; ip3 and ip4 share their weights (complete
// after ip3's backward, the first user in net order); ip5's bias is frozen
// (lr_mult 0: not summed).
const char* kNet = R"(
name: "buckets"
state { phase: TRAIN }
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 4 dim: 16 } shape { dim: 4 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 2 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param { num_output: 48 weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2" forward_type: FLOAT16 backward_type: FLOAT16
  inner_product_param { num_output: 40 weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu2" type: "ReLU" bottom: "ip2" top: "ip2" }
layer { name: "ip3" type: "InnerProduct" bottom: "ip2" top: "ip3" param { name: "shared" } param { }
  inner_product_param { num_output: 40 weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "tanh3" type: "TanH" bottom: "ip3" top: "ip3" }
layer { name: "ip4" type: "InnerProduct" bottom: "ip3" top: "ip4" param { name: "shared" } param { }
  inner_product_param { num_output: 40 weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "tanh4" type: "TanH" bottom: "ip4" top: "ip4" }
layer { name: "ip5" type: "InnerProduct" bottom: "ip4" top: "ip5" param { } param { lr_mult: 0 }
  inner_product_param { num_output: 10 weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip5" bottom: "label" top: "loss" }
)";

Net MakeNet() {
  NetParameter p;
  ParseTextProto(kNet, "buckets.prototxt", &p);
  return Net(p);
}

// learnable param -> the layer after whose backward the net reports it complete.
std::vector<int> ReadyLayers(const Net& net) {
  std::vector<int> layer_of(net.learnable_params().size(), -2);
  const auto& ready = net.params_ready_after_layer();
  for (size_t l = 0; l < ready.size(); ++l)
    for (int i : ready[l]) layer_of[static_cast<size_t>(i)] = static_cast<int>(l);
  return layer_of;
}

int64_t Count(const Net& net, int i) { return static_cast<int64_t>(net.learnable_params()[static_cast<size_t>(i)]->count()); }

int LayerIndex(const Net& net, const std::string& name) {
  const auto& names = net.layer_names();
  return static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin());
}

TEST(GradientBuckets, TheNetUnderTestHasWhatThePlanMustHandle) {
  Net net = MakeNet();
  const std::vector<int> layer_of = ReadyLayers(net);
  std::set<Type> types;
  int untrained = 0;
  for (size_t i = 0; i < layer_of.size(); ++i) {
    EXPECT_GE(layer_of[i], 0) << "param " << i << " is never reported complete";
    types.insert(net.learnable_params()[i]->diff().type());
    untrained += !TrainedParam(net, static_cast<int>(i));
  }
  EXPECT_EQ(types, (std::set<Type>{FLOAT, FLOAT16}));
  EXPECT_EQ(untrained, 1);                 // ip5's bias
  EXPECT_EQ(net.learnable_params().size(), 9u);  // the shared weights once
}

TEST(GradientBuckets, OneBucketPerTypeAfterBackwardWithoutBuckets) {
  Net net = MakeNet();
  for (int n : {0, 1}) {
    const std::vector<GradientBucket> plan = PlanGradientBuckets(net, n);
    ASSERT_EQ(plan.size(), 2u);
    EXPECT_EQ(plan[0].type, FLOAT);  // kAllTypes' order
    EXPECT_EQ(plan[1].type, FLOAT16);
    for (const GradientBucket& b : plan) {
      EXPECT_EQ(b.ready_layer, GradientBucket::kAfterBackward);
      EXPECT_TRUE(std::is_sorted(b.params.begin(), b.params.end())) << "learnable_params order";
      int64_t count = 0;
      for (int i : b.params) {
        EXPECT_TRUE(TrainedParam(net, i));
        EXPECT_EQ(net.learnable_params()[static_cast<size_t>(i)]->diff().type(), b.type);
        count += Count(net, i);
      }
      EXPECT_EQ(b.count, count);
    }
  }
}

TEST(GradientBuckets, SizesOrderAndEveryTrainedParameterOnce) {
  Net net = MakeNet();
  const std::vector<int> layer_of = ReadyLayers(net);
  std::map<Type, int64_t> total;
  for (size_t i = 0; i < layer_of.size(); ++i)
    if (TrainedParam(net, static_cast<int>(i))) total[net.learnable_params()[i]->diff().type()] += Count(net, static_cast<int>(i));
  for (int n : {2, 3, 4, 5, 8, 64}) {
    SCOPED_TRACE("reduce_buckets " + std::to_string(n));
    const std::vector<GradientBucket> plan = PlanGradientBuckets(net, n);
    std::vector<int> seen(layer_of.size(), 0);
    std::map<Type, int64_t> summed;
    std::map<Type, int> buckets;
    std::map<Type, int> last_layer;  // per type, the last ready layer packed: backward order
    int previous_ready = static_cast<int>(net.layers().size());
    bool after_backward = false;
    for (const GradientBucket& b : plan) {
      ASSERT_FALSE(b.params.empty());
      const int64_t size = (total[b.type] + n - 1) / n;
      int64_t count = 0;
      for (int i : b.params) {
        ++seen[static_cast<size_t>(i)];
        EXPECT_TRUE(TrainedParam(net, i)) << "param " << i;
        EXPECT_EQ(net.learnable_params()[static_cast<size_t>(i)]->diff().type(), b.type);
        auto it = last_layer.find(b.type);
        if (it != last_layer.end()) {
          EXPECT_LE(layer_of[static_cast<size_t>(i)], it->second) << "param " << i;
        }
        last_layer[b.type] = layer_of[static_cast<size_t>(i)];
        count += Count(net, i);
      }
      EXPECT_EQ(b.count, count);
      summed[b.type] += b.count;
      ++buckets[b.type];
      if (b.ready_layer == GradientBucket::kAfterBackward) {
        // Each type's rest, after every bucket that closed during backward.
        after_backward = true;
        EXPECT_LT(b.count, size);
      } else {
        EXPECT_FALSE(after_backward) << "a bucket closed in backward after the ones left for after it";
        // Closed by the layer that completed its last parameter, as soon as
        // it reached the size, in reverse layer order.
        EXPECT_EQ(b.ready_layer, layer_of[static_cast<size_t>(b.params.back())]);
        EXPECT_GE(b.count, size);
        EXPECT_LT(b.count - Count(net, b.params.back()), size);
        EXPECT_LE(b.ready_layer, previous_ready);
        previous_ready = b.ready_layer;
      }
    }
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], TrainedParam(net, static_cast<int>(i)) ? 1 : 0) << "param " << i;
    for (const auto& [type, t] : total) {
      EXPECT_EQ(summed[type], t) << type_name(type);
      EXPECT_LE(buckets[type], n) << type_name(type);
    }
  }
  // The shared weights (learnable param 4, after ip1's and ip2's two each)
  // are complete after ip3, their first user in net order.
  EXPECT_EQ(layer_of[4], LayerIndex(net, "ip3"));
  EXPECT_EQ(layer_of[6], LayerIndex(net, "ip4"));  // ip4's own bias
}

// Two ranks, asynchronous like NCCL, that sum nothing: records each sum's
// gradients and type, and calls `on_start` as the sum starts.
class RecordingComm : public Communicator {
 public:
  struct Sum {
    Type type;
    std::vector<const void*> data;
    bool started_in_backward;
  };
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const char* engine() const override { return "recording"; }
  bool asynchronous() const override { return true; }
  void AllReduceSum(void*, int64_t, Type) override {}
  void AllReduceSum(const std::vector<Span>& spans, Type type, CUstream_st*) override { Record(spans, type, false); }
  void StartAllReduceSum(const std::vector<Span>& spans, Type type, CUstream_st*) override {
    Record(spans, type, true);
    if (on_start) on_start();
  }
  void WaitSums(CUstream_st*) override { ++waits; }
  void Broadcast(void*, int64_t, int) override {}
  int64_t Max(int64_t value) override { return value; }
  using Communicator::Abort;
  [[noreturn]] void Abort(int, const std::string&) override { std::abort(); }

  std::vector<Sum> sums;
  int waits = 0;
  std::function<void()> on_start;

 private:
  void Record(const std::vector<Span>& spans, Type type, bool started) {
    Sum s{type, {}, started};
    for (const Span& span : spans) s.data.push_back(span.data);
    sums.push_back(s);
  }
};

// The gradient buffers of a bucket's parameters, as the reducer hands them to
// a host engine.
std::vector<const void*> Buffers(Net& net, const GradientBucket& b) {
  std::vector<const void*> out;
  for (int i : b.params) {
    Tensor& d = net.learnable_params()[static_cast<size_t>(i)]->diff();
    out.push_back(d.mutable_data_raw(d.type()));
  }
  return out;
}

TEST(GradientBuckets, TheReducerStartsEachBucketAfterThePlannedLayer) {
  for (int n : {2, 3, 4, 64}) {
    SCOPED_TRACE("reduce_buckets " + std::to_string(n));
    Net net = MakeNet();
    auto comm = std::make_shared<RecordingComm>();
    GradientReducer reducer(&net, comm, /*reduce_alone=*/false, n);
    const std::vector<GradientBucket> plan = PlanGradientBuckets(net, n);
    ASSERT_EQ(reducer.buckets().size(), plan.size());
    const std::vector<int> layer_of = ReadyLayers(net);
    // At each start: which trained gradients backward has written so far.
    std::vector<std::vector<bool>> written;
    comm->on_start = [&] {
      std::vector<bool> w;
      for (size_t i = 0; i < layer_of.size(); ++i) w.push_back(net.learnable_params()[i]->asum_diff() > 0);
      written.push_back(w);
    };
    for (int step = 0; step < 2; ++step) {  // the reducer starts over after each Reduce
      comm->sums.clear();
      written.clear();
      net.ClearParamDiffs();
      reducer.set_last_backward(true);
      net.Forward();
      net.Backward();
      reducer.set_last_backward(false);
      reducer.Reduce();
      ASSERT_EQ(comm->sums.size(), plan.size());
      for (size_t b = 0; b < plan.size(); ++b) {
        SCOPED_TRACE("bucket " + std::to_string(b));
        EXPECT_TRUE(comm->sums[b].started_in_backward);
        EXPECT_EQ(comm->sums[b].type, plan[b].type);
        EXPECT_EQ(comm->sums[b].data, Buffers(net, plan[b]));
        // Started after layer ready_layer's backward and before the next:
        // the gradients of the layers from the last down to ready_layer are
        // written, none below it (after backward: all).
        for (size_t i = 0; i < layer_of.size(); ++i) {
          if (!TrainedParam(net, static_cast<int>(i))) continue;
          EXPECT_EQ(written[b][i], layer_of[i] >= plan[b].ready_layer) << "param " << i << ", ready after layer "
                                                                        << layer_of[i];
        }
      }
      EXPECT_EQ(comm->waits, step + 1);
    }
    EXPECT_EQ(reducer.sums(), static_cast<int64_t>(2 * plan.size()));
  }
}

TEST(GradientBuckets, WithoutBucketsTheReducerSumsEachTypeAfterBackward) {
  Net net = MakeNet();
  auto comm = std::make_shared<RecordingComm>();
  GradientReducer reducer(&net, comm, /*reduce_alone=*/false, 1);
  EXPECT_TRUE(reducer.buckets().empty());
  net.ClearParamDiffs();
  reducer.set_last_backward(true);
  net.Forward();
  net.Backward();
  reducer.set_last_backward(false);
  reducer.Reduce();
  const std::vector<GradientBucket> plan = PlanGradientBuckets(net, 1);
  ASSERT_EQ(comm->sums.size(), plan.size());
  for (size_t b = 0; b < plan.size(); ++b) {
    EXPECT_FALSE(comm->sums[b].started_in_backward);
    EXPECT_EQ(comm->sums[b].type, plan[b].type);
    EXPECT_EQ(comm->sums[b].data, Buffers(net, plan[b]));
  }
}

}  // namespace
}  // namespace cortado
