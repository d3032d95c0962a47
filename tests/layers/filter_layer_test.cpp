// FilterLayer: hand-computed selection over two data bottoms (the SetUp
// shape and the filtered shape), a (N, 1) selector, an empty selection, the
// shape and back-propagation checks, finite differences for (double, double)
// and (float, float), 16-bit pairs against (double, double), GPU against CPU.

#include "cortado/layers/filter_layer.hpp"

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class FilterLayerTest : public ::testing::Test {};
TYPED_TEST_SUITE(FilterLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(FilterLayerTest, ForwardBackward) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Filter'");
  test::Blobs bottom, top;
  bottom.add({4, 2}, type_of<F>(), {1, 2, 3, 4, 5, 6, 7, 8});
  bottom.add({4}, type_of<F>(), {10, 20, 30, 40});
  bottom.add({4}, type_of<F>(), {0, 1, 0, -2});  // any non-zero value selects
  top.add(type_of<F>());
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  // SetUp gives the full batch; the selector is read from the first forward on.
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{4, 2}));
  EXPECT_EQ(top[1]->shape(), (std::vector<int>{4}));
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 2}));
  EXPECT_EQ(top[1]->shape(), (std::vector<int>{2}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{3, 4, 7, 8}));
  EXPECT_EQ(test::GetData(*top[1]), (std::vector<double>{20, 40}));
  test::SetDiff(bottom[0], std::vector<double>(8, 9), type_of<B>());  // overwritten
  test::SetDiff(top[0], {1, 2, 3, 4}, type_of<B>());
  test::SetDiff(top[1], {5, 6}, type_of<B>());
  layer->Backward(top.vec, {true, true, false}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), (std::vector<double>{0, 0, 1, 2, 0, 0, 3, 4}));
  EXPECT_EQ(test::GetDiff(*bottom[1]), (std::vector<double>{0, 5, 0, 6}));
}

TYPED_TEST(FilterLayerTest, ColumnSelectorAndReselection) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("type: 'Filter'");
  test::Blobs bottom, top;
  bottom.add({3, 1, 2}, type_of<F>(), {1, 2, 3, 4, 5, 6});
  Blob* sel = bottom.add({3, 1}, type_of<F>(), {1, 0, 1});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{2, 1, 2}));
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{1, 2, 5, 6}));
  test::SetData(sel, {0, 1, 1});  // every forward reads the selector again
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{3, 4, 5, 6}));
}

// No item selected: empty tops of shape (0, ...); backward writes zeros.
TYPED_TEST(FilterLayerTest, NothingSelected) {
  using F = typename TypeParam::Ftype;
  using B = typename TypeParam::Btype;
  auto layer = test::NewLayer<TypeParam>("type: 'Filter'");
  test::Blobs bottom, top;
  bottom.add({3, 2}, type_of<F>(), {1, 2, 3, 4, 5, 6});
  bottom.add({3}, type_of<F>(), {0, 0, 0});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_EQ(top[0]->shape(), (std::vector<int>{0, 2}));
  EXPECT_EQ(top[0]->count(), 0u);
  test::SetDiff(bottom[0], std::vector<double>(6, 9), type_of<B>());
  layer->Backward(top.vec, {true, false}, bottom.vec);
  EXPECT_EQ(test::GetDiff(*bottom[0]), std::vector<double>(6, 0));
}

TYPED_TEST(FilterLayerTest, Errors) {
  using F = typename TypeParam::Ftype;
  struct Case { std::vector<std::vector<int>> bottoms; int tops; const char* field; const char* message; };
  const Case cases[] = {
      {{{4, 2}, {4}}, 2, "top", "one top per data bottom"},
      {{{4, 2}, {4, 2}}, 1, "bottom", "(N) or (N, 1)"},
      {{{4, 2}, {3, 2}, {4}}, 2, "bottom", "bottom[1] has shape (3, 2)"},
  };
  for (const Case& c : cases) {
    auto layer = test::NewLayer<TypeParam>("name: 'f' type: 'Filter'");
    test::Blobs bottom, top;
    for (const auto& s : c.bottoms) bottom.add(s, type_of<F>());
    for (int t = 0; t < c.tops; ++t) top.add(type_of<F>());
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << c.message << ": accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), c.field) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
  auto layer = test::NewLayer<TypeParam>("type: 'Filter'");
  test::Blobs bottom, top;
  bottom.add({2, 2}, type_of<F>());
  bottom.add({2}, type_of<F>(), {1, 1});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  try {
    layer->Backward(top.vec, {true, true}, bottom.vec);
    ADD_FAILURE() << "back-propagation to the selector was accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "bottom[1]") << e.what();
  }
}

// Data bottoms uniform; the last bottom selects items 0, 2 and 3 of 5.
void FillSelect(int i, Blob* b, int selector) {
  if (i < selector) {
    test::FillUniform(b, -1, 1, 40 + i);
    return;
  }
  test::SetData(b, {1, 0, 1, 1, 0});
}

// Pure copies: exact in every pair.
TYPED_TEST(FilterLayerTest, Gradient) {
  test::CheckLayer<TypeParam>("type: 'Filter'", {{5, 3}, {5}}, [](int i, Blob* b) { FillSelect(i, b, 1); },
                              test::GradientSettings(), test::ReferenceTolerance{0, 0}, {true, false});
  test::CheckLayer<TypeParam>("type: 'Filter'", {{5, 3}, {5, 2, 2}, {5, 1}},
                              [](int i, Blob* b) { FillSelect(i, b, 2); }, test::GradientSettings(),
                              test::ReferenceTolerance{0, 0}, {true, true, false}, 2);
}

TYPED_TEST(FilterLayerTest, GpuMatchesCpu) {
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Filter'", {{5, 2, 3}, {5, 4}, {5}},
                                      [](int i, Blob* b) { FillSelect(i, b, 2); }, test::GpuTolerance{0, 0},
                                      {true, true, false}, 2);
}

}  // namespace
}  // namespace cortado
