#pragma once
// What the tests of the source layers (no bottoms: Data, ImageData,
// DummyData) share: a fixture that sets one up with two tops (data, label)
// and reads its batches, and the FieldError its SetUp throws.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cortado/util/rng.hpp"
#include "test_util.hpp"

namespace cortado {
namespace test {

/// L<Ftype, Btype> of the type pair P, with tops data (Ftype) and label.
template <template <typename, typename> class L, typename P>
class SourceLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  using B = typename P::Btype;

  /// Sets up the layer from `text`.
  void SetUp(const std::string& text) {
    layer_ = std::make_unique<L<F, B>>(MakeParam<P>(text));
    top_ = Blobs();
    top_.add(type_of<F>());
    top_.add(type_of<F>());
    layer_->SetUp({}, top_.vec);
  }
  void Forward() { layer_->Forward({}, top_.vec); }
  std::vector<double> Data() const { return GetData(*top_[0]); }
  std::vector<float> Labels() const {
    const float* p = top_[1]->template cpu_data<float>();
    return std::vector<float>(p, p + top_[1]->count());
  }
  /// The (data, labels) of `batches` batches of a layer set up from `text`
  /// with the process seed at `seed`, after Seek(seek) when seek >= 0.
  using Run = std::vector<std::pair<std::vector<double>, std::vector<float>>>;
  Run Batches(int64_t seed, const std::string& text, int64_t seek, int batches) {
    set_random_seed(seed);
    SetUp(text);
    if (seek >= 0) layer_->Seek(seek);
    Run out;
    for (int b = 0; b < batches; ++b) {
      Forward();
      out.emplace_back(Data(), Labels());
    }
    return out;
  }

  std::unique_ptr<L<F, B>> layer_;
  Blobs top_;
};

/// Sets up L<float, float> from `text` with `num_top` FLOAT tops and returns
/// the FieldError it throws (a test failure, and an empty error, if none).
template <template <typename, typename> class L>
FieldError SourceSetUpError(const std::string& text, int num_top) {
  L<float, float> layer(MakeParam<TypePair<float, float>>(text));
  Blobs top;
  for (int i = 0; i < num_top; ++i) top.add(FLOAT);
  try {
    layer.SetUp({}, top.vec);
  } catch (const FieldError& e) {
    return e;
  }
  ADD_FAILURE() << "SetUp did not throw for: " << text;
  return FieldError("", "", "", "");
}

}  // namespace test
}  // namespace cortado
