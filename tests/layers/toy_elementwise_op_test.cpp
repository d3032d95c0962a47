// A new elementwise op is one definition: Softsign, written here from
// scratch (the op, its layer, its GPU instantiation) and checked end to end
// on every type pair the layer tests use, on the CPU and, where a device
// exists, on the GPU.
//
//   forward:  y = x / (1 + |x|)
//   backward: dx = dy / (1 + |x|)^2   (reads x, so not in place)
//
// In a CUDA build CMake compiles this file as CUDA, so that the op's kernels
// are instantiated beside it, as an op's .cu does in the library.
// Registration: the layer registry is one table in layer_registry.cpp, and a
// registered type is one line there, {"Softsign", &MakeLayer<SoftsignLayer>};
// a test cannot add a line, so the tests here make the layer through that same
// MakeLayer, which picks the pair from the LayerParameter as CreateLayer does.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cortado/layer_registry.hpp"
#include "cortado/layers/elementwise_layer.hpp"
#include "test_util.hpp"
#ifdef __CUDACC__
#include "../../src/cortado/layers/elementwise_kernels.cuh"
#endif

namespace cortado {
namespace toy {

struct SoftsignOp : ElementwiseOp {
  static constexpr const char* kType = "Softsign";
  static constexpr ElementwiseReads kBackwardReads = ElementwiseReads::kX;
  static constexpr bool kInPlace = false;

  template <typename M>
  CORTADO_HD M forward(M x) const {
    return x / (M(1) + hd::fabs(x));
  }
  template <typename M>
  CORTADO_HD M backward(M x, M, M dy) const {
    const M d = M(1) + hd::fabs(x);
    return dy / (d * d);
  }
};

template <typename Ftype, typename Btype>
using SoftsignLayer = ElementwiseLayer<Ftype, Btype, SoftsignOp>;

}  // namespace toy
}  // namespace cortado

#ifdef __CUDACC__
CORTADO_INSTANTIATE_ELEMENTWISE_GPU(cortado::toy::SoftsignOp);
#endif

namespace cortado {
namespace {

using toy::SoftsignLayer;

double Fn(double x) { return x / (1 + std::fabs(x)); }
double Deriv(double x) { return 1 / ((1 + std::fabs(x)) * (1 + std::fabs(x))); }

/// The layer for pair P, made as the registry's line would make it.
template <typename P>
std::unique_ptr<LayerBase> NewSoftsign(const std::string& name = "softsign") {
  const LayerParameter p = test::MakeParam<P>("name: '" + name + "' type: 'Softsign'");
  std::unique_ptr<LayerBase> layer = MakeLayer<SoftsignLayer>(p);
  CORTADO_CHECK(layer != nullptr);
  return layer;
}

template <typename P>
class ToyElementwiseOpTest : public ::testing::Test {};
TYPED_TEST_SUITE(ToyElementwiseOpTest, test::AllPairs, test::PairNames);

TYPED_TEST(ToyElementwiseOpTest, MadeForThePairOfItsParameter) {
  auto layer = NewSoftsign<TypeParam>();
  EXPECT_STREQ(layer->type(), "Softsign");
  EXPECT_EQ(layer->forward_type(), type_of<typename TypeParam::Ftype>());
  EXPECT_EQ(layer->backward_type(), type_of<typename TypeParam::Btype>());
  using L = SoftsignLayer<typename TypeParam::Ftype, typename TypeParam::Btype>;
  EXPECT_NE(dynamic_cast<L*>(layer.get()), nullptr);
  EXPECT_EQ(layer->ExactNumBottomBlobs(), 1);
  EXPECT_TRUE(layer->AllowForceBackward(0));
}

// The formula, to an ulp of the storage type forward; backward within 2 ulps
// of the coarser type (dy is rounded to Btype, x read back as Btype).
TYPED_TEST(ToyElementwiseOpTest, ForwardBackwardValues) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  const std::vector<double> x = {-40, -3, -1, -0.25, 0, 0.5, 2, 7};
  const std::vector<double> dy = {1, -2, 0.5, 3, -1, 2, 0.25, -0.75};
  auto layer = NewSoftsign<TypeParam>();
  test::Blobs bottom, top;
  bottom.add({2, 4}, type_of<F>(), x);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), bottom[0]->shape());
  layer->Forward(bottom.vec, top.vec);
  std::vector<double> want(x.size()), dwant(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double xr = test::RoundTo<F>(x[i]);
    want[i] = Fn(xr);
    dwant[i] = test::RoundTo<B>(dy[i]) * Deriv(test::RoundTo<B>(xr));
  }
  test::ExpectNear<F>(test::GetData(*top[0]), want, 1, "top");
  test::SetDiff(top[0], dy, type_of<B>());
  layer->Backward(top.vec, {true}, bottom.vec);
  test::ExpectNear<test::Coarser<TypeParam>>(test::GetDiff(*bottom[0]), dwant, 2, "bottom diff");
}

