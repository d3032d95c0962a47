#pragma once
// For the layers whose backward reads x: setting one up in place (top ==
// bottom) must be a field error on "top", not a silently wrong gradient.
#include <gtest/gtest.h>

#include <string>

#include "test_util.hpp"

namespace cortado {
namespace test {

template <typename P>
void ExpectInPlaceRejected(const std::string& text) {
  auto layer = NewLayer<P>(text);
  Blobs blobs;
  blobs.add({2}, type_of<typename P::Ftype>());
  try {
    layer->SetUp(blobs.vec, blobs.vec);
    ADD_FAILURE() << "accepted in place: " << text;
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "top") << e.what();
    EXPECT_NE(std::string(e.what()).find("in place"), std::string::npos) << e.what();
  }
}

}  // namespace test
}  // namespace cortado
