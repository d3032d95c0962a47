#include "cortado/layers/hdf5_data_layer.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "cortado/data/data_transformer.hpp"
#include "cortado/io/hdf5.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/util/math.hpp"
#include "cortado/util/rng.hpp"

namespace cortado {

namespace {
std::string ShapeText(const std::vector<int64_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + ")";
}
}  // namespace

template <typename Ftype, typename Btype>
void HDF5DataLayer<Ftype, Btype>::ReadList(const std::string& list) {
  std::ifstream in(list);
  if (!in) this->field_error("hdf5_data_param.source", "'", list, "': cannot open: ", std::strerror(errno));
  files_.clear();
  lines_.clear();
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    const std::string path = line.substr(b, line.find_last_not_of(" \t\r") - b + 1);
    const std::string resolved = ResolvePath(path, list);
    if (!FileExists(resolved)) {
      this->field_error("hdf5_data_param.source", list, ":", n, ": '", path,
                        "': no such file (relative paths are taken from the working directory or the list's folder)");
    }
    files_.push_back(resolved);
    lines_.push_back(n);
  }
  if (files_.empty()) this->field_error("hdf5_data_param.source", "'", list, "' lists no files");
}

template <typename Ftype, typename Btype>
void HDF5DataLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const HDF5DataParameter& p = this->layer_param().hdf5_data_param();
  if (p.source().empty()) this->field_error("hdf5_data_param.source", "is required (a file listing HDF5 files)");
  if (p.batch_size() == 0) this->field_error("hdf5_data_param.batch_size", "must be positive, got 0");
  if (p.batch_size() > static_cast<uint32_t>(INT32_MAX)) this->field_error("hdf5_data_param.batch_size", "is too large");
  if (p.num_shards() == 0) this->field_error("hdf5_data_param.num_shards", "must be positive, got 0");
  if (p.shard_id() >= p.num_shards()) {
    this->field_error("hdf5_data_param.shard_id", "is ", p.shard_id(), " but num_shards is ", p.num_shards());
  }
  if (this->layer_param().top_size() != static_cast<int>(top.size())) {
    this->field_error("top", "HDF5Data reads the datasets its tops name; name every top");
  }
  names_.assign(this->layer_param().top().begin(), this->layer_param().top().end());
  batch_size_ = static_cast<int>(p.batch_size());
  shard_ = p.shard_id();
  shards_ = p.num_shards();
  shuffle_ = p.shuffle();
  list_ = p.source();
  ReadList(list_);

  // Every file's datasets, checked now: a bad file is found before training.
  rows_.clear();
  shapes_.clear();
  for (size_t f = 0; f < files_.size(); ++f) {
    const std::string where = str_cat(list_, ":", lines_[f]);
    std::vector<std::vector<int64_t>> dims;
    try {
      dims = hdf5::DatasetShapes(files_[f], names_);
    } catch (const Error& e) {
      this->field_error("hdf5_data_param.source", where, ": ", e.what());
    }
    for (size_t k = 0; k < names_.size(); ++k) {
      if (dims[k][0] != dims[0][0]) {
        this->field_error("hdf5_data_param.source", where, ": ", files_[f], ": dataset '", names_[k], "' has ",
                          dims[k][0], " rows but '", names_[0], "' has ", dims[0][0]);
      }
      const std::vector<int64_t> row(dims[k].begin() + 1, dims[k].end());
      if (f == 0) {
        shapes_.push_back(row);
      } else if (row != shapes_[k]) {
        this->field_error("hdf5_data_param.source", where, ": ", files_[f], ": dataset '", names_[k],
                          "' has rows of shape ", ShapeText(row), ", but the first file's are ",
                          ShapeText(shapes_[k]));
      }
    }
    rows_.push_back(dims[0][0]);
  }
  total_ = 0;
  for (int64_t r : rows_) total_ += r;
  if (total_ == 0) this->field_error("hdf5_data_param.source", "the files of '", list_, "' hold no rows");

  row_size_.clear();
  for (size_t k = 0; k < names_.size(); ++k) {
    std::vector<int> shape = {batch_size_};
    int64_t size = 1;
    for (int64_t d : shapes_[k]) {
      if (d > INT32_MAX) this->field_error("hdf5_data_param.source", names_[k], ": dimension ", d, " is too large");
      shape.push_back(static_cast<int>(d));
      size *= d;
    }
    row_size_.push_back(size);
    top[k]->Reshape(shape);
  }

  // The seed ties the shuffled orders to the solver's random_seed.
  std::mt19937& gen = rng();
  const uint64_t hi = gen();
  seed_ = (hi << 32) | gen();
  next_ = 0;
  order_epoch_ = -1;
  loaded_ = -1;
  rows_epoch_ = -1;
  rows_file_ = -1;
}

