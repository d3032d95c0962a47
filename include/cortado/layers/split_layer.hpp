#pragma once
// Split: hands one bottom to several consumers. The Net inserts it where a
// blob feeds more than one layer.
//
//   forward:  top_k = x for every k (a copy, so a consumer computing in place
//             on one top cannot disturb the others)
//   backward: dx = sum_k dtop_k, accumulated in math_t and rounded once
//
// Bottoms: 1, any shape. Tops: 1 or more, each the bottom's shape.
// Fields: none. In place: no.

#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class SplitLayer : public Layer<Ftype, Btype> {
 public:
  using Layer<Ftype, Btype>::Layer;
  const char* type() const override { return "Split"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }

  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
};

}  // namespace cortado
