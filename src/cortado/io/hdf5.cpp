#include "cortado/io/hdf5.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "cortado/blob.hpp"
#include "cortado/common.hpp"
#include "cortado/config.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado.pb.h"

#ifdef CORTADO_USE_HDF5
#include <hdf5.h>
#endif

namespace cortado {
namespace hdf5 {

bool IsHdf5Name(const std::string& path) {
  return path.size() >= 3 && path.compare(path.size() - 3, 3, ".h5") == 0;
}

#ifdef CORTADO_USE_HDF5

namespace {

std::mutex& Lock() {
  static std::mutex m;
  return m;
}

// Takes the lock and silences HDF5's error stack printing (it would write a
// page of internals to stderr for a missing dataset; our Errors say it).
struct Guard {
  std::lock_guard<std::mutex> lock{Lock()};
  Guard() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }
};

// Closes an HDF5 identifier with its close function when it goes out of scope.
class Id {
 public:
  Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Id() {
    if (id_ >= 0) close_(id_);
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  Id(Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Id& operator=(Id&& o) noexcept {
    if (this != &o) {
      if (id_ >= 0) close_(id_);
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

Id OpenFile(const std::string& path) {
  if (!FileExists(path)) fail(path, ": no such file");
  Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), &H5Fclose);
  if (!f.ok()) fail(path, ": cannot open as an HDF5 file (not HDF5, or damaged)");
  return f;
}

const char* ClassName(H5T_class_t c) {
  switch (c) {
    case H5T_INTEGER: return "integer";
    case H5T_FLOAT: return "floating-point";
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ENUM: return "enum";
    case H5T_ARRAY: return "array";
    default: return "non-numeric";
  }
}

// The dimensions of dataset `name` of the open file; Error unless it is a
// numeric dataset of rank >= 1.
std::vector<int64_t> Shape(hid_t file, const std::string& path, const std::string& name, Id* dataset,
                           bool allow_scalar = false, bool* is_double = nullptr) {
  const std::string where = path + ": dataset '" + name + "'";
  if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) fail(where, ": not in the file");
  Id d(H5Dopen2(file, name.c_str(), H5P_DEFAULT), &H5Dclose);
  if (!d.ok()) fail(where, ": cannot be opened as a dataset");
  Id type(H5Dget_type(d.get()), &H5Tclose);
  const H5T_class_t c = type.ok() ? H5Tget_class(type.get()) : H5T_NO_CLASS;
  if (c != H5T_INTEGER && c != H5T_FLOAT) fail(where, ": holds ", ClassName(c), " values; it must hold numbers");
  if (is_double) *is_double = c == H5T_FLOAT && H5Tget_size(type.get()) > 4;
  Id space(H5Dget_space(d.get()), &H5Sclose);
  const int rank = space.ok() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0) fail(where, ": cannot read its dimensions");
  if (rank == 0 && !allow_scalar) fail(where, ": is a scalar; it needs a first dimension that counts rows");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  std::vector<int64_t> out(dims.begin(), dims.end());
  double count = 1;
  for (int64_t v : out) count *= static_cast<double>(v);
  if (count > static_cast<double>(kMaxBlobCount)) {
    fail(where, ": holds ", count, " values, more than the ", kMaxBlobCount, " a blob may hold");
  }
  if (dataset) *dataset = std::move(d);
  return out;
}

}  // namespace

bool available() { return true; }

std::vector<std::vector<int64_t>> DatasetShapes(const std::string& path, const std::vector<std::string>& names) {
  Guard g;
  Id f = OpenFile(path);
  std::vector<std::vector<int64_t>> shapes;
  for (const std::string& n : names) shapes.push_back(Shape(f.get(), path, n, nullptr));
  return shapes;
}

void ReadDatasets(const std::string& path, const std::vector<std::string>& names,
                  const std::vector<std::vector<int64_t>>& expected, std::vector<std::vector<float>>* values) {
  Guard g;
  Id f = OpenFile(path);
  values->resize(names.size());
  for (size_t k = 0; k < names.size(); ++k) {
    Id d(-1, &H5Dclose);
    const std::vector<int64_t> dims = Shape(f.get(), path, names[k], &d);
    if (dims != expected[k]) fail(path, ": dataset '", names[k], "': its dimensions changed since the layer was set up");
    size_t count = 1;
    for (int64_t v : dims) count *= static_cast<size_t>(v);
    (*values)[k].resize(count);
    if (count > 0 && H5Dread(d.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, (*values)[k].data()) < 0) {
      fail(path, ": dataset '", names[k], "': read error (damaged file, or values that do not convert to float)");
    }
  }
}

namespace {

// The names of the links in a group, in name order.
std::vector<std::string> LinkNames(hid_t group) {
  std::vector<std::string> names;
  auto add = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->push_back(name);
    return 0;
  };
  H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, nullptr, add, &names);
  return names;
}

// Writes a dataset `name` of dimensions `dims` (none: a scalar) and memory
// type `type` (H5T_NATIVE_FLOAT or H5T_NATIVE_DOUBLE) into `group`.
void WriteValues(hid_t group, const std::string& name, const std::vector<hsize_t>& dims, hid_t type,
                 const void* values, const std::string& where) {
  Id space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
           &H5Sclose);
  Id d(H5Dcreate2(group, name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), &H5Dclose);
  if (!space.ok() || !d.ok() || H5Dwrite(d.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) < 0) {
    fail(where, ": cannot write dataset '", name, "' (disk full?)");
  }
}

}  // namespace

