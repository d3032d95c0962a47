// Faults on the GPU end a run with a message instead of hanging it
// (util/gpu_faults.hpp): the two switches read from the environment, the
// per-layer check of CORTADO_SYNC_LAYERS in Net's loops, and the NCCL wait
// that gives up after CORTADO_NCCL_TIMEOUT seconds. The parsing and the CPU
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
using test::ScopedEnv;

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GpuFaults, SyncLayersIsOneOrZero) {
  {
    ScopedEnv e("CORTADO_SYNC_LAYERS", nullptr);
    EXPECT_FALSE(SyncLayers());
  }
  for (const char* off : {"", "0"}) {
    ScopedEnv e("CORTADO_SYNC_LAYERS", off);
    EXPECT_FALSE(SyncLayers()) << "'" << off << "'";
  }
  {
    ScopedEnv e("CORTADO_SYNC_LAYERS", "1");
    EXPECT_TRUE(SyncLayers());
  }
  for (const char* bad : {"yes", "2", "1 ", "true"}) {
    ScopedEnv e("CORTADO_SYNC_LAYERS", bad);
    const std::string msg = ErrorOf([] { SyncLayers(); });
    EXPECT_NE(msg.find(str_cat("CORTADO_SYNC_LAYERS = '", bad, "'")), std::string::npos) << msg;
  }
}

TEST(GpuFaults, NcclTimeoutIsSecondsWithADefault) {
  {
    ScopedEnv e("CORTADO_NCCL_TIMEOUT", nullptr);
    EXPECT_EQ(NcclTimeoutSeconds(), kNcclTimeoutDefault);
  }
  {
    ScopedEnv e("CORTADO_NCCL_TIMEOUT", "");
    EXPECT_EQ(NcclTimeoutSeconds(), kNcclTimeoutDefault);
  }
  const std::vector<std::pair<const char*, double>> good = {{"30", 30}, {"0.5", 0.5}, {"0", 0}, {"1e3", 1000}};
  for (const auto& [text, seconds] : good) {
    ScopedEnv e("CORTADO_NCCL_TIMEOUT", text);
    EXPECT_EQ(NcclTimeoutSeconds(), seconds) << text;
  }
  for (const char* bad : {"-1", "ten", "10s", "inf", "nan", "1e999"}) {
    ScopedEnv e("CORTADO_NCCL_TIMEOUT", bad);
    const std::string msg = ErrorOf([] { NcclTimeoutSeconds(); });
    EXPECT_NE(msg.find(str_cat("CORTADO_NCCL_TIMEOUT = '", bad, "': expected a number of seconds")),
              std::string::npos)
        << msg;
  }
}

TEST(GpuFaults, NothingIsPendingOnTheCpu) { EXPECT_EQ(SynchronizeAndTakeError(*Context::Cpu()), ""); }

// x (2, 6) -> ip1 (5) -> TanH -> ip2 (3) -> the sum as the loss. x is
// constant, so that every pass computes the same values.
std::unique_ptr<Net> SmallNet(std::shared_ptr<const Context> ctx) {
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
  return std::make_unique<Net>(p, SourceInfo(), std::move(ctx));
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

// The switch is read at each pass, on the CPU too (where it does nothing),
// so that a mistyped value is not silently ignored.
TEST(GpuFaults, ACpuNetReadsTheSwitchAndRunsAlike) {
  auto net = SmallNet(nullptr);
  const Pass off = ForwardBackward(net.get());
  {
    ScopedEnv e("CORTADO_SYNC_LAYERS", "1");
    const Pass on = ForwardBackward(net.get());
    EXPECT_EQ(on.loss, off.loss);
    EXPECT_EQ(on.grads, off.grads);
  }
  ScopedEnv e("CORTADO_SYNC_LAYERS", "on");
  const std::string msg = ErrorOf([&] { net->Forward(); });
  EXPECT_NE(msg.find("CORTADO_SYNC_LAYERS = 'on'"), std::string::npos) << msg;
}

// On the GPU the synchronized passes give the same values.
TEST(GpuFaults, SyncLayersRunsTheSameOnTheGpu) {
  if (DeviceCount() < 1) GTEST_SKIP() << "no CUDA device: CORTADO_SYNC_LAYERS on the GPU is untested";
  RestoreStream restore;
  auto net = SmallNet(Context::Create(0));
  const Pass off = ForwardBackward(net.get());
  ScopedEnv e("CORTADO_SYNC_LAYERS", "1");
  const Pass on = ForwardBackward(net.get());
  EXPECT_EQ(on.loss, off.loss);
  EXPECT_EQ(on.grads, off.grads);
}

// A CUDA error left pending during ip2's backward (here by a runtime call
// that fails, from the parameter listener that runs right after the layer:
// the same error state a kernel that failed to launch leaves) is taken by
// the check after that layer, and the error names it and the pass.
TEST(GpuFaults, SyncLayersNamesTheLayerACudaErrorFollows) {
  if (DeviceCount() < 1) GTEST_SKIP() << "no CUDA device: CORTADO_SYNC_LAYERS on the GPU is untested";
#ifdef CORTADO_USE_CUDA
  RestoreStream restore;
  auto net = SmallNet(Context::Create(0));
  net->Forward();
  bool injected = false;
  net->set_param_ready_listener([&](const std::vector<int>&) {
    if (injected) return;
    injected = true;
    EXPECT_NE(cudaSetDevice(DeviceCount()), cudaSuccess);  // no such device: leaves cudaErrorInvalidDevice
  });
  ScopedEnv e("CORTADO_SYNC_LAYERS", "1");
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
// CORTADO_NCCL_TIMEOUT seconds with an Error that says so, and leave the
// communicator aborted: a later sum fails at once instead of hanging.
// ncclCommAbort returns only once the work queued on the stream before the
// sums has run (seen on an H100: with the stream held for 20 s, the error
// came after 20 s), so the stream is held for 3 s here. In a real hang what
// holds the stream is NCCL's own kernel, which the abort ends.
TEST(GpuFaults, NcclSumsThatCannotFinishEndAfterTheTimeout) {
  if (!NcclBuilt()) GTEST_SKIP() << "no NCCL in this build: CORTADO_NCCL_TIMEOUT is untested";
  if (DeviceCount() < 1) GTEST_SKIP() << "no CUDA device: CORTADO_NCCL_TIMEOUT is untested";
#ifdef CORTADO_USE_CUDA
  RestoreStream restore;
  ScopedEnv e("CORTADO_NCCL_TIMEOUT", "1");
  auto ctx = Context::Create(0);
  ctx->Activate();
  std::shared_ptr<Communicator> comm = NcclGroup({0})[0];
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
  EXPECT_NE(msg.find("did not finish in 1 s (CORTADO_NCCL_TIMEOUT)"), std::string::npos) << msg;
  EXPECT_GE(waited, 1.0);
  EXPECT_LT(waited, 15.0) << "the abort waited for the stream";
  const std::string after = ErrorOf([&] { comm->StartAllReduceSum(spans, FLOAT, ctx->stream()); });
  EXPECT_NE(after.find("stopped"), std::string::npos) << after;
#endif
}

}  // namespace
}  // namespace cortado
