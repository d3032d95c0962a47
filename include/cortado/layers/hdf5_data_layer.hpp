#pragma once
// Caffe's HDF5Data: rows of numeric datasets in HDF5 files, for data that
// is not images (regression targets, features, several inputs at once).
//
// hdf5_data_param fields:
//   source (required): a text file listing HDF5 files, one path a line
//     (blank lines skipped). A relative path is taken from the working
//     directory, as Caffe does, or else from the list's folder.
//   batch_size (required, > 0)
//   shuffle (default false): each epoch reads the files in a new order, and
//     the rows of each file in a new order, drawn from the layer's seed and
//     the epoch's number; false: the list's order and the files' row order
//   shard_id, num_shards (default 0 of 1): as in data_param (the solver sets
//     them on each rank's nets in a multi-rank run)
//
// Tops: top k is read from the dataset named like the top (Caffe's rule), so
// every top must be named. In every file the tops' datasets must hold
// numbers (integer or floating point, read as float), have the same first
// dimension (the file's rows), and the same row shape dims[1..] as in the
// first file. Top k is (batch_size, row shape...). top[0] is written in
// Ftype; the other tops (labels, regression targets, weights) as float
// whatever Ftype is, so labels stay exact (class 257 is not a BF16 value).
//
// Reading: every file is checked at set-up (its datasets and shapes; an
// error names the list, the line and the file); one file at a time is held
// in memory, loaded when the first of its rows is needed. The rows of all
// files in order form one epoch; epochs follow each other without a seam, a
// batch may span files and epochs. Stream position p of shard s of S is
// position p * S + s of the unsharded stream, so the S shards' batch b
// together is batch b of one reader with an S times larger batch. Seek(b)
// makes batch b the next one, as an uninterrupted run would read it.
//
// Backward: none. GPU: the tops are written on the host and move to the
// device when read there (as DummyData); HDF5 reading is host work.
#include <cstdint>
#include <string>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class HDF5DataLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "HDF5Data", BlobRules().Bottoms(0).MinTops(1).NoForcedBackward())
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  void Seek(int64_t batches) override { next_ = batches * batch_size_; }

  /// The files read, in the list's order, and their rows.
  const std::vector<std::string>& files() const { return files_; }
  const std::vector<int64_t>& file_rows() const { return rows_; }

 protected:
  CORTADO_LAYER_HOST_PASSES

 private:
  void ReadList(const std::string& list);
  /// The file and the row in it of unsharded stream position q.
  std::pair<int, int64_t> Locate(int64_t q);
  void Load(int file);
  const std::vector<int64_t>& RowOrder(int64_t epoch, int file);

  std::vector<std::string> names_;             // the tops' dataset names
  std::vector<std::string> files_;             // resolved paths
  std::vector<int> lines_;                     // their lines in the list
  std::vector<int64_t> rows_;                  // rows per file
  std::vector<std::vector<int64_t>> shapes_;   // per top: dims[1..] (the row shape)
  std::vector<int64_t> row_size_;              // per top: values per row
  std::string list_;
  int64_t total_ = 0;                          // rows per epoch
  int batch_size_ = 0;
  uint32_t shard_ = 0, shards_ = 1;
  bool shuffle_ = false;
  uint64_t seed_ = 0;
  int64_t next_ = 0;                           // this shard's next stream position

  int64_t order_epoch_ = -1;
  std::vector<int> order_;                     // the files in epoch order_epoch_
  std::vector<int64_t> starts_;                // their first rows in the epoch
  int loaded_ = -1;
  std::vector<std::vector<float>> values_;     // per top: the loaded file's values
  int64_t rows_epoch_ = -1;
  int rows_file_ = -1;
  std::vector<int64_t> row_order_;             // shuffled rows of (rows_epoch_, rows_file_)
};

}  // namespace cortado
