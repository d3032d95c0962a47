#pragma once
// The Net's fusion pass: which layers run as one pass over memory.
//
// After a net is built (wired, set up, backward planned), and when its
// NetParameter.fuse_layers is true (the default), FuseLayers finds the chains
// of layers/layer_fusion.hpp and hands each tail to its head:
//   a head (BatchNorm, Eltwise: a FusableLayer with one top) takes, in net
//   order, the layers that touch its top blob next, as long as each is a tail
//   (fusion_role() not kNone: ReLU with negative_slope 0, Scale with one
//   bottom, axis 1 and a (C) scale) that
//   - computes in place on that blob (one bottom, one top, both the blob);
//     so no other layer reads the value before it (a second reader would
//     have made the Net insert a Split, and the tail would not be in place);
//   - has the head's forward and backward types;
//   - has no loss weight (nor has the head), and runs backward exactly when
//     the head does (propagating to the blob then);
//   - and the head accepts it after the tails it has (AbsorbTail: BatchNorm
//     takes a Scale only without scale_bias and before a ReLU; Eltwise only
//     SUM takes a ReLU).
// The first layer touching the blob that fails these ends the chain. One tail
// is not in place: the residual add (kResidualAdd, an Eltwise SUM of the
// chain's blob and one other blob), taken only right after a chain of
// consecutive layers, with the head's types, no loss weight and the head's
// need for backward (and a gradient for the chain's blob when so); the chain
// goes on in place on the Eltwise's top. Every
// phase is fused alike: a TEST net's BatchNorm (global statistics) with its
// Scale and ReLU is one pass too.
// The tails stay in the net (names, blobs, parameters, log lines, `trainer
// time` rows, where they show about 0 ms): their Forward and Backward do
// nothing while fused. The prototxt, the weights files and the values are
// those of the unfused net (layer_fusion.hpp says to which bits).

#include <string>
#include <vector>

namespace cortado {

class Net;

/// One fused chain: the head's layer id and its tails' ids, in net order.
struct FusedChain {
  int head = -1;
  std::vector<int> tails;
};

/// Fuses the chains of `net` (already built; its layers not fused yet) and
/// returns them. The Net calls it at the end of its build when fuse_layers.
std::vector<FusedChain> FuseLayers(Net& net);

/// "head <- tail1, tail2" for each chain, for logs and tests.
std::string FusionSummary(const Net& net, const std::vector<FusedChain>& chains);

}  // namespace cortado
