// Faults on the GPU end a run with a message instead of hanging it
// (util/gpu_faults.hpp): the per-layer check of a net with sync_layers in
// Net's loops, and the NCCL wait that gives up after the communicator's
// timeout. The parsing and the CPU
// side run everywhere; the cases that need a device (or NCCL) skip without.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cortado/comm/communicator.hpp"
#include "cortado/context.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/net/net.hpp"
#include "cortado/switches.hpp"
#include "cortado/tensor.hpp"
#include "cortado/util/device.hpp"
#include "cortado/util/gpu_faults.hpp"
#ifdef CORTADO_USE_CUDA
#include "cortado/util/cuda.hpp"
#include "test_scopes.hpp"
#endif

namespace cortado {
namespace {

using test::RestoreStream;

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The switch is the net's field sync_layers, off by default; the trainer's
// flag --sync_layers takes 0 or 1 (or false, true) and names itself when
// given anything else.
TEST(GpuFaults, SyncLayersIsOneOrZero) {
  NetParameter p;
  EXPECT_FALSE(p.sync_layers());
  for (const auto& [text, on] : std::vector<std::pair<const char*, bool>>{
           {"0", false}, {"1", true}, {"false", false}, {"true", true}}) {
    Switches s;
    s.Set("sync_layers", text, "--");
    NetParameter q;
    s.Apply(&q);
    EXPECT_EQ(q.sync_layers(), on) << text;
  }
  for (const char* bad : {"yes", "2", "1 ", ""}) {
    const std::string msg = ErrorOf([&] { Switches().Set("sync_layers", bad, "--"); });
    EXPECT_NE(msg.find(str_cat("--sync_layers=", bad, ": expected 0 or 1")), std::string::npos) << msg;
  }
}

TEST(GpuFaults, NothingIsPendingOnTheCpu) { EXPECT_EQ(SynchronizeAndTakeError(*Context::Cpu()), ""); }

// x (2, 6) -> ip1 (5) -> TanH -> ip2 (3) -> the sum as the loss. x is
// constant, so that every pass computes the same values. With `sync`, the
// net's sync_layers; with `weights`, their values.
std::unique_ptr<Net> SmallNet(std::shared_ptr<const Context> ctx, bool sync = false, const Net* weights = nullptr) {
  NetParameter p;
  ParseTextProto(R"(
    layer { name: "x" type: "DummyData" top: "x"
      dummy_data_param { shape { dim: 2 dim: 6 } data_filler { type: "constant" value: 0.7 } } }
    layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
      inner_product_param { num_output: 5 weight_filler { type: "uniform" min: -0.5 max: 0.5 } } }
    layer { name: "tanh" type: "TanH" bottom: "h" top: "h" }
    layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y"
      inner_product_param { num_output: 3 weight_filler { type: "uniform" min: -0.5 max: 0.5 } } }
    layer { name: "l" type: "Flatten" bottom: "y" top: "loss" loss_weight: 1 })",
                 "net.prototxt", &p);
  p.set_sync_layers(sync);
  auto net = std::make_unique<Net>(p, SourceInfo(), std::move(ctx));
  if (weights) {
    NetParameter w;
    weights->ToProto(&w);
    net->CopyTrainedLayersFrom(w);
  }
  return net;
}

struct Pass {
  double loss = 0;
  std::vector<float> grads;
};
Pass ForwardBackward(Net* net) {
  Pass r;
  net->ClearParamDiffs();
  r.loss = net->ForwardBackward();
  for (Blob* b : net->learnable_params()) {
    const float* g = b->diff().data<float>();
    r.grads.insert(r.grads.end(), g, g + b->count());
  }
  return r;
}

// On the CPU the field does nothing: the same values.
TEST(GpuFaults, ACpuNetWithTheSwitchRunsAlike) {
  auto net = SmallNet(nullptr);
  auto synced = SmallNet(nullptr, true, net.get());
  EXPECT_FALSE(net->sync_layers());
  EXPECT_TRUE(synced->sync_layers());
  const Pass off = ForwardBackward(net.get());
  const Pass on = ForwardBackward(synced.get());
  EXPECT_EQ(on.loss, off.loss);
  EXPECT_EQ(on.grads, off.grads);
}