template <typename Ftype, typename Btype>
std::pair<int, int64_t> HDF5DataLayer<Ftype, Btype>::Locate(int64_t q) {
  const int64_t epoch = q / total_, r = q % total_;
  if (epoch != order_epoch_) {
    order_.resize(files_.size());
    for (size_t f = 0; f < order_.size(); ++f) order_[f] = static_cast<int>(f);
    if (shuffle_) {
      std::mt19937_64 g(record_rng_seed(seed_, -2 - 2 * epoch));
      for (size_t k = order_.size(); k > 1; --k) std::swap(order_[k - 1], order_[g() % k]);
    }
    starts_.assign(order_.size() + 1, 0);
    for (size_t k = 0; k < order_.size(); ++k) starts_[k + 1] = starts_[k] + rows_[static_cast<size_t>(order_[k])];
    order_epoch_ = epoch;
  }
  // The last file whose first row is <= r and that has rows.
  const size_t k = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), r) - starts_.begin()) - 1;
  const int f = order_[k];
  int64_t row = r - starts_[k];
  if (shuffle_) row = RowOrder(epoch, f)[static_cast<size_t>(row)];
  return {f, row};
}

template <typename Ftype, typename Btype>
const std::vector<int64_t>& HDF5DataLayer<Ftype, Btype>::RowOrder(int64_t epoch, int file) {
  if (epoch != rows_epoch_ || file != rows_file_) {
    row_order_.resize(static_cast<size_t>(rows_[static_cast<size_t>(file)]));
    for (size_t i = 0; i < row_order_.size(); ++i) row_order_[i] = static_cast<int64_t>(i);
    std::mt19937_64 g(record_rng_seed(record_rng_seed(seed_, -3 - 2 * epoch), file));
    for (size_t k = row_order_.size(); k > 1; --k) std::swap(row_order_[k - 1], row_order_[g() % k]);
    rows_epoch_ = epoch;
    rows_file_ = file;
  }
  return row_order_;
}

template <typename Ftype, typename Btype>
void HDF5DataLayer<Ftype, Btype>::Load(int file) {
  if (file == loaded_) return;
  std::vector<std::vector<int64_t>> dims;
  for (size_t k = 0; k < names_.size(); ++k) {
    dims.push_back({rows_[static_cast<size_t>(file)]});
    dims.back().insert(dims.back().end(), shapes_[k].begin(), shapes_[k].end());
  }
  loaded_ = -1;
  try {
    hdf5::ReadDatasets(files_[static_cast<size_t>(file)], names_, dims, &values_);
  } catch (const Error& e) {
    fail("layer '", this->name(), "' (HDF5Data): ", list_, ":", lines_[static_cast<size_t>(file)], ": ", e.what());
  }
  loaded_ = file;
}

template <typename Ftype, typename Btype>
void HDF5DataLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  std::vector<float*> out(top.size(), nullptr);
  for (size_t k = 1; k < top.size(); ++k) out[k] = top[k]->template mutable_cpu_data<float>();
  std::vector<float> first(static_cast<size_t>(batch_size_ * row_size_[0]));
  for (int b = 0; b < batch_size_; ++b) {
    const int64_t q = (next_ + b) * static_cast<int64_t>(shards_) + shard_;
    const auto [file, row] = Locate(q);
    Load(file);
    for (size_t k = 0; k < top.size(); ++k) {
      const int64_t n = row_size_[k];
      const float* src = values_[k].data() + row * n;
      float* dst = k == 0 ? first.data() + b * n : out[k] + b * n;
      std::copy(src, src + n, dst);
    }
  }
  convert_array(static_cast<int64_t>(first.size()), first.data(), top[0]->template mutable_cpu_data<Ftype>());
  next_ += batch_size_;
}

CORTADO_INSTANTIATE_LAYER(HDF5DataLayer);

}  // namespace cortado
