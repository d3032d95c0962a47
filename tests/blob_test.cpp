// SyncedMemory's lazy allocation, Tensor's lazy conversion and Blob's
// shapes and serialization.
#include "cortado/blob.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "cortado/synced_memory.hpp"
#include "cortado/util/cuda.hpp"

namespace cortado {
namespace {

TEST(SyncedMemory, AllocatesEachSideWhenFirstTouched) {
  SyncedMemory m(1000);
  EXPECT_EQ(m.head(), SyncedMemory::Head::UNINITIALIZED);
  EXPECT_FALSE(m.has_cpu());
  EXPECT_FALSE(m.has_gpu());
  m.set_zero();  // already zero: still nothing allocated
  EXPECT_FALSE(m.has_cpu());
  const auto* p = static_cast<const unsigned char*>(m.cpu_data());
  ASSERT_TRUE(m.has_cpu());
  EXPECT_FALSE(m.has_gpu()) << "a host buffer never gets a device copy unasked";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(p[i], 0) << i;
  std::memset(m.mutable_cpu_data(), 7, 1000);
  EXPECT_EQ(m.head(), SyncedMemory::Head::CPU);
  m.set_zero();
  EXPECT_EQ(static_cast<const unsigned char*>(m.cpu_data())[999], 0);
  // A large tensor costs no memory until it is used.
  Tensor big(FLOAT, size_t(1) << 28);
  EXPECT_EQ(big.count(), size_t(1) << 28);
}

TEST(SyncedMemory, DeviceBuffersAreZeroedOnTheDeviceWithoutAHostCopy) {
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  SyncedMemory m(4096);
  const void* d = m.gpu_data();
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(m.has_gpu());
  EXPECT_FALSE(m.has_cpu()) << "fresh device memory is zeroed there, not uploaded";
  EXPECT_EQ(m.head(), SyncedMemory::Head::GPU);
  std::vector<unsigned char> host(4096, 1);
  CORTADO_CUDA_CHECK(cudaMemcpyAsync(host.data(), d, 4096, cudaMemcpyDeviceToHost, cuda::stream()));
  CORTADO_CUDA_CHECK(cudaStreamSynchronize(cuda::stream()));
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(host[i], 0) << i;
  // Written on the device, read on the host: the host side appears then.
  CORTADO_CUDA_CHECK(cudaMemsetAsync(m.mutable_gpu_data(), 3, 4096, cuda::stream()));
  EXPECT_EQ(static_cast<const unsigned char*>(m.cpu_data())[4095], 3);
  EXPECT_TRUE(m.has_cpu());
  // Pinned on request, and the round trip still holds.
  SyncedMemory pinned(256, /*pinned_host=*/true);
  std::memset(pinned.mutable_cpu_data(), 5, 256);
  const void* pd = pinned.gpu_data();
  cudaPointerAttributes attr{};
  CORTADO_CUDA_CHECK(cudaPointerGetAttributes(&attr, pinned.cpu_data()));
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);
  std::vector<unsigned char> back(256, 0);
  CORTADO_CUDA_CHECK(cudaMemcpyAsync(back.data(), pd, 256, cudaMemcpyDeviceToHost, cuda::stream()));
  CORTADO_CUDA_CHECK(cudaStreamSynchronize(cuda::stream()));
  EXPECT_EQ(back[255], 5);
#endif
}

TEST(Tensor, ConvertsLazilyAndCachesUntilWrite) {
  Tensor t(FLOAT, 4);
  float* f = t.mutable_data<float>();
  f[0] = 1.f;
  f[1] = 1.f + std::ldexp(1.f, -12);  // not representable in half: rounds to 1
  f[2] = 70000.f;                      // overflows half
  f[3] = -2.5f;
  const float16* h = t.data<float16>();
  EXPECT_EQ(t.type(), FLOAT);  // reading does not change the current type
  EXPECT_EQ(float(h[0]), 1.f);
  EXPECT_EQ(float(h[1]), 1.f);
  EXPECT_TRUE(isinf(h[2]));
  EXPECT_EQ(float(h[3]), -2.5f);
  EXPECT_EQ(t.data<float16>(), h);  // cached
  // The float copy still holds the unrounded values.
  EXPECT_EQ(t.data<float>()[1], 1.f + std::ldexp(1.f, -12));
  // Writing as float16 makes it current and drops the float copy.
  float16* hw = t.mutable_data<float16>();
  hw[3] = float16(4.f);
  EXPECT_EQ(t.type(), FLOAT16);
  EXPECT_EQ(t.data<float>()[3], 4.f);
  EXPECT_EQ(t.data<float>()[1], 1.f);  // the rounded value now
  EXPECT_EQ(t.data<double>()[0], 1.0);
}

TEST(Tensor, CountsConversions) {
  Tensor t(FLOAT, 3);
  t.mutable_data<float>()[0] = 2.f;
  EXPECT_EQ(t.conversions(), 0);
  t.data<float16>();
  t.data<float16>();  // cached
  t.data<float>();    // the current type
  EXPECT_EQ(t.conversions(), 1);
  t.mutable_data<float>()[1] = 3.f;
  EXPECT_EQ(float(t.data<float16>()[1]), 3.f);
  EXPECT_EQ(t.conversions(), 2);
}

// A two-type write (the solver's update writing master weights and their
// working copy): both buffers stay valid, the second is what the caller
// wrote (no conversion runs), and a later one-type write drops it again.
TEST(Tensor, TwoTypeWriteKeepsBothCopies) {
  Tensor t(FLOAT16, 2);
  t.mutable_data<float16>()[0] = float16(1.f);
  void* also = nullptr;
  float* master = static_cast<float*>(t.mutable_data_raw(FLOAT, FLOAT16, &also));
  ASSERT_NE(also, nullptr);
  EXPECT_EQ(t.type(), FLOAT);
  EXPECT_EQ(master[0], 1.f);  // the FLOAT buffer holds the current values
  master[0] = 1.5f;
  master[1] = -4.f;
  float16* copy = static_cast<float16*>(also);
  copy[0] = float16(1.5f);
  copy[1] = float16(7.f);  // deliberately not the conversion: shows that none runs
  const int64_t before = t.conversions();
  EXPECT_EQ(float(t.data<float16>()[0]), 1.5f);
  EXPECT_EQ(float(t.data<float16>()[1]), 7.f);
  EXPECT_EQ(t.conversions(), before);
  t.mutable_data<float>()[1] = -4.f;  // a one-type write: the copy is stale now
  EXPECT_EQ(float(t.data<float16>()[1]), -4.f);
  EXPECT_EQ(t.conversions(), before + 1);
  // The same type twice: no second buffer.
  EXPECT_NE(t.mutable_data_raw(FLOAT, FLOAT, &also), nullptr);
  EXPECT_EQ(also, nullptr);
}

TEST(Tensor, SetZeroAndGrowth) {
  Tensor t(FLOAT16, 3);
  t.mutable_data<float16>()[1] = float16(2.f);
  t.set_zero();
  EXPECT_EQ(t.data<double>()[1], 0.0);
  t.resize(100);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(t.data<float>()[i], 0.f);
}

TEST(Blob, ShapeAndCounts) {
  Blob b({2, 3, 4, 5});
  EXPECT_EQ(b.count(), 120u);
  EXPECT_EQ(b.count(1), 60u);
  EXPECT_EQ(b.count(1, 3), 12u);
  EXPECT_EQ(b.shape(-1), 5);
  EXPECT_EQ(b.CanonicalAxisIndex(-2), 2);
  EXPECT_EQ(b.offset(1, 2, 3, 4), 119u);
  EXPECT_EQ(b.shape_string(), "(2, 3, 4, 5)");
  b.Reshape({7});
  EXPECT_EQ(b.num(), 7);
  EXPECT_EQ(b.channels(), 1);
}

TEST(Blob, ProtoRoundTripKeepsFloatValuesOfHalfBlob) {
  Blob b({2, 2}, FLOAT16);
  float16* d = b.mutable_cpu_data<float16>();
  d[0] = float16(0.5f);
  d[1] = float16(-3.f);
  d[2] = float16(1e-5f);
  d[3] = float16(60000.f);
  BlobProto p;
  b.ToProto(&p);
  ASSERT_EQ(p.data_size(), 4);  // stored as float: BVLC Caffe reads it
  EXPECT_EQ(p.data(2), float(float16(1e-5f)));
  Blob c({2, 2}, FLOAT);
  c.FromProto(p, false);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.cpu_data<float>()[i], float(d[i]));
  Blob wrong({4, 1});
  EXPECT_THROW(wrong.FromProto(p, false), Error);
  Blob legacy({1, 1, 2, 2});
  EXPECT_NO_THROW(legacy.FromProto(p, false));  // legacy 4D shapes match
}

TEST(Blob, DoubleBlobWritesDoubleData) {
  Blob b({3}, DOUBLE);
  b.mutable_cpu_data<double>()[1] = 0.1;
  BlobProto p;
  b.ToProto(&p);
  EXPECT_EQ(p.data_size(), 0);
  ASSERT_EQ(p.double_data_size(), 3);
  EXPECT_EQ(p.double_data(1), 0.1);
}

TEST(Blob, SharedDataSeesWrites) {
  Blob a({4}), b({4});
  b.ShareData(a);
  a.mutable_cpu_data<float>()[2] = 7.f;
  EXPECT_EQ(b.cpu_data<float>()[2], 7.f);
  EXPECT_DOUBLE_EQ(b.asum_data(), 7.0);
  EXPECT_DOUBLE_EQ(a.sumsq_data(), 49.0);
}

}  // namespace
}  // namespace cortado