void CheckWeightsLayerName(const std::string& layer, const std::string& path) {
  if (layer.empty() || layer == "." || layer.find('/') != std::string::npos) {
    fail(path, ": layer '", layer, "' cannot be a group of Caffe's HDF5 weights (data/<layer>/<blob>): HDF5 reads '/' "
         "as a path; rename the layer or use snapshot_format: BINARYPROTO");
  }
}

void ReadWeights(const std::string& path, NetParameter* param) {
  Guard g;
  Id f = OpenFile(path);
  if (H5Lexists(f.get(), "data", H5P_DEFAULT) <= 0) {
    fail(path, ": no group 'data': not Caffe HDF5 weights (a .caffemodel.h5 holds data/<layer>/<blob>)");
  }
  Id data(H5Gopen2(f.get(), "data", H5P_DEFAULT), &H5Gclose);
  if (!data.ok()) fail(path, ": 'data' is not a group");
  param->Clear();
  for (const std::string& layer : LinkNames(data.get())) {
    const std::string name = "data/" + layer;
    Id group(H5Gopen2(data.get(), layer.c_str(), H5P_DEFAULT), &H5Gclose);
    if (!group.ok()) fail(path, ": ", name, " is not a group");
    // The group holds exactly the blobs 0 .. n-1. Anything else is a layer
    // whose name has a '/' (HDF5 made it a subgroup: data/conv1/bn) or a
    // blob missing in between (a parameter shared with another layer): it
    // could not be loaded as written, so it is an error, not a silent skip.
    const std::vector<std::string> links = LinkNames(group.get());
    for (const std::string& link : links) {
      bool blob_index = !link.empty() && link.size() < 10 && link.find_first_not_of("0123456789") == std::string::npos &&
                        (link == "0" || link[0] != '0');
      if (blob_index && std::stoul(link) >= links.size()) blob_index = false;
      if (!blob_index) {
        fail(path, ": ", name, " holds '", link, "' where blobs 0..", links.size() - 1,
             " are expected (a layer name with '/', or a blob shared with another layer, cannot be read)");
      }
    }
    LayerParameter* lp = param->add_layer();
    lp->set_name(layer);
    for (size_t j = 0; j < links.size(); ++j) {
      Id d(-1, &H5Dclose);
      bool dbl = false;
      const std::vector<int64_t> dims =
          Shape(group.get(), path + ": " + name, std::to_string(j), &d, /*allow_scalar=*/true, &dbl);
      BlobProto* b = lp->add_blobs();
      size_t count = 1;
      for (int64_t v : dims) {
        b->mutable_shape()->add_dim(v);
        count *= static_cast<size_t>(v);
      }
      if (count > static_cast<size_t>(INT_MAX)) {
        fail(path, ": dataset '", name, "/", j, "' holds ", count, " values, more than a weights blob may hold (",
             INT_MAX, ")");
      }
      herr_t st = 0;
      // Doubles stay doubles (a DOUBLE net resumes exactly); the rest reads as float.
      if (dbl) {
        b->mutable_double_data()->Resize(static_cast<int>(count), 0.0);
        if (count > 0)
          st = H5Dread(d.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, b->mutable_double_data()->mutable_data());
      } else {
        b->mutable_data()->Resize(static_cast<int>(count), 0.f);
        if (count > 0)
          st = H5Dread(d.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, b->mutable_data()->mutable_data());
      }
      if (st < 0) fail(path, ": dataset '", name, "/", j, "': read error");
    }
  }
}

