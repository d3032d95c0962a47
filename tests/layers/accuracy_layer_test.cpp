#include "cortado/layers/accuracy_layer.hpp"

#include <cmath>

#include "test_util.hpp"

namespace cortado {
namespace {

template <typename P>
class AccuracyLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  // 5 samples x 4 classes; the top-2 classes of each row are noted.
  const std::vector<double> scores_ = {
      0.1, 0.7, 0.15, 0.05,   // top1 1, top2 {1, 2}
      0.4, 0.3, 0.2, 0.1,     // top1 0, top2 {0, 1}
      0.0, 0.25, 0.5, 0.25,   // top1 2, then a tie 1/3
      0.3, 0.3, 0.2, 0.2,     // tie 0/1 on top
      0.05, 0.05, 0.1, 0.8};  // top1 3, top2 {3, 2}
  std::vector<double> Run(const std::string& text, const std::vector<double>& labels, int num_top = 1) {
    auto layer = test::NewLayer<P>("name: 'acc' type: 'Accuracy' " + text);
    test::Blobs bottom, top;
    bottom.add({5, 4}, type_of<F>(), scores_);
    bottom.add({5}, type_of<F>(), labels);
    for (int k = 0; k < num_top; ++k) top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    EXPECT_FALSE(layer->AllowForceBackward(0));
    EXPECT_EQ(layer->loss(0), 0.0);  // not a loss layer
    layer->Forward(bottom.vec, top.vec);
    EXPECT_EQ(top[0]->shape(), std::vector<int>{});
    std::vector<double> out = test::GetData(*top[0]);
    if (num_top > 1) {
      EXPECT_EQ(top[1]->shape(), std::vector<int>{4});
      const std::vector<double> per_class = test::GetData(*top[1]);
      out.insert(out.end(), per_class.begin(), per_class.end());
    }
    return out;
  }
};
TYPED_TEST_SUITE(AccuracyLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(AccuracyLayerTest, Top1) {
  // Correct: rows 0 (1), 1 (0), 4 (3); row 2 label 1 is wrong; row 3 label 0
  // ties with class 1, which counts against it.
  const std::vector<double> acc = this->Run("", {1, 0, 1, 0, 3});
  EXPECT_FLOAT_EQ(acc[0], 3.0 / 5);
}

TYPED_TEST(AccuracyLayerTest, Top2) {
  // Row 2 label 1: classes 2 (0.5) and 3 (0.25, a tie) score at least as high: wrong.
  // Row 3 label 0: only class 1 ties: right.
  const std::vector<double> acc = this->Run("accuracy_param { top_k: 2 }", {2, 1, 1, 0, 0});
  // Rows: 0 right (2 in {1,2}), 1 right, 2 wrong, 3 right, 4 wrong (class 0 below 2 and 3).
  EXPECT_FLOAT_EQ(acc[0], 3.0 / 5);
}

// A NaN score is a wrong prediction (Caffe's comparisons count it as right,
// so a diverged net would report accuracy 1): a NaN true score loses even
// with top_k = C, and a NaN rival counts as scoring higher.
TYPED_TEST(AccuracyLayerTest, NaNScoresAreWrong) {
  using F = typename TestFixture::F;
  const double nan = std::nan("");
  for (int k : {1, 3}) {
    SCOPED_TRACE(k);
    auto layer = test::NewLayer<TypeParam>(str_cat("name: 'acc' type: 'Accuracy' accuracy_param { top_k: ", k, " }"));
    test::Blobs bottom, top;
    bottom.add({4, 3}, type_of<F>(), {nan, nan, nan,      // all NaN: wrong
                                      0.1, nan, 0.2,      // truth 0.2 (class 2), a NaN rival: wrong
                                      0.5, 0.25, 0.125,   // truth class 0, finite: right
                                      nan, 0.5, 0.25});   // truth class 1 with a NaN elsewhere: wrong
    bottom.add({4}, type_of<F>(), {0, 2, 0, 1});
    top.add(type_of<F>());
    layer->SetUp(bottom.vec, top.vec);
    layer->Forward(bottom.vec, top.vec);
    // top_k 3 of 3 classes: every finite truth is right, a NaN truth is not.
    EXPECT_FLOAT_EQ(test::GetData(*top[0])[0], k == 1 ? 1.0 / 4 : 3.0 / 4);
  }
}

TYPED_TEST(AccuracyLayerTest, IgnoreLabelAndPerClass) {
  const std::vector<double> acc = this->Run("accuracy_param { ignore_label: 3 }", {1, 0, 2, 3, 1}, 2);
  // Ignored: row 3. Rows 0 (1) right, 1 (0) right, 2 (2) right, 4 (1) wrong.
  EXPECT_FLOAT_EQ(acc[0], 3.0 / 4);
  EXPECT_FLOAT_EQ(acc[1], 1.0);  // class 0: 1 of 1
  EXPECT_FLOAT_EQ(acc[2], 0.5);  // class 1: 1 of 2
  EXPECT_FLOAT_EQ(acc[3], 1.0);  // class 2: 1 of 1
  EXPECT_FLOAT_EQ(acc[4], 0.0);  // class 3: never counted
}

TYPED_TEST(AccuracyLayerTest, SpatialAxis) {
  using F = typename TypeParam::Ftype;
  // (1, 3, 2): classes on axis 1, two positions.
  auto layer = test::NewLayer<TypeParam>("type: 'Accuracy'");
  test::Blobs bottom, top;
  bottom.add({1, 3, 2}, type_of<F>(), {1, 0, 2, 0, 3, 5});  // position 0: class 2; position 1: class 2
  bottom.add({1, 2}, type_of<F>(), {2, 1});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  EXPECT_FLOAT_EQ(test::GetData(*top[0])[0], 0.5);
}

TYPED_TEST(AccuracyLayerTest, Float16ScoresCloseTogether) {
  using F = typename TypeParam::Ftype;
  // 1000.25 is stored exactly in float and double but rounds to 1000 in
  // float16 (ulp 0.5, ties to even) and bfloat16 (ulp 4): there the true class ties with class 1,
  // and a tie counts against it.
  auto layer = test::NewLayer<TypeParam>("type: 'Accuracy'");
  test::Blobs bottom, top;
  bottom.add({1, 2}, type_of<F>(), {1000.25, 1000});
  bottom.add({1}, type_of<F>(), {0});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  const double want = is_half_v<F> ? 0.0 : 1.0;
  EXPECT_FLOAT_EQ(test::GetData(*top[0])[0], want);
}

TYPED_TEST(AccuracyLayerTest, BadTopK) {
  using F = typename TypeParam::Ftype;
  auto layer = test::NewLayer<TypeParam>("name: 'acc' type: 'Accuracy' accuracy_param { top_k: 5 }");
  test::Blobs bottom, top;
  bottom.add({5, 4}, type_of<F>());
  bottom.add({5}, type_of<F>());
  top.add(type_of<F>());
  try {
    layer->SetUp(bottom.vec, top.vec);
    ADD_FAILURE() << "top_k 5 with 4 classes was accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "accuracy_param.top_k");
  }
}

TYPED_TEST(AccuracyLayerTest, BadLabel) {
  try {
    this->Run("", {0, 1, 4, 0, 0});
    ADD_FAILURE() << "label 4 with 4 classes was accepted";
  } catch (const FieldError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.field(), "bottom[1]");
    EXPECT_NE(msg.find("label value 4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[0, 4)"), std::string::npos) << msg;
  }
}

// GPU against CPU: integer counts on both sides, so identical; top_k, the
// per-class top, an ignored label and the spatial layout.
TYPED_TEST(AccuracyLayerTest, GpuMatchesCpu) {
  auto fill = [](int i, Blob* b) {
    if (i == 0) test::FillUniform(b, -1, 1, 20); else test::FillLabels(b, 6, 21);
  };
  for (const char* param : {"", "accuracy_param { top_k: 3 }", "accuracy_param { ignore_label: 2 }"}) {
    SCOPED_TRACE(param);
    test::CheckGpuAgainstCpu<TypeParam>(str_cat("type: 'Accuracy' ", param), {{32, 6}, {32}}, fill,
                                        test::GpuTolerance{0, 0}, {false, false}, 2);
  }
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Accuracy' accuracy_param { top_k: 2 }", {{3, 6, 2, 2}, {3, 1, 2, 2}},
                                      fill, test::GpuTolerance{0, 0}, {false, false}, 2);
  auto with_nan = [&](int i, Blob* b) {
    fill(i, b);
    if (i == 0) test::SetData(b, [&] {
        std::vector<double> v = test::GetData(*b);
        for (size_t j = 0; j < v.size(); j += 7) v[j] = std::nan("");
        return v;
      }());
  };
  test::CheckGpuAgainstCpu<TypeParam>("type: 'Accuracy'", {{32, 6}, {32}}, with_nan, test::GpuTolerance{0, 0},
                                      {false, false}, 2);
}

