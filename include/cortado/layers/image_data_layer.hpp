#pragma once
// Caffe's ImageData: reads the images named in a list file with OpenCV, as
// the Data layer reads an LMDB (it is a DataLayer: the same tops, prefetch,
// transform threads, device copy, shards, determinism and Seek).
//
// Tops: data (N, C, H', W') in Ftype; label (N), optional, float.
//
// image_data_param fields:
//   source (required): the list file, one "<path> <label>" a line, the
//     label after the last space (data/image_list.hpp); a bad line is an
//     error naming the file and the line
//   root_folder: prefixed to every path, as a string (Caffe's rule: give it
//     its trailing '/')
//   batch_size (default 1), rand_skip, threads, prefetch, shard_id,
//     num_shards: as in data_param
//   shuffle (default false): each epoch reads the list in a new order, a
//     permutation drawn from the layer's seed and the epoch's number (so a
//     resumed run, a Seek, and shards see the order an uninterrupted single
//     reader sees); false: the list's order
//   new_height, new_width (both or neither): resize every image to that
//     size (bilinear) before the transformation
//   short_side (default 0 = off; NVCaffe's): resize every image (bilinear)
//     so that its shorter side is short_side and the longer one
//     longer * short_side / shorter (rounded down); new_height/new_width
//     are then not used (NVCaffe's rule, noted in the log)
//   is_color (default true): decode as 3 channels (BGR) or as 1 (gray)
//   scale, mean_file, crop_size, mirror: legacy copies of transform_param's
//     fields (setting one in both places is an error)
//   cache, precache, dataset_share_per_node: NVCaffe's; accepted without
//     effect, one line in the log (DataLayer::AcceptedFields)
// transform_param: as for Data (data/data_transformer.hpp).
//
// The first image this reader reads gives (C, H, W) (after any resize); an
// image of another shape, a file that cannot be read, or one OpenCV cannot
// decode is an error naming the list, the line and the path, raised by the
// Forward that would use it. Each file is read by the reader thread and
// decoded by the transform threads. A build without OpenCV cannot decode.

#include "cortado/layers/data_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class ImageDataLayer : public DataLayer<Ftype, Btype> {
 public:
  CORTADO_LAYER_TYPE(DataLayer, "ImageData")
 protected:
  DataSourceParams SourceParams() const override;
  TransformationParameter MergedTransformParam() const override;
  void ValidateMore() const override;
  std::unique_ptr<RecordSource> OpenSource(uint64_t seed) override;
  void ConfigureTransformer(DataTransformer* t) const override;
  std::vector<typename DataLayer<Ftype, Btype>::AcceptedField> AcceptedFields() const override;
};

}  // namespace cortado