void WriteWeights(const std::string& path, const NetParameter& param) {
  const std::string tmp = path + ".tmp";
  {
    Guard g;
    Id f(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), &H5Fclose);
    if (!f.ok()) fail(tmp, ": cannot create the HDF5 file (is the folder there and writable?)");
    bool any_diff = false;
    for (const LayerParameter& l : param.layer()) {
      if (l.blobs_size() > 0) CheckWeightsLayerName(l.name(), path);
      for (const BlobProto& b : l.blobs()) any_diff |= b.diff_size() > 0 || b.double_diff_size() > 0;
    }
    for (const char* part : {"data", "diff"}) {
      const bool diff = part[1] == 'i';
      if (diff && !any_diff) continue;
      Id top(H5Gcreate2(f.get(), part, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), &H5Gclose);
      if (!top.ok()) fail(tmp, ": cannot create group '", part, "'");
      for (const LayerParameter& l : param.layer()) {
        if (l.blobs_size() == 0) continue;
        Id group(H5Gcreate2(top.get(), l.name().c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), &H5Gclose);
        if (!group.ok()) fail(tmp, ": cannot create group '", part, "/", l.name(), "' (a layer name used twice?)");
        for (int j = 0; j < l.blobs_size(); ++j) {
          const BlobProto& b = l.blobs(j);
          std::vector<hsize_t> dims(b.shape().dim().begin(), b.shape().dim().end());
          size_t count = 1;
          for (hsize_t v : dims) count *= v;
          // A DOUBLE blob keeps its doubles (as Caffe<double> writes them).
          const bool dbl = diff ? b.double_diff_size() > 0 : b.double_data_size() > 0;
          const size_t have = dbl ? static_cast<size_t>(diff ? b.double_diff_size() : b.double_data_size())
                                  : static_cast<size_t>(diff ? b.diff_size() : b.data_size());
          if (have != count) {
            fail(tmp, ": layer '", l.name(), "' blob ", j, " has ", have, " ", part, " values for ", count);
          }
          const void* values = dbl ? static_cast<const void*>(diff ? b.double_diff().data() : b.double_data().data())
                                   : static_cast<const void*>(diff ? b.diff().data() : b.data().data());
          WriteValues(group.get(), std::to_string(j), dims, dbl ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT, values, tmp);
        }
      }
    }
    if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0) fail(tmp, ": write error (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, ": cannot rename ", tmp, " to it");
}

struct AppendWriter::Impl {
  Id file{-1, &H5Fclose};
  struct Dataset {
    Id id{-1, &H5Dclose};
    std::vector<int64_t> row;  // dims[1..]
    int64_t rows = 0;
  };
  std::map<std::string, Dataset> datasets;
};

namespace {
// The files AppendWriters hold open (by canonical path), to name the real
// cause when a second one asks for the same file.
std::set<std::string>& OpenForAppend() {
  static std::set<std::string> open;
  return open;
}
std::string Canonical(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : p.string();
}
}  // namespace

AppendWriter::AppendWriter(const std::string& path) : path_(path), impl_(std::make_unique<Impl>()) {
  Guard g;
  if (OpenForAppend().count(Canonical(path))) {
    fail(path, ": already open for writing by another HDF5Output layer of this process (give each its own "
         "file_name, or an include { phase } rule so that one net has it)");
  }
  impl_->file = Id(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), &H5Fclose);
  if (!impl_->file.ok()) fail(path, ": cannot create the HDF5 file (is the folder there and writable?)");
  OpenForAppend().insert(Canonical(path));
}

AppendWriter::~AppendWriter() {
  Guard g;
  if (impl_ && impl_->file.ok()) OpenForAppend().erase(Canonical(path_));
  impl_.reset();  // closes the datasets, then the file
}

