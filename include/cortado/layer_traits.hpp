#pragma once
// What the Net and the Solver need to know about a layer type, as data: each
// type's traits sit in its line of the registry (layer_registry.cpp), so no
// module matches type strings such as "Data" or "Convolution". A new layer
// type states its traits in that one line; a new trait is a member here with a
// default that is right for every type that does not set it.
//
// - shard_param: the LayerParameter field (a message with uint32 shard_id and
//   num_shards) of a data source whose records can be split among ranks
//   ("data_param" for Data, "image_data_param" for ImageData,
//   "hdf5_data_param" for HDF5Data); null for every other type.
// - batch_param: the LayerParameter field of a data source whose batch
//   `trainer time --batch_size` sets: its batch_size ("data_param" for Data),
//   or the first dimension of each of its shapes and its legacy num values
//   ("dummy_data_param" for DummyData, "input_param" for Input).
// - rank_file_param: the LayerParameter field (a message with a string
//   file_name) of a layer that writes a file, which each rank of a
//   data-parallel run writes under a name of its own (RankFileName):
//   "hdf5_output_param" for HDF5Output.
// - gemm: the layer's arithmetic is GEMMs (or cuDNN convolutions) whose
//   compute type follows forward_math/backward_math (Convolution,
//   Deconvolution, InnerProduct); other layers compute as types.hpp says
//   whatever those fields hold.
// - net_input: the layer's tops are the net's inputs (Input), which a caller
//   fills before Forward.
// - backward_reads_top_data (for the Net's data plan, net_memory.hpp):
//   whether the layer's backward may read its top's data (for an in-place
//   layer, the buffer it computes in), given its LayerParameter; null means
//   it may. A fused head's tails answer for themselves (a fused ReLU reads
//   y). "No" for Convolution, Deconvolution and InnerProduct (x, W, dy),
//   Scale (x or its copy), BatchNorm (x or its copy, except in place with
//   use_global_stats, where no copy is kept) and Eltwise but PROD.
// - sums_into_bottom: given its LayerParameter, whether the layer's forward
//   may compute top[0] in the memory of a bottom (each value read from the
//   bottoms at an index before the top's value there is written) and its
//   backward reads no bottom's data: Eltwise SUM.
// - layout (for the Net's layout plan, net_layout.hpp): given its
//   LayerParameter, how the layer treats channels-last (NHWC) blobs; null
//   means kNchwOnly. kAnyLayout: it computes value by value and ignores the
//   order (ReLU, Eltwise, Split, Dropout...): its bottoms and tops share one
//   layout. kNhwcCapable: its bottoms and tops may be NHWC, and it computes
//   the same values (BatchNorm, Scale and Bias over the channel axis).
//   kNhwcAnchor: capable, and faster in NHWC on a GPU (Convolution), the
//   reason a plan turns a blob NHWC at all. kNhwcSource: a layer without
//   bottoms that writes its first top in the layout the plan gives it (Data
//   and ImageData, DummyData with a constant filler), so that no conversion
//   follows it; its other tops are NCHW only.

#include <string>

namespace cortado {

class LayerParameter;

enum LayoutRole { kNchwOnly = 0, kAnyLayout = 1, kNhwcCapable = 2, kNhwcAnchor = 3, kNhwcSource = 4 };

struct LayerTraits {
  const char* shard_param = nullptr;
  const char* batch_param = nullptr;
  const char* rank_file_param = nullptr;
  bool gemm = false;
  bool net_input = false;
  bool (*backward_reads_top_data)(const LayerParameter&) = nullptr;
  bool (*sums_into_bottom)(const LayerParameter&) = nullptr;
  LayoutRole (*layout)(const LayerParameter&) = nullptr;
};

/// Whether `layer`'s backward may read its top's data (the trait; yes when unset).
bool BackwardReadsTopData(const LayerParameter& layer);
/// Whether `layer` may compute its top in a bottom's memory (the trait; no when unset).
bool SumsIntoBottom(const LayerParameter& layer);

/// How `layer` treats NHWC blobs (the trait; kNchwOnly when unset).
LayoutRole LayerLayoutRole(const LayerParameter& layer);

/// The traits of a layer type; an unknown type has the defaults (none).
const LayerTraits& layer_traits(const std::string& type);

/// Gives `layer` rank `rank`'s part of a data-parallel run of `ranks` ranks,
/// as its traits say; a layer with neither trait is left as it is.
/// - A shardable data source that reads shard s of S (positions s + kS)
///   reads shard s + rank*S of ranks*S: positions s + (j*ranks + rank)*S, so
///   the ranks' shards together are the layer's records.
/// - A layer that writes a file writes RankFileName(file_name, rank).
/// Nothing changes when ranks <= 1. Returns whether the layer changed.
bool ShardForRank(LayerParameter* layer, int rank, int ranks);

/// Sets the batch (the first dimension) of a data source with batch_param to
/// `batch` (positive: the caller checks); returns false, changing nothing,
/// for any other layer.
bool SetLayerBatch(LayerParameter* layer, int batch);

}  // namespace cortado
