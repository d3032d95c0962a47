// A layer's work runs on the stream of the Context it was given: during its
// set-up and passes the thread's current stream (which blob copies and type
// conversions use) is that Context's, whatever the caller activated, and
// the caller's comes back after (layer.cpp's ContextStream).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "cortado/context.hpp"
#include "cortado/layer.hpp"
#include "cortado/util/cuda.hpp"
#include "test_util.hpp"
#include "test_scopes.hpp"

namespace cortado {
namespace {

#ifdef CORTADO_USE_CUDA
using StreamHandle = cudaStream_t;
StreamHandle CurrentStream() { return cuda::stream(); }
#else
using StreamHandle = const void*;
StreamHandle CurrentStream() { return nullptr; }
#endif

// y = x, recording the thread's current stream in each pass.
template <typename Ftype, typename Btype>
class StreamProbeLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "StreamProbe", BlobRules().Bottoms(1).Tops(1))
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {
    top[0]->ReshapeLike(*bottom[0]);
    seen_setup = CurrentStream();
  }
  StreamHandle seen_setup{}, seen_forward{}, seen_backward{};

 protected:
  CORTADO_LAYER_PASSES
};

template <typename Ftype, typename Btype>
void StreamProbeLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  seen_forward = CurrentStream();
  const Ftype* x = bottom[0]->template cpu_data<Ftype>();
  std::copy(x, x + bottom[0]->count(), top[0]->template mutable_cpu_data<Ftype>());
}
template <typename Ftype, typename Btype>
void StreamProbeLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>&,
                                                  const BlobVec& bottom) {
  seen_backward = CurrentStream();
  const Btype* dy = top[0]->template cpu_diff<Btype>();
  std::copy(dy, dy + top[0]->count(), bottom[0]->template mutable_cpu_diff<Btype>());
}
#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void StreamProbeLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  seen_forward = CurrentStream();
  // The bottom's upload (it was written on the host) goes on the current stream.
  CORTADO_CUDA_CHECK(cudaMemcpyAsync(top[0]->template mutable_gpu_data<Ftype>(), bottom[0]->template gpu_data<Ftype>(),
                                     bottom[0]->count() * sizeof(Ftype), cudaMemcpyDeviceToDevice,
                                     this->context().stream()));
}
template <typename Ftype, typename Btype>
void StreamProbeLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>&,
                                                  const BlobVec& bottom) {
  seen_backward = CurrentStream();
  CORTADO_CUDA_CHECK(cudaMemcpyAsync(bottom[0]->template mutable_gpu_diff<Btype>(), top[0]->template gpu_diff<Btype>(),
                                     top[0]->count() * sizeof(Btype), cudaMemcpyDeviceToDevice,
                                     this->context().stream()));
}
#endif

LayerParameter ProbeParam() {
  LayerParameter p;
  p.set_name("probe");
  p.set_type("StreamProbe");
  p.add_bottom("x");
  p.add_top("y");
  return p;
}

// On the CPU the scope does nothing: the thread's stream is the caller's.
// Caches of handle-bound state (cuDNN's graph plans) key on a Context's
// serial: a new Context never has a dead one's, even where its handles reuse
// the dead one's addresses.
TEST(LayerStream, ContextSerialsAreNeverReused) {
  std::vector<uint64_t> seen;
  for (int i = 0; i < 4; ++i) {
    auto ctx = Context::Cpu();
    for (uint64_t s : seen) EXPECT_NE(ctx->serial(), s);
    seen.push_back(ctx->serial());
  }  // each one destroyed before the next is made
  if (!test::HaveDevice()) return;
  const uint64_t gpu = Context::Create(0)->serial();
  for (uint64_t s : seen) EXPECT_NE(gpu, s);
  EXPECT_NE(Context::Create(0)->serial(), gpu);
}

TEST(LayerStream, CpuLayerLeavesTheThreadsStream) {
  StreamProbeLayer<float, float> layer(ProbeParam());
  Blob x(FLOAT), y(FLOAT);
  x.Reshape({2, 3});
  test::FillUniform(&x, -1, 1, 3);
  const StreamHandle before = CurrentStream();
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  EXPECT_EQ(test::GetData(y), test::GetData(x));
  EXPECT_EQ(layer.seen_forward, before);
  EXPECT_EQ(CurrentStream(), before);
}

// On a GPU, called from a thread whose current stream is not the layer's
// (no Activate), the layer's set-up and passes still run on its Context's
// stream, and the caller's stream is back after each.
TEST(LayerStream, GpuLayerRunsOnItsContextsStream) {
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  test::RestoreStream restore;
  std::shared_ptr<Context> gpu = Context::Create(0);
  Context::Cpu()->Activate();  // the thread's stream: the per-thread default
  const StreamHandle caller = CurrentStream();
  ASSERT_NE(caller, gpu->stream());
  StreamProbeLayer<float, float> layer(ProbeParam());
  layer.set_context(gpu);
  Blob x(FLOAT), y(FLOAT);
  x.Reshape({64, 1024});
  test::FillUniform(&x, -1, 1, 7);
  layer.SetUp({&x}, {&y});
  EXPECT_EQ(layer.seen_setup, gpu->stream());
  EXPECT_EQ(CurrentStream(), caller);
  layer.Forward({&x}, {&y});
  EXPECT_EQ(layer.seen_forward, gpu->stream());
  EXPECT_EQ(CurrentStream(), caller);
  test::SetDiff(&y, test::RandomVector(y.count(), 11), FLOAT);
  layer.Backward({&y}, {true}, {&x});
  EXPECT_EQ(layer.seen_backward, gpu->stream());
  EXPECT_EQ(CurrentStream(), caller);
  gpu->Synchronize();
  EXPECT_EQ(test::GetData(y), test::GetData(x));
  EXPECT_EQ(test::GetDiff(x), test::GetDiff(y));
#endif
}

}  // namespace
}  // namespace cortado
