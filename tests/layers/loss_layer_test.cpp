// The loss family's shared contract (layers/loss_layer.hpp), asserted once
// for all seven loss layers: default loss weights, the label count check and
// its message, the label-bottom gradient error, and the normalizer rules.

#include "cortado/layers/loss_layer.hpp"

#include <string>
#include <vector>

#include "test_util.hpp"

namespace cortado {
namespace {

using P = test::TypePair<float, float>;

// One loss layer and bottoms of shapes it accepts: 2 samples of 3 classes.
struct LossCase {
  std::string param;
  std::vector<std::vector<int>> shapes;
  int tops;
};

std::vector<LossCase> Cases() {
  return {
      {"type: 'SoftmaxWithLoss'", {{2, 3}, {2}}, 2},
      {"type: 'InfogainLoss'", {{2, 3}, {2}, {3, 3}}, 2},
      {"type: 'HingeLoss'", {{2, 3}, {2}}, 1},
      {"type: 'MultinomialLogisticLoss'", {{2, 3}, {2}}, 1},
      {"type: 'SigmoidCrossEntropyLoss'", {{2, 3}, {2, 3}}, 1},
      {"type: 'EuclideanLoss'", {{2, 3}, {2, 3}}, 1},
      {"type: 'ContrastiveLoss'", {{2, 3}, {2, 3}, {2}}, 1},
  };
}

// Labels 0 and 1 (valid class indices, similarity flags and targets alike).
void AddBottoms(const LossCase& c, test::Blobs* bottom) {
  for (const auto& shape : c.shapes) {
    Blob* b = bottom->add(shape, FLOAT);
    std::vector<double> v(b->count());
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<double>(k % 2);
    test::SetData(b, v);
  }
}

TEST(LossLayerFamily, DefaultLossWeightIsOneForTheLossTopOnly) {
  for (const LossCase& c : Cases()) {
    SCOPED_TRACE(c.param);
    auto layer = test::NewLayer<P>("name: 'loss' " + c.param);
    test::Blobs bottom, top;
    AddBottoms(c, &bottom);
    for (int t = 0; t < c.tops; ++t) top.add(FLOAT);
    layer->SetUp(bottom.vec, top.vec);
    EXPECT_EQ(layer->loss(0), 1.0);
    EXPECT_EQ(test::GetDiff(*top[0])[0], 1.0);  // the gradient flowing into the loss top
    if (c.tops > 1) EXPECT_EQ(layer->loss(1), 0.0);
    EXPECT_TRUE(top[0]->shape().empty()) << top[0]->shape_string();
  }
}

TEST(LossLayerFamily, LossWeightGivenIsKept) {
  for (const LossCase& c : Cases()) {
    SCOPED_TRACE(c.param);
    auto layer = test::NewLayer<P>("name: 'loss' loss_weight: 0.25 " + c.param);
    test::Blobs bottom, top;
    AddBottoms(c, &bottom);
    top.add(FLOAT);
    layer->SetUp(bottom.vec, top.vec);
    EXPECT_EQ(layer->loss(0), 0.25);
  }
}

// The label count error names bottom[1], the counts and both shapes.
TEST(LossLayerFamily, LabelCountMessage) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"type: 'HingeLoss'", "the label bottom holds 3 values (shape (3)) but the prediction (2, 3) needs 2"},
      {"type: 'MultinomialLogisticLoss'",
       "the label bottom holds 3 values (shape (3)) but the prediction (2, 3) needs 2"},
      {"type: 'SoftmaxWithLoss'",
       "the label bottom holds 3 values (shape (3)) but the prediction (2, 3) with softmax axis 1 needs 2"},
  };
  for (const auto& [param, message] : cases) {
    SCOPED_TRACE(param);
    auto layer = test::NewLayer<P>("name: 'loss' " + param);
    test::Blobs bottom, top;
    bottom.add({2, 3}, FLOAT);
    bottom.add({3}, FLOAT, {0, 1, 2});
    top.add(FLOAT);
    try {
      layer->SetUp(bottom.vec, top.vec);
      ADD_FAILURE() << "3 labels for 2 samples were accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "bottom[1]");
      EXPECT_EQ(e.message(), message);
    }
  }
}

TEST(LossLayerFamily, NoGradientToLabels) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"type: 'SoftmaxWithLoss'", "label"},
      {"type: 'HingeLoss'", "label"},
      {"type: 'MultinomialLogisticLoss'", "label"},
      {"type: 'SigmoidCrossEntropyLoss'", "target"},
  };
  for (const auto& [param, what] : cases) {
    SCOPED_TRACE(param);
    auto layer = test::NewLayer<P>("name: 'loss' " + param);
    test::Blobs bottom, top;
    bottom.add({2, 3}, FLOAT, {0.1, 0.2, 0.7, 0.3, 0.3, 0.4});
    if (param.find("Sigmoid") != std::string::npos) {
      bottom.add({2, 3}, FLOAT, {0, 1, 0, 1, 0, 1});
    } else {
      bottom.add({2}, FLOAT, {2, 0});
    }
    top.add(FLOAT);
    layer->SetUp(bottom.vec, top.vec);
    layer->Forward(bottom.vec, top.vec);
    try {
      layer->Backward(top.vec, {true, true}, bottom.vec);
      ADD_FAILURE() << "a gradient to the " << what << " bottom was accepted";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "propagate_down");
      EXPECT_EQ(e.message(), "cannot back-propagate to the " + what + " bottom");
    }
  }
}

// A probe that exposes the base's normalizer rules.
class ProbeLoss : public LossLayer<float, float> {
 public:
  using LossLayer<float, float>::LossLayer;
  const char* type() const override { return "Probe"; }
  void Reshape(const BlobVec&, const BlobVec&) override {}
  void Read() { ReadLossParam(); }
  double Cpu(double full, double valid, double batch) const { return Normalizer(full, valid, batch); }
  double Fixed(double full, double batch) const { return FixedNormalizer(full, batch); }

 protected:
  void Forward_cpu(const BlobVec&, const BlobVec&) override {}
  void Backward_cpu(const BlobVec&, const std::vector<bool>&, const BlobVec&) override {}
};

TEST(LossLayerFamily, Normalizers) {
  struct Case {
    std::string loss_param;
    double cpu, fixed;  // for full 12, valid 5, batch 3
  };
  const std::vector<Case> cases = {
      {"", 5, 12},  // VALID, nothing ignored: every position is valid, known on the host
      {"ignore_label: 1", 5, -1},  // VALID with an ignore_label: the device counts
      {"normalization: FULL ignore_label: 1", 12, 12},
      {"normalization: BATCH_SIZE", 3, 3},
      {"normalization: NONE", 1, 1},
      {"normalize: false", 3, 3},  // the deprecated field: BATCH_SIZE
      {"normalize: true ignore_label: 0", 5, -1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.loss_param);
    ProbeLoss layer(test::MakeParam<P>("name: 'probe' loss_param { " + c.loss_param + " }"));
    layer.Read();
    EXPECT_EQ(layer.Cpu(12, 5, 3), c.cpu);
    EXPECT_EQ(layer.Fixed(12, 3), c.fixed);
  }
  ProbeLoss none(test::MakeParam<P>("name: 'probe' loss_param { normalization: FULL }"));
  none.Read();
  EXPECT_EQ(none.Cpu(0, 0, 0), 1.0);  // at least 1
  EXPECT_EQ(none.Fixed(0, 0), 1.0);
}

}  // namespace
}  // namespace cortado
