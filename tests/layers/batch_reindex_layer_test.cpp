// BatchReindexLayer: hand-computed gather and its adjoint (repeated and
// unpicked rows), the index checks, finite differences for (double, double)
// and (float, float), 16-bit pairs against (double, double), GPU against CPU.

#include "cortado/layers/batch_reindex_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class BatchReindexLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(BatchReindexLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(BatchReindexLayerTest, ForwardBackward) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'BatchReindex'");
  test::Blobs bottom, top;
  bottom.add({3, 2}, type_of<F>(), {1, 2, 3, 4, 5, 6});
  bottom.add({5}, type_of<F>(), {2, 0, 2, 1, 2});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{5, 2}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{5, 6, 1, 2, 5, 6, 3, 4, 5, 6}));
  test::SetDiff(top[0], {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, type_of<B>());
  layer->Backward(top.vec, {true, false}, bottom.vec);
  // Row 0 is picked by i = 1, row 1 by i = 3, row 2 by i = 0, 2 and 4.
  EXPECT_EQ(test::GetDiff(*bottom[0]), (std::vector<double>{3, 4, 7, 8, 15, 18}));
}

TYPED_TEST(BatchReindexLayerTest, UnpickedRowsGetZeroAndMoreAxes) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'BatchReindex'");
  test::Blobs bottom, top;
  bottom.add({3, 1, 2}, type_of<F>(), {1, 2, 3, 4, 5, 6});
  bottom.add({2}, type_of<F>(), {1, 1});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 1, 2}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{3, 4, 3, 4}));
  test::SetDiff(bottom[0], {9, 9, 9, 9, 9, 9}, type_of<B>());  // overwritten, not accumulated
  test::SetDiff(top[0], {1, 2, 3, 4}, type_of<B>());
  layer->Backward(top.vec, {true, false}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), (std::vector<double>{0, 0, 4, 6, 0, 0}));
}

TYPED_TEST(BatchReindexLayerTest, BadIndexes) {
  using F = typename TypeParam::Ftype;
  struct Case { std::vector<double> permut; const char* message; };
  const Case cases[] = {
      {{0, 3}, "permut value 3 at position 1"},
      {{-1, 0}, "permut value -1 at position 0"},
      {{1, 1.5}, "permut value 1.5 at position 1"},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>("name: 'r' type: 'BatchReindex'");
    test::Blobs bottom, top;
    bottom.add({3, 2}, type_of<F>());
    bottom.add({2}, type_of<F>(), c.permut);
    top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    try {
      layer->Forward(bottom.vec, top.vec);
      ADD_FAILURE() << c.message << ": accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "bottom[1]") << e.what();
      EXPECT_EQ(e.layer(), "r");
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("[0, 3)"), std::string::npos) << e.what();
    }
  }
}

TYPED_TEST(BatchReindexLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  {
    auto layer = test::NewLayer<TypeParam>("type: 'BatchReindex'");
    test::Blobs bottom, top;
    bottom.add({3, 2}, type_of<F>());
    bottom.add({2, 1}, type_of<F>());
    top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << "a 2-axis permut was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "bottom") << e.what();
      EXPECT_NE(std::string(e.what()).find("(2, 1)"), std::string::npos) << e.what();
    }
  }
  {
    auto layer = test::NewLayer<TypeParam>("type: 'BatchReindex'");
    test::Blobs bottom, top;
    bottom.add({3, 2}, type_of<F>());
    bottom.add({2}, type_of<F>(), {0, 2});
    top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    layer->Forward(bottom.vec, top.vec);
    try {
      layer->Backward(top.vec, {true, true}, bottom.vec);
      ADD_FAILURE() << "back-propagation to permut was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "bottom[1]") << e.what();
    }
  }
}

// Bottom 0: uniform data; bottom 1: indexes into 4 rows with repeats, row 2
// never picked.
void FillData(int i, Blob* b) {
  if (i == 0) {
    test::FillUniform(b, -1, 1, 31);
    return;
  }
  const double kPermut[] = {3, 0, 3, 1, 3, 0, 1, 0, 3};
  std::vector<double> v(b->count());
  for (size_t j = 0; j < v.size(); ++j) v[j] = kPermut[j % 9];
  test::SetData(b, v);
}

// Forward copies (exact); backward sums up to three diffs in float and rounds
// once: within one unit of the coarser type.
TYPED_TEST(BatchReindexLayerTest, Gradient) {
  test::CheckLayer<TypeParam>("type: 'BatchReindex'", {{4, 3, 2}, {7}}, FillData, test::GradientSettings(),
                              test::ReferenceTolerance{0, 1}, {true, false});
}

// The GPU sums each row's diffs in the CPU's order: bit-identical.
TYPED_TEST(BatchReindexLayerTest, GpuMatchesCpu) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'BatchReindex'", {{4, 2, 3}, {9}}, FillData, test::GpuTolerance{0, 0},
                                      {true, false});
}

}  // namespace
}  // namespace cortado
