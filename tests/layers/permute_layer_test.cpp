#include "cortado/layers/permute_layer.hpp"

#include "cortado/util/cuda.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class PermuteLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(PermuteLayerTest, test::AllPairs, test::PairNames);

std::vector<double> Iota(int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

// NCHW (1, 2, 2, 3) to NHWC: top[0, h, w, c] = bottom[0, c, h, w].
TYPED_TEST(PermuteLayerTest, NchwToNhwc) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Permute' permute_param { order: 0 order: 2 order: 3 order: 1 }");
  test::Blobs bottom, top;
  bottom.add({1, 2, 2, 3}, type_of<F>(), Iota(12));
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{1, 2, 3, 2}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}));
  // The backward moves each diff back to its element.
  test::SetDiff(top[0], {0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), Iota(12));
}

// Batch-major (N, T, I) to time-major (T, N, I), the RNN/LSTM layout: the
// axes not listed follow in order.
TYPED_TEST(PermuteLayerTest, SwapFirstTwoAxes) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'Permute' permute_param { order: 1 }");
  test::Blobs bottom, top;
  bottom.add({2, 3, 2}, type_of<F>(), Iota(12));
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{3, 2, 2}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11}));
}

TYPED_TEST(PermuteLayerTest, Gradient) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 60 + i); };
  test::CheckLayer<TypeParam>("type: 'Permute' permute_param { order: 2 order: 0 order: 3 }", {{2, 3, 2, 2}}, fill,
                              test::GradientSettings(), test::ReferenceTolerance{0, 0});
}

// LayoutConvert: the shape stays, the values move to the top's layout.
// (2, 3, 2, 2) NCHW to NHWC: value (n, c, h, w) at ((n*H + h)*W + w)*C + c;
// back again it is the identity; a 3-D blob (N, C, L) goes to (N, L, C) in
// memory and a 2-D one is unchanged.
TYPED_TEST(PermuteLayerTest, LayoutConvertMovesChannelsLast) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  for (const std::vector<int>& shape : {std::vector<int>{2, 3, 2, 2}, {2, 3, 4}, {3, 5}, {1, 4, 3, 2, 2}}) {
    auto to_nhwc = test::NewLayer<TypeParam>("type: 'LayoutConvert'");
    auto to_nchw = test::NewLayer<TypeParam>("type: 'LayoutConvert'");
    int count = 1;
    for (int d : shape) count *= d;
    test::Blobs x, y, z;
    x.add(shape, type_of<F>(), Iota(count));
    y.add(type_of<F>());
    z.add(type_of<F>());
    y[0]->set_layout(Layout::NHWC);
    to_nhwc->SetUp(x.vec, y.vec);
    to_nchw->SetUp(y.vec, z.vec);
    to_nhwc->Forward(x.vec, y.vec);
    to_nchw->Forward(y.vec, z.vec);
    ASSERT_EQ(y[0]->shape(), shape);
    // Where each NCHW index lands: axis 1 last in memory.
    const int n = shape[0], c = shape.size() > 1 ? shape[1] : 1;
    const int spatial = count / (n * c);
    std::vector<double> want(count);
    for (int i = 0; i < n; ++i)
      for (int ch = 0; ch < c; ++ch)
        for (int s = 0; s < spatial; ++s) want[(i * spatial + s) * c + ch] = (i * c + ch) * spatial + s;
    EXPECT_EQ(test::GetData(*y[0]), want) << shape_string(shape);
    EXPECT_EQ(test::GetData(*z[0]), Iota(count)) << shape_string(shape);
    // Backward moves each diff back: the diff of z is the identity's.
    test::SetDiff(z[0], Iota(count), type_of<B>());
    to_nchw->Backward(z.vec, {true}, y.vec);
    to_nhwc->Backward(y.vec, {true}, x.vec);
    EXPECT_EQ(test::GetDiff(*y[0]), want) << shape_string(shape);
    EXPECT_EQ(test::GetDiff(*x[0]), Iota(count)) << shape_string(shape);
  }
}

// On a GPU, CopyLayout's batched transpose (and the gather where a batch
// exceeds its grid) against the host's gather, both ways, for sizes that
// are not multiples of its 32 x 32 tiles and for every element size.
TEST(LayoutCopy, GpuTransposeMatchesHostGather) {
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  test::ActiveGpuContext gpu;
  for (const Type t : {FLOAT16, FLOAT, DOUBLE}) {
    const std::vector<std::vector<int>> shapes{{3, 37, 5, 7}, {2, 64, 33, 1}, {70000, 2, 3}, {2, 5, 3, 2, 2}};
    for (const std::vector<int>& shape : shapes) {
      for (const Layout from : {Layout::NCHW, Layout::NHWC}) {
        const Layout to = from == Layout::NCHW ? Layout::NHWC : Layout::NCHW;
        Blob x(shape, t), host(shape, t), dev(shape, t);
        x.set_layout(from);
        host.set_layout(to);
        dev.set_layout(to);
        test::FillUniform(&x, -100, 100, 7);
        CopyLayout(shape, from, to, t, x.data().data_raw(t), host.data().mutable_data_raw(t), false, nullptr);
        CopyLayout(shape, from, to, t, x.data().gpu_data_raw(t), dev.data().mutable_gpu_data_raw(t), true,
                   gpu.ctx->stream());
        CORTADO_CUDA_CHECK(cudaStreamSynchronize(gpu.ctx->stream()));
        EXPECT_EQ(test::GetData(dev), test::GetData(host)) << type_name(t) << " " << shape_string(shape);
      }
    }
  }
#endif
}