int64_t AppendWriter::rows(const std::string& name) const {
  auto it = impl_->datasets.find(name);
  return it == impl_->datasets.end() ? 0 : it->second.rows;
}

void AppendWriter::Append(const std::string& name, const std::vector<int64_t>& dims, const float* values) {
  CORTADO_CHECK(!dims.empty());
  Guard g;
  const std::vector<int64_t> row(dims.begin() + 1, dims.end());
  const std::string where = path_ + ": dataset '" + name + "'";
  const int rank = static_cast<int>(dims.size());
  auto it = impl_->datasets.find(name);
  if (it == impl_->datasets.end()) {
    std::vector<hsize_t> start(dims.begin(), dims.end()), max(dims.begin(), dims.end()), chunk(dims.begin(), dims.end());
    start[0] = 0;
    max[0] = H5S_UNLIMITED;
    chunk[0] = static_cast<hsize_t>(std::max<int64_t>(dims[0], 1));
    for (hsize_t& c : chunk) c = std::max<hsize_t>(c, 1);
    Id space(H5Screate_simple(rank, start.data(), max.data()), &H5Sclose);
    Id props(H5Pcreate(H5P_DATASET_CREATE), &H5Pclose);
    if (!space.ok() || !props.ok() || H5Pset_chunk(props.get(), rank, chunk.data()) < 0) fail(where, ": cannot be created");
    Impl::Dataset d;
    d.id = Id(H5Dcreate2(impl_->file.get(), name.c_str(), H5T_NATIVE_FLOAT, space.get(), H5P_DEFAULT, props.get(),
                         H5P_DEFAULT),
              &H5Dclose);
    if (!d.id.ok()) fail(where, ": cannot be created");
    d.row = row;
    it = impl_->datasets.emplace(name, std::move(d)).first;
  }
  Impl::Dataset& d = it->second;
  if (d.row != row) fail(where, ": rows of another shape than the ones appended before");
  if (dims[0] == 0) return;
  std::vector<hsize_t> total(dims.begin(), dims.end()), offset(dims.size(), 0), count(dims.begin(), dims.end());
  total[0] = static_cast<hsize_t>(d.rows + dims[0]);
  offset[0] = static_cast<hsize_t>(d.rows);
  if (H5Dset_extent(d.id.get(), total.data()) < 0) fail(where, ": cannot grow");
  Id file_space(H5Dget_space(d.id.get()), &H5Sclose);
  Id mem_space(H5Screate_simple(rank, count.data(), nullptr), &H5Sclose);
  if (!file_space.ok() || !mem_space.ok() ||
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, offset.data(), nullptr, count.data(), nullptr) < 0 ||
      H5Dwrite(d.id.get(), H5T_NATIVE_FLOAT, mem_space.get(), file_space.get(), H5P_DEFAULT, values) < 0 ||
      H5Fflush(impl_->file.get(), H5F_SCOPE_GLOBAL) < 0) {
    fail(where, ": write error (disk full?)");
  }
  d.rows += dims[0];
}

#else  // no HDF5 in this build

namespace {
[[noreturn]] void NoHdf5(const std::string& path) {
  fail(path, ": this build of Cortado has no HDF5 support (install libhdf5-dev and rebuild; CMake option USE_HDF5)");
}
}  // namespace

bool available() { return false; }
std::vector<std::vector<int64_t>> DatasetShapes(const std::string& path, const std::vector<std::string>&) {
  NoHdf5(path);
}
void ReadDatasets(const std::string& path, const std::vector<std::string>&, const std::vector<std::vector<int64_t>>&,
                  std::vector<std::vector<float>>*) {
  NoHdf5(path);
}
void CheckWeightsLayerName(const std::string&, const std::string&) {}
void ReadWeights(const std::string& path, NetParameter*) { NoHdf5(path); }
void WriteWeights(const std::string& path, const NetParameter&) { NoHdf5(path); }
struct AppendWriter::Impl {};
AppendWriter::AppendWriter(const std::string& path) : path_(path) { NoHdf5(path); }
AppendWriter::~AppendWriter() = default;
void AppendWriter::Append(const std::string&, const std::vector<int64_t>&, const float*) { NoHdf5(path_); }
int64_t AppendWriter::rows(const std::string&) const { return 0; }

#endif

}  // namespace hdf5
}  // namespace cortado