// Finite differences for (double, double) and (float, float); every pair
// with a 16-bit type against the (double, double) layer on the same rounded
// inputs, within 2 (forward) and 4 (backward) epsilons of its coarser type.
TYPED_TEST(ToyElementwiseOpTest, Gradient) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  const std::vector<int> shape = {2, 3, 4, 5};
  if constexpr (test::is_fd_pair<TypeParam>()) {
    auto layer = NewSoftsign<TypeParam>();
    test::Blobs bottom, top;
    test::FillGaussian(bottom.add(shape, type_of<F>()), 0, 2, 3);
    top.add(type_of<F>());
    // The derivative is continuous at 0 but not smooth (|x|): there the
    // central difference is off by O(step), so values near 0 are skipped.
    test::GradientChecker().step(1e-2).threshold(1e-3).kink(0, 2e-2).CheckEltwise(*layer, bottom.vec, top.vec);
  } else {
    auto ref = NewSoftsign<test::TypePair<double, double>>();
    auto layer = NewSoftsign<TypeParam>();
    test::Blobs ref_bottom, ref_top, bottom, top;
    test::FillGaussian(ref_bottom.add(shape, DOUBLE), 0, 2, 3);
    std::vector<double> v = test::GetData(*ref_bottom[0]);
    for (double& e : v) e = test::RoundTo<F>(e);
    test::SetData(ref_bottom[0], v);
    bottom.add(shape, type_of<F>(), v);
    ref_top.add(DOUBLE);
    top.add(type_of<F>());
    ref->SetUp(ref_bottom.vec, ref_top.vec);
    layer->SetUp(bottom.vec, top.vec);
    ref->Forward(ref_bottom.vec, ref_top.vec);
    layer->Forward(bottom.vec, top.vec);
    std::vector<double> d = test::RandomVector(top[0]->count(), 5);
    for (double& e : d) e = test::RoundTo<B>(e);
    test::SetDiff(ref_top[0], d, DOUBLE);
    test::SetDiff(top[0], d, type_of<B>());
    ref->Backward(ref_top.vec, {true}, ref_bottom.vec);
    layer->Backward(top.vec, {true}, bottom.vec);
    const double unit = type_epsilon<test::Coarser<TypeParam>>();
    int failures = 0;
    test::detail::CompareToReference("top", test::GetData(*top[0]), test::GetData(*ref_top[0]), 2, unit, &failures);
    test::detail::CompareToReference("bottom diff", test::GetDiff(*bottom[0]), test::GetDiff(*ref_bottom[0]), 4, unit,
                                     &failures);
    EXPECT_EQ(failures, 0);
  }
}

// kInPlace false: the family refuses an in-place top, naming the field.
TYPED_TEST(ToyElementwiseOpTest, InPlaceRejected) {
  auto layer = NewSoftsign<TypeParam>("s1");
  test::Blobs blobs;
  blobs.add({2}, type_of<typename TypeParam::Ftype>());
  try {
    layer->SetUp(blobs.vec, blobs.vec);
    ADD_FAILURE() << "Softsign accepted in place";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "top");
    EXPECT_EQ(e.layer(), "s1");
    EXPECT_NE(std::string(e.what()).find("in place"), std::string::npos) << e.what();
  }
}

// The CPU loop is split over the cores in ranges of 2^16 values: a blob of
// several ranges gives the same values as the formula everywhere.
TYPED_TEST(ToyElementwiseOpTest, LargeBlobSplitOverTheCores) {
  using F = typename TypeParam::Ftype;
  auto layer = NewSoftsign<TypeParam>();
  test::Blobs bottom, top;
  test::FillUniform(bottom.add({3, 70001}, type_of<F>()), -50, 50, 9);
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  const std::vector<double> x = test::GetData(*bottom[0]), y = test::GetData(*top[0]);
  int bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(std::fabs(y[i] - Fn(x[i])) <= type_epsilon<F>())) ++bad;
  }
  EXPECT_EQ(bad, 0);
}

// On a GPU context: the kernels compiled from the same op, compared with the
// CPU run of the same pair (division and fabs only: exact for float and
// double, an ulp of the storage type at most where the rounding of 16-bit
// inputs differs).
TYPED_TEST(ToyElementwiseOpTest, GpuMatchesCpu) {
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  std::shared_ptr<Context> gpu_ctx = Context::Create(0);
  struct RestoreStream {
    ~RestoreStream() { Context::Cpu()->Activate(); }
  } restore;
  auto cpu = NewSoftsign<TypeParam>();
  auto gpu = NewSoftsign<TypeParam>();
  gpu->set_context(gpu_ctx);
  EXPECT_TRUE(gpu->HasGpuPath());
  const std::vector<int> shape = {4, 3, 17, 19};
  test::Blobs cb, ct, gb, gt;
  test::FillGaussian(cb.add(shape, type_of<F>()), 0, 3, 13);
  gb.add(shape, type_of<F>(), test::GetData(*cb[0]));
  ct.add(type_of<F>());
  gt.add(type_of<F>());
  cpu->SetUp(cb.vec, ct.vec);
  gpu_ctx->Activate();
  gpu->SetUp(gb.vec, gt.vec);
  Context::Cpu()->Activate();
  cpu->Forward(cb.vec, ct.vec);
  gpu_ctx->Activate();
  gpu->Forward(gb.vec, gt.vec);
  gpu_ctx->Synchronize();
  const std::vector<double> d = test::RandomVector(ct[0]->count(), 7);
  test::SetDiff(ct[0], d, type_of<B>());
  test::SetDiff(gt[0], d, type_of<B>());
  Context::Cpu()->Activate();
  cpu->Backward(ct.vec, {true}, cb.vec);
  gpu_ctx->Activate();
  gpu->Backward(gt.vec, {true}, gb.vec);
  gpu_ctx->Synchronize();
  int failures = 0;
  test::detail::CompareGpuToCpu("top", test::GetData(*gt[0]), test::GetData(*ct[0]), type_epsilon<F>(), &failures);
  test::detail::CompareGpuToCpu("bottom diff", test::GetDiff(*gb[0]), test::GetDiff(*cb[0]),
                                type_epsilon<test::Coarser<TypeParam>>(), &failures);
  EXPECT_EQ(failures, 0);
#endif
}

}  // namespace
}  // namespace cortado
