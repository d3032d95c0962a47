#pragma once
// The HDF5 files of the HDF5Data and HDF5Output layers: numeric datasets
// whose first dimension counts rows, read and written as float.
//
// Only io/hdf5.cpp includes hdf5.h. Debian's HDF5 is built without thread
// safety, so every call here holds one process-wide lock (the solvers of
// --gpu=0,1 run their nets on threads of their own). HDF5's own error
// printing is switched off: failures are Errors naming the file and the
// dataset. A build without HDF5 (USE_HDF5=OFF, or no libhdf5-dev) has these
// functions too; they throw an Error saying so.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cortado {
class NetParameter;

namespace hdf5 {

/// Whether this build reads and writes HDF5.
bool available();

/// The dimensions of the datasets `names` of the HDF5 file `path`, in that
/// order. Each must exist, hold integers or floating-point numbers, and have
/// at least one dimension. Throws Error naming the file and the dataset.
std::vector<std::vector<int64_t>> DatasetShapes(const std::string& path, const std::vector<std::string>& names);

/// Reads the datasets `names` of `path` converted to float, row-major, each
/// into (*values)[k]; `expected` (from DatasetShapes) must still be their
/// dimensions (the file could have changed since).
void ReadDatasets(const std::string& path, const std::vector<std::string>& names,
                  const std::vector<std::vector<int64_t>>& expected, std::vector<std::vector<float>>* values);

/// Caffe's HDF5 weights (snapshot_format: HDF5, .caffemodel.h5): a group
/// "data" holding a group per layer with parameters, whose blobs are the
/// datasets "0", "1", ... (and, with snapshot_diff, the same under "diff").
/// ReadWeights fills `param` with a layer per group (its name, and its
/// blobs' shapes and values as float), for Net::CopyTrainedLayersFrom.
void ReadWeights(const std::string& path, NetParameter* param);
/// Writes the blobs of `param`'s layers in that layout, their `diff` too
/// when they have one, to "<path>.tmp", then renames it to `path`.
void WriteWeights(const std::string& path, const NetParameter& param);
/// Caffe's rule for weights files: a name ending in ".h5" is HDF5, any
/// other a binary NetParameter.
bool IsHdf5Name(const std::string& path);
/// Throws Error (naming `path`) unless `layer` can name a group of that
/// layout: not empty, not ".", no '/' (which HDF5 reads as a path).
void CheckWeightsLayerName(const std::string& layer, const std::string& path);

/// Creates (or truncates) an HDF5 file and appends rows to float datasets
/// in it: the first Append of a name creates an extendable dataset of that
/// name, later ones grow it along the first dimension. Each Append is flushed
/// to the file before it returns, so a reader (or a crash) sees every row
/// appended so far.
class AppendWriter {
 public:
  explicit AppendWriter(const std::string& path);
  ~AppendWriter();
  AppendWriter(const AppendWriter&) = delete;
  AppendWriter& operator=(const AppendWriter&) = delete;

  /// Appends dims[0] rows of shape dims[1..] to dataset `name`; the row
  /// shape must be that of the earlier appends to it.
  void Append(const std::string& name, const std::vector<int64_t>& dims, const float* values);
  /// The rows appended to `name` so far.
  int64_t rows(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  struct Impl;
  std::string path_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hdf5
}  // namespace cortado
