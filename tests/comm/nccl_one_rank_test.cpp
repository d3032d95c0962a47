// The NCCL path on one GPU. Alone, a Solver never sums its gradients (a sum
// of one rank is the values), so a machine with one GPU would never run the
// NCCL engine; these cases run it there: the communicator's sums of one rank
// on device buffers of every 16- and 32-bit type, and a training run whose
// bucketed sums are forced through a one-rank NCCL communicator
// (SolverSetup::reduce_alone), which must give the bits of a run alone. The
// GPU cases skip without a device or without NCCL in the build; the forced
// sum through the threads engine runs on the CPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cortado/comm/communicator.hpp"
#include "cortado/context.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/tensor.hpp"
#include "cortado/util/device.hpp"
#include "test_scopes.hpp"

namespace cortado {
namespace {

#define CORTADO_SKIP_WITHOUT_NCCL_GPU()                                                 \
  do {                                                                                \
    if (!NcclBuilt()) GTEST_SKIP() << "no NCCL in this build: the NCCL path is untested"; \
    if (DeviceCount() < 1) GTEST_SKIP() << "no CUDA device: the NCCL path is untested";  \
  } while (0)

using test::RestoreStream;

// `count` values of `type` with random bit patterns: every exponent (large
// values, subnormals) and sign, but no Inf, NaN or -0 (whose sum with
// nothing else NCCL need not keep).
std::vector<char> RandomBits(Type type, int64_t count, uint32_t seed) {
  const size_t size = type_size(type);
  const int exponent_bits = type == FLOAT16 ? 5 : 8;
  const int mantissa_bits = static_cast<int>(8 * size) - 1 - exponent_bits;
  const uint32_t all_ones = (1u << exponent_bits) - 1;
  std::vector<char> bytes(static_cast<size_t>(count) * size);
  uint32_t state = seed;
  for (int64_t i = 0; i < count; ++i) {
    uint32_t bits;
    do {
      state = state * 1664525u + 1013904223u;
      bits = state ^ (state >> 13) * 2654435761u;
      if (size == 2) bits &= 0xffffu;
    } while (((bits >> mantissa_bits) & all_ones) == all_ones || bits == 1u << (8 * size - 1));
    std::memcpy(bytes.data() + static_cast<size_t>(i) * size, &bits, size);  // little-endian
  }
  return bytes;
}

// One rank's sum is its values, bit for bit, in FP32, FP16 and BF16, for
// buffers of odd sizes (one value, 1001, and 3 * 2^16 + 7, over several of
// NCCL's chunks) and an empty one in the same call, through both the
// bucket API (StartAllReduceSum / WaitSums, on NCCL's own stream after the
// compute stream's work) and the in-stream AllReduceSum.
TEST(NcclOneRank, SumsOfOneRankAreTheValuesInEveryType) {
  CORTADO_SKIP_WITHOUT_NCCL_GPU();
  RestoreStream restore;
  auto ctx = Context::Create(0);
  ctx->Activate();
  std::shared_ptr<Communicator> comm = NcclGroup({0})[0];
  ASSERT_EQ(comm->size(), 1);
  ASSERT_TRUE(comm->reduces_device_memory());
  ASSERT_TRUE(comm->asynchronous());
  const std::vector<int64_t> counts = {1, 1001, 3 * 65536 + 7, 0};
  for (Type type : {FLOAT, FLOAT16, BFLOAT16}) {
    for (bool bucketed : {true, false}) {
      SCOPED_TRACE(str_cat(type_name(type), bucketed ? ", StartAllReduceSum" : ", AllReduceSum"));
      std::vector<std::unique_ptr<Tensor>> buffers;
      std::vector<std::vector<char>> want;
      std::vector<Communicator::Span> spans;
      for (size_t k = 0; k < counts.size(); ++k) {
        buffers.push_back(std::make_unique<Tensor>(type, static_cast<size_t>(counts[k])));
        want.push_back(RandomBits(type, counts[k], static_cast<uint32_t>(17 + k)));
        void* host = counts[k] ? buffers[k]->mutable_data_raw(type) : nullptr;
        if (counts[k]) std::memcpy(host, want[k].data(), want[k].size());
        // Uploaded on the compute stream, which the sums start behind.
        spans.push_back({counts[k] ? buffers[k]->mutable_gpu_data_raw(type) : nullptr, counts[k]});
      }
      if (bucketed) {
        comm->StartAllReduceSum({spans[0], spans[3]}, type, ctx->stream());
        comm->StartAllReduceSum({spans[1], spans[2]}, type, ctx->stream());
        comm->WaitSums(ctx->stream());
      } else {
        comm->AllReduceSum(spans, type, ctx->stream());
      }
      for (size_t k = 0; k + 1 < counts.size(); ++k) {
        ASSERT_TRUE(buffers[k]->head_on_gpu());
        const char* got = static_cast<const char*>(buffers[k]->data_raw(type));  // read back on the compute stream
        EXPECT_EQ(std::memcmp(got, want[k].data(), want[k].size()), 0) << "buffer of " << counts[k] << " values";
      }
    }
  }
  ctx->Synchronize();
}

// x (4, 30) -> ip1 (16) -> TanH -> ip2 (40) -> the sum as the loss. 1176
// trained values: reduce_buckets 2 makes buckets of 588, so ip2's weights
// (640) start a sum during backward and the rest (ip2's bias, ip1) a second
// after it: two sums per step, where the unbucketed path makes one.
std::string TinyNet(Type t) {
  return str_cat("default_forward_type: ", type_name(t), " default_backward_type: ", type_name(t), R"(
  layer { name: "x" type: "DummyData" top: "x"
    dummy_data_param { shape { dim: 4 dim: 30 } data_filler { type: "uniform" min: -1 max: 1 } } }
  layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
    inner_product_param { num_output: 16 weight_filler { type: "uniform" min: -0.3 max: 0.3 }
                          bias_filler { type: "constant" value: 0.1 } } }
  layer { name: "tanh" type: "TanH" bottom: "h" top: "h" }
  layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y"
    inner_product_param { num_output: 40 weight_filler { type: "uniform" min: -0.5 max: 0.5 }
                          bias_filler { type: "constant" value: 0.2 } } }
  layer { name: "l" type: "Flatten" bottom: "y" top: "loss" loss_weight: 1 })");
}

