#pragma once
// The FieldError a source layer (no bottoms) throws at SetUp, for the tests
// of its parameter errors.
#include <gtest/gtest.h>

#include <string>

#include "test_util.hpp"

namespace cortado {
namespace test {

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