// On the GPU the synchronized passes give the same values.
TEST(GpuFaults, SyncLayersRunsTheSameOnTheGpu) {
  if (DeviceCount() < 1) GTEST_SKIP() << "no CUDA device: sync_layers on the GPU is untested";
  RestoreStream restore;
  auto ctx = Context::Create(0);
  auto net = SmallNet(ctx);
  auto synced = SmallNet(ctx, true, net.get());
  const Pass off = ForwardBackward(net.get());
  const Pass on = ForwardBackward(synced.get());
  EXPECT_EQ(on.loss, off.loss);
  EXPECT_EQ(on.grads, off.grads);
}

// A CUDA error left pending during ip2's backward (here by a runtime call
// that fails, from the parameter listener that runs right after the layer:
// the same error state a kernel that failed to launch leaves) is taken by
// the check after that layer, and the error names it and the pass.
TEST(GpuFaults, SyncLayersNamesTheLayerACudaErrorFollows) {
  if (DeviceCount() < 1) GTEST_SKIP() << "no CUDA device: sync_layers on the GPU is untested";
#ifdef CORTADO_USE_CUDA
  RestoreStream restore;
  auto net = SmallNet(Context::Create(0), true);
  net->Forward();
  bool injected = false;
  net->set_param_ready_listener([&](const std::vector<int>&) {
    if (injected) return;
    injected = true;
    EXPECT_NE(cudaSetDevice(DeviceCount()), cudaSuccess);  // no such device: leaves cudaErrorInvalidDevice
  });
  const std::string msg = ErrorOf([&] { net->Backward(); });
  EXPECT_TRUE(injected);
  EXPECT_NE(msg.find("layer 'ip2' (InnerProduct): CUDA error after its backward on GPU 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cudaErrorInvalidDevice"), std::string::npos) << msg;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the check did not take the error";
  net->set_param_ready_listener(nullptr);
  net->Forward();  // the device is still usable: the error was a failed call, not a fault
  net->Backward();
#endif
}

#ifdef CORTADO_USE_CUDA
// Holds a stream (a host function queued on it) until opened, or for 3 s.
struct Gate {
  std::atomic<bool> open{false};
};
void CUDART_CB HoldStream(void* gate) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (!static_cast<Gate*>(gate)->open && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
#endif

// Sums that cannot finish (here: queued behind a stream that does not move,
// as a peer rank that stopped would hold them) end the wait after
// the communicator's timeout (the solver's collective_timeout) with an Error that says so, and leave the
// communicator aborted: a later sum fails at once instead of hanging.
// ncclCommAbort returns only once the work queued on the stream before the
// sums has run (seen on an H100: with the stream held for 20 s, the error
// came after 20 s), so the stream is held for 3 s here. In a real hang what
// holds the stream is NCCL's own kernel, which the abort ends.
TEST(GpuFaults, NcclSumsThatCannotFinishEndAfterTheTimeout) {
  if (!NcclBuilt()) GTEST_SKIP() << "no NCCL in this build: the NCCL timeout is untested";
  if (DeviceCount() < 1) GTEST_SKIP() << "no CUDA device: the NCCL timeout is untested";
#ifdef CORTADO_USE_CUDA
  RestoreStream restore;
  auto ctx = Context::Create(0);
  ctx->Activate();
  std::shared_ptr<Communicator> comm = NcclGroup({0})[0];
  comm->set_timeout(1);
  Tensor t(FLOAT, 1000);
  const std::vector<Communicator::Span> spans = {{t.mutable_gpu_data_raw(FLOAT), 1000}};
  comm->StartAllReduceSum(spans, FLOAT, ctx->stream());
  comm->WaitSums(ctx->stream());  // a healthy wait first
  Gate gate;
  CORTADO_CUDA_CHECK(cudaLaunchHostFunc(ctx->stream(), HoldStream, &gate));
  comm->StartAllReduceSum(spans, FLOAT, ctx->stream());
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = ErrorOf([&] { comm->WaitSums(ctx->stream()); });
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  gate.open = true;
  ctx->Synchronize();
  EXPECT_NE(msg.find("did not finish in 1 s (collective_timeout)"), std::string::npos) << msg;
  EXPECT_GE(waited, 1.0);
  EXPECT_LT(waited, 15.0) << "the abort waited for the stream";
  const std::string after = ErrorOf([&] { comm->StartAllReduceSum(spans, FLOAT, ctx->stream()); });
  EXPECT_NE(after.find("stopped"), std::string::npos) << after;
#endif
}

}  // namespace
}  // namespace cortado
