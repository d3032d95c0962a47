#pragma once
// Caffe's HDF5Output: appends each batch of its bottoms to an HDF5 file,
// bottom[0] to dataset "data" and bottom[1], if given, to "label" (Caffe's
// names), as float, each (rows, dims[1..]) growing by the batch's rows.
//
// hdf5_output_param fields:
//   file_name (required): created at set-up (an existing file is replaced).
//     In a multi-rank run the solver gives rank r > 0 the name with
//     "_rank<r>" before its extension, so the ranks do not write one file.
//
// Every Forward's rows are flushed to the file before it returns: a run
// that stops loses no batch already written. Unlike Caffe's layer, which
// could write its datasets only once, every batch is kept. Tops: none.
// Backward: none (its bottoms get no gradient from it). GPU: the bottoms are
// read on the host, which writing a file needs.
#include <memory>
#include <string>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/io/hdf5.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class HDF5OutputLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "HDF5Output", BlobRules().Bottoms(1, 2).Tops(0).NoForcedBackward())
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_HOST_PASSES

 private:
  std::unique_ptr<hdf5::AppendWriter> writer_;
};

}  // namespace cortado