struct Outcome {
  std::vector<char> weights;  // every learnable parameter's bytes, in the solver data type
  int64_t sums = 0;
};

// `steps` steps of SGD (momentum, weight decay) on `ctx`, alone or with the
// gradients summed through `comm` although it has one rank.
Outcome Train(Type storage, const std::string& more, std::shared_ptr<const Context> ctx,
          std::shared_ptr<Communicator> comm, int steps = 5) {
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto(str_cat("base_lr: 0.05 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.001 random_seed: 5 "
                         "max_iter: 10 display: 0 snapshot_after_train: false reduce_buckets: 2 ", more),
                 "solver.prototxt", &sp, &info);
  ParseTextProto(TinyNet(storage), "net.prototxt", sp.mutable_net_param());
  SolverSetup setup(std::move(ctx));
  setup.comm = std::move(comm);
  setup.reduce_alone = setup.comm != nullptr;
  std::unique_ptr<Solver> s = Solver::Create(sp, info, setup);
  s->Step(steps);
  Outcome r;
  r.sums = s->gradient_sums();
  for (Blob* p : s->net()->learnable_params()) {
    const Type t = s->data_type();
    const char* v = static_cast<const char*>(p->data().data_raw(t));
    r.weights.insert(r.weights.end(), v, v + p->count() * type_size(t));
  }
  return r;
}

struct Recipe {
  const char* name;
  Type storage;
  const char* solver;
};
const Recipe kRecipes[] = {{"FP32", FLOAT, ""},
                           {"FP16DynamicScale", FLOAT16, "dynamic_loss_scale: true loss_scale_init: 1024"},
                           {"FP16SolverData", FLOAT16, "solver_data_type: FLOAT16"}};

// The bucketed sums of a one-rank NCCL communicator, forced, change no bit
// of the training (they run, on NCCL's stream, between backward and the
// update), and they are the bucketed ones: two per step.
TEST(NcclOneRank, ForcedBucketedSumsGiveTheBitsOfARunAlone) {
  CORTADO_SKIP_WITHOUT_NCCL_GPU();
  RestoreStream restore;
  const int steps = 5;
  for (const Recipe& recipe : kRecipes) {
    SCOPED_TRACE(recipe.name);
    const Outcome alone = Train(recipe.storage, recipe.solver, Context::Create(0), nullptr, steps);
    EXPECT_EQ(alone.sums, 0);
    auto ctx = Context::Create(0);
    ctx->Activate();
    std::shared_ptr<Communicator> comm = NcclGroup({0})[0];
    const Outcome summed = Train(recipe.storage, recipe.solver, ctx, comm, steps);
    EXPECT_EQ(summed.sums, 2 * steps) << "not the bucketed path";
    ASSERT_EQ(summed.weights.size(), alone.weights.size());
    EXPECT_TRUE(summed.weights == alone.weights) << "the one-rank sums changed the training";
    const Outcome start = Train(recipe.storage, recipe.solver, Context::Create(0), nullptr, 0);
    EXPECT_FALSE(start.weights == alone.weights) << "the steps did not change the weights: the test shows nothing";
  }
}

// The same hook on the CPU, through the threads engine (synchronous: one
// sum per gradient type and step, packed through the host).
TEST(ReduceAlone, ThreadsEngineOfOneRankGivesTheBitsOfARunAlone) {
  for (const Recipe& recipe : kRecipes) {
    SCOPED_TRACE(recipe.name);
    const Outcome alone = Train(recipe.storage, recipe.solver, nullptr, nullptr);
    const Outcome summed = Train(recipe.storage, recipe.solver, nullptr, LocalGroup(1)[0]);
    EXPECT_EQ(summed.sums, 5) << "one sum per step";
    EXPECT_TRUE(summed.weights == alone.weights) << "the one-rank sums changed the training";
    const Outcome start = Train(recipe.storage, recipe.solver, nullptr, nullptr, 0);
    EXPECT_FALSE(start.weights == alone.weights) << "the steps did not change the weights: the test shows nothing";
  }
}

}  // namespace
}  // namespace cortado