// On the GPU a bad label is recorded by the kernel and reported by the
// next Forward, once the stream has been synchronized.
TYPED_TEST(AccuracyLayerTest, GpuBadLabelIsReported) {
#ifndef CORTADO_USE_CUDA
  GTEST_SKIP() << "no CUDA backend in this build";
#else
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device available";
  using F = typename TypeParam::Ftype;
  test::ActiveGpuContext gpu;
  const std::shared_ptr<Context>& ctx = gpu.ctx;
  auto layer = test::NewLayer<TypeParam>("name: 'acc' type: 'Accuracy'");
  layer->set_context(ctx);
  test::Blobs bottom, top;
  bottom.add({5, 4}, type_of<F>(), this->scores_);
  bottom.add({5}, type_of<F>(), {1, 0, 2, 4, 3});
  top.add(type_of<F>());
  layer->SetUp(bottom.vec, top.vec);
  layer->Forward(bottom.vec, top.vec);
  ctx->Synchronize();
  try {
    layer->Forward(bottom.vec, top.vec);
    ADD_FAILURE() << "a label of 4 with 4 classes was not reported";
  } catch (const FieldError& e) {
    EXPECT_NE(std::string(e.what()).find("label value 4 at position 3"), std::string::npos) << e.what();
  }
  ctx->Synchronize();
#endif
}

}  // namespace
}  // namespace cortado
