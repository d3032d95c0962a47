#pragma once
// The Net's gradient memory plan: blobs whose gradients (diffs) are never
// needed at the same time during backward share one buffer.
//
// In Caffe every blob owns a data and a diff buffer, so a net holds twice its
// activations. But an activation's gradient lives only from the backward of
// the last layer that touches its blob (in net order; the first to run in
// backward) to the backward of the first one. ShareDiffBuffers computes that
// span for each blob and, like a register allocator, gives blobs of the same
// size whose spans do not overlap one diff buffer. For ResNet-50 this takes
// the diffs from one buffer per blob to a few per size: the net's memory
// falls by about its activations' gradients.
//
// Which diffs share, and why the values are those of the unshared net:
// - Only diffs that some layer writes in backward, and that every layer
//   reading them as a bottom writes first: Caffe's layers overwrite their
//   bottoms' diffs, so such a diff never shows what an earlier owner of the
//   buffer left. A blob that a consumer does not propagate to (propagate_down
//   false, or a consumer that runs no backward) keeps its own buffer when a
//   layer reads its diff: it must stay zero there (a Split sums its tops'
//   diffs, written or not).
// - Never the net's inputs and outputs, nor a blob with a loss weight (its
//   diff holds the loss weight, set once), nor blobs whose diff already
//   shares a buffer with a blob of another size.
// - The span of a blob is the range of the layers running backward that
//   have it as a bottom or a top (in-place layers and the fused tails of
//   net_fusion.hpp compute in place, so they touch the same blob; where a
//   head's pass takes no aliased operands, fused_pass_may_alias() false, as
//   for cuDNN's BatchNorm, what a fused tail touches its head touches too:
//   the residual add's sum is then in the BatchNorm's span, and its input's
//   gradient never shares the sum's); blobs
//   that already share a diff (Reshape, Flatten: a view of their bottom) are
//   one group with the union of their spans. Two groups share a buffer only
//   if their spans do not touch: the layer at the end of one span reads that
//   diff, the layer at the start of the next writes its own.
// - Sizes are counts of values: a buffer is shared only between groups of
//   the same count (Blob::ShareDiff's contract). A blob later reshaped to
//   another count leaves its group for a buffer of its own (Blob::Reshape),
//   so a net whose shapes change stays correct, with less sharing.
//
// What a user sees: after Backward, the diff of an inner blob may hold
// another blob's gradient (the parameters' gradients, the inputs' and the
// outputs' are untouched). The Net plans this at the end of its build when
// it runs backward; the net's field share_diffs: false turns it off (every
// blob keeps its own diff, as in Caffe), for debugging a layer's gradients
// or for comparison.
//
// The data plan (ShareDataBuffers) saves one activation per residual block.
// A layer whose forward may compute its top in the memory of a bottom
// (layer_traits.hpp's sums_into_bottom: Eltwise SUM, the residual add, which
// reads the bottoms' values at an index before writing the top's there and
// reads no bottom's data in backward) does so for a bottom B whose data
// nobody reads after that layer's forward:
// - no layer after it in the net touches B, and no other layer has B as a
//   bottom only (a consumer of B may read it in backward);
// - every layer with B as a top (its producer, the in-place layers on it)
//   either runs no backward or does not read its top's data backward
//   (layer_traits.hpp's backward_reads_top_data: Convolution, InnerProduct,
//   Scale, BatchNorm; a ReLU fused into the BatchNorm reads it);
// - B is not an input or output of the net, has no loss weight, holds the
//   top's count and shares its data with no other blob (a Split's tops, a
//   view, a parameter).
// - the layer is not a residual add fused into a head whose pass takes no
//   aliased operands (fused_pass_may_alias(): cuDNN's BatchNorm);
// B then uses the top's data tensor: B's producer writes it, the layer sums
// into it. In ResNet-50 this is the last BatchNorm's output of each block
// (16 activations). After Forward, such a B shows the top's values; a net
// that runs no backward (a TEST net, feature extraction) is left as it is,
// and the net's field share_data: false turns the plan off.
//
// BatchNorm out of place (BatchNormOutOfPlace, on the NetParameter before
// the build). A BatchNorm computed in place (top = bottom = B, Caffe's
// ResNet files) must keep a copy of its input for its backward: one more
// pass over memory in every forward. In a TRAIN net, where B's producer P
// is the layer just before it on B (P has bottoms, does not compute in
// place on B, and no layer between the two touches B), P's top becomes
// "B/bn_input" (a free name), which the BatchNorm reads: it writes B and
// keeps no copy. The memory is the same (a blob instead of the copy); after
// Forward B shows what it showed before (the BatchNorm's output, and what
// the layers in place after it made of it); the new blob shows P's output,
// which the in-place net overwrote. The net's field
// batch_norm_out_of_place: false turns it off.
#include <cstddef>
#include <string>

namespace cortado {

class Net;
class NetParameter;

/// Applies BatchNorm out of place (above) to `param` (after the splits are
/// inserted); returns how many BatchNorm layers now read a renamed bottom.
/// The Net calls it for a TRAIN net whose batch_norm_out_of_place is true.
int BatchNormOutOfPlace(NetParameter* param);

struct DiffSharingStats {
  int groups = 0;         // blobs (groups of blobs already sharing) whose diffs were planned
  int buffers = 0;        // buffers they use now
  size_t values_before = 0;  // values of the planned diffs, one buffer each
  size_t values_after = 0;   // values of the buffers they share
};

/// Plans and applies the sharing above to `net` (built, fused). Returns what
/// it did; for a net without backward, nothing. The Net calls it where its
/// share_diffs is true.
DiffSharingStats ShareDiffBuffers(Net& net);

struct DataSharingStats {
  int blobs = 0;      // bottoms whose data now lives in their layer's top
  size_t values = 0;  // the values of the buffers they no longer need
};

/// Plans and applies the data sharing above to `net` (built, fused). The
/// Net calls it where its share_data is true.
DataSharingStats ShareDataBuffers(Net& net);

/// "16 blobs computed in their consumer's top: 12.8M values saved".
std::string DataSharingSummary(const DataSharingStats& stats);

/// "12 diff buffers for 150 blobs: 1,234 MiB instead of 5,678 MiB at FP16".
std::string DiffSharingSummary(const DiffSharingStats& stats);

}  // namespace cortado