// PadChannels / UnpadChannels on the host: an NHWC batch of 3 channels
// widened to 4 (zeros in channel 3), a KCRS filter made KRSC with 8
// channels (the same values as CopyLayout's KCRS -> KRSC where cp is c),
// and the way back drops the pad channels.
TEST(PadChannels, WidensWithZerosAndComesBack) {
  for (const Type t : {FLOAT16, FLOAT, DOUBLE}) {
    {  // 2 rows of 3 channels (inner 1) -> 4 channels
      Blob x({2, 3}, t), y({2, 4}, t), back({2, 3}, t);
      test::SetData(&x, {1, 2, 3, 4, 5, 6});
      PadChannels(2, 3, 1, 4, type_size(t), x.data().data_raw(t), y.data().mutable_data_raw(t), false, nullptr);
      EXPECT_EQ(test::GetData(y), (std::vector<double>{1, 2, 3, 0, 4, 5, 6, 0})) << type_name(t);
      UnpadChannels(2, 3, 1, 4, type_size(t), y.data().data_raw(t), back.data().mutable_data_raw(t), false, nullptr);
      EXPECT_EQ(test::GetData(back), test::GetData(x)) << type_name(t);
    }
    {  // a filter K=2, C=3, R*S=2*2
      const std::vector<int> kcrs{2, 3, 2, 2};
      Blob w(kcrs, t), krsc(kcrs, t), padded({2, 8, 2, 2}, t), back(kcrs, t);
      test::SetData(&w, Iota(24));
      krsc.set_layout(Layout::NHWC);
      CopyLayout(kcrs, Layout::NCHW, Layout::NHWC, t, w.data().data_raw(t), krsc.data().mutable_data_raw(t), false,
                 nullptr);
      PadChannels(2, 3, 4, 8, type_size(t), w.data().data_raw(t), padded.data().mutable_data_raw(t), false, nullptr);
      const std::vector<double> moved = test::GetData(krsc), got = test::GetData(padded);
      for (int k = 0; k < 2; ++k) {
        for (int p = 0; p < 4; ++p) {
          for (int j = 0; j < 8; ++j) {
            const double want = j < 3 ? moved[(k * 4 + p) * 3 + j] : 0.0;
            EXPECT_EQ(got[(k * 4 + p) * 8 + j], want) << type_name(t) << " k " << k << " rs " << p << " c " << j;
          }
        }
      }
      UnpadChannels(2, 3, 4, 8, type_size(t), padded.data().data_raw(t), back.data().mutable_data_raw(t), false,
                    nullptr);
      EXPECT_EQ(test::GetData(back), test::GetData(w)) << type_name(t);
    }
  }
}

// The device kernels against the host loops, both ways, for every element
// size, with sizes past one block.
TEST(PadChannels, GpuMatchesHost) {
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  test::ActiveGpuContext gpu;
  for (const Type t : {FLOAT16, FLOAT, DOUBLE}) {
    for (const std::vector<int>& s : std::vector<std::vector<int>>{{777, 3, 1, 4}, {64, 3, 49, 8}, {5, 20, 9, 24}}) {
      const int64_t outer = s[0], inner = s[2];
      const int c = s[1], cp = s[3];
      Blob x({s[0], c, s[2]}, t), host({s[0], s[2], cp}, t), dev({s[0], s[2], cp}, t);
      Blob back_host({s[0], c, s[2]}, t), back_dev({s[0], c, s[2]}, t);
      test::FillUniform(&x, -100, 100, 11);
      cudaStream_t stream = gpu.ctx->stream();
      const size_t bytes = type_size(t);
      PadChannels(outer, c, inner, cp, bytes, x.data().data_raw(t), host.data().mutable_data_raw(t), false, nullptr);
      PadChannels(outer, c, inner, cp, bytes, x.data().gpu_data_raw(t), dev.data().mutable_gpu_data_raw(t), true,
                  stream);
      UnpadChannels(outer, c, inner, cp, bytes, host.data().data_raw(t), back_host.data().mutable_data_raw(t), false,
                    nullptr);
      UnpadChannels(outer, c, inner, cp, bytes, dev.data().gpu_data_raw(t), back_dev.data().mutable_gpu_data_raw(t),
                    true, stream);
      CORTADO_CUDA_CHECK(cudaStreamSynchronize(stream));
      EXPECT_EQ(test::GetData(dev), test::GetData(host)) << type_name(t) << " " << shape_string(s);
      EXPECT_EQ(test::GetData(back_dev), test::GetData(x)) << type_name(t) << " " << shape_string(s);
      EXPECT_EQ(test::GetData(back_host), test::GetData(x)) << type_name(t) << " " << shape_string(s);
    }
  }
#endif
}

TYPED_TEST(PermuteLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  for (const char* order : {"order: 4", "order: 1 order: 1"}) {
    auto layer = test::NewLayer<TypeParam>(std::string("name: 'p' type: 'Permute' permute_param { ") + order + " }");
    test::Blobs bottom, top;
    bottom.add({2, 3, 2, 2}, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << order << " was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "permute_param.order") << e.what();
    }
  }
}

TYPED_TEST(PermuteLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) { test::FillUniform(b, -1, 1, 70 + i); };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Permute' permute_param { order: 0 order: 2 order: 3 order: 1 }",
                                      {{2, 3, 4, 5}}, fill, test::GpuTolerance{0, 0});
}

}  // namespace
}  // namespace cortado
