#include "cortado/io/blob_io.hpp"

#include <algorithm>
#include <cstring>

namespace cortado {

namespace {

// Copies n values of `size` bytes between little-endian file bytes and host
// order (the same operation both ways).
void copy_little_endian(const void* src, void* dst, size_t n, size_t size) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  for (size_t i = 0; i < n; ++i)
    for (size_t b = 0; b < size; ++b) d[i * size + b] = s[i * size + size - 1 - b];
#else
  if (n > 0) std::memcpy(dst, src, n * size);
#endif
}

// One of the three parts a BlobProto may carry its data (or diff) in.
struct Part {
  const char* field = nullptr;  // null: the proto has none
  Type type = FLOAT;
  const void* values = nullptr;  // host order (data, double_data) or file bytes (raw)
  size_t count = 0;              // values (raw: bytes / type size, rounded down)
  size_t bytes = 0;
  bool raw = false;
};

Part find_part(const BlobProto& p, bool diff, const std::string& what) {
  Part part;
  const auto& dbl = diff ? p.double_diff() : p.double_data();
  const auto& flt = diff ? p.diff() : p.data();
  if (!dbl.empty()) {
    part.field = diff ? "double_diff" : "double_data";
    part.type = DOUBLE;
    part.values = dbl.data();
    part.count = static_cast<size_t>(dbl.size());
  } else if (!flt.empty()) {
    part.field = diff ? "diff" : "data";
    part.type = FLOAT;
    part.values = flt.data();
    part.count = static_cast<size_t>(flt.size());
  } else if (diff ? p.has_raw_diff() : p.has_raw_data()) {
    part.field = diff ? "raw_diff" : "raw_data";
    part.raw = true;
    // An NVCaffe type Cortado's enum lacks (INT, UINT, BOOL) parses as unset.
    if (!(diff ? p.has_raw_diff_type() : p.has_raw_data_type()))
      fail(what, ": ", part.field, " without ", diff ? "raw_diff_type" : "raw_data_type",
           " (FLOAT16, FLOAT or DOUBLE): the bytes cannot be read");
    part.type = diff ? p.raw_diff_type() : p.raw_data_type();
    const std::string& bytes = diff ? p.raw_diff() : p.raw_data();
    part.values = bytes.data();
    part.bytes = bytes.size();
    part.count = bytes.size() / type_size(part.type);
    return part;
  }
  part.bytes = part.count * type_size(part.type);
  return part;
}

// Fails unless the part holds exactly `count` values (raw: their bytes).
void check_count(const Part& part, size_t count, const std::string& shape, const std::string& what) {
  if (part.raw) {
    const size_t want = count * type_size(part.type);
    if (part.bytes != want)
      fail(what, ": ", part.field, " holds ", part.bytes, " bytes where shape ", shape, " needs ", want, " (", count,
           " ", type_name(part.type), " values of ", type_size(part.type), " bytes)");
  } else if (part.count != count) {
    fail(what, ": holds ", part.count, " values in ", part.field, ", expected ", count, " for shape ", shape);
  }
}

void copy_part(const Part& part, void* dst) {
  if (part.raw) {
    copy_little_endian(part.values, dst, part.count, type_size(part.type));
  } else if (part.count > 0) {
    std::memcpy(dst, part.values, part.bytes);
  }
}

// One tensor into the data (diff) part of proto.
void write_part(const Tensor& t, bool diff, BlobFormat format, BlobProto* proto) {
  const size_t n = t.count();
  if (format == BlobFormat::kRaw) {
    // NVCaffe has no bfloat16: its values go out as FLOAT (exact).
    const Type type = t.type() == BFLOAT16 ? FLOAT : t.type();
    std::string bytes(n * type_size(type), '\0');
    copy_little_endian(t.data_raw(type), bytes.data(), n, type_size(type));
    if (diff) {
      proto->set_raw_diff_type(type);
      proto->set_raw_diff(std::move(bytes));
    } else {
      proto->set_raw_data_type(type);
      proto->set_raw_data(std::move(bytes));
    }
  } else if (t.type() == DOUBLE) {
    const double* v = t.data<double>();
    (diff ? proto->mutable_double_diff() : proto->mutable_double_data())->Add(v, v + n);
  } else {
    const float* v = t.data<float>();
    (diff ? proto->mutable_diff() : proto->mutable_data())->Add(v, v + n);
  }
}

}  // namespace

std::vector<int> BlobProtoShape(const BlobProto& proto) {
  std::vector<int> s;
  if (proto.has_shape()) {
    for (int64_t d : proto.shape().dim()) s.push_back(static_cast<int>(d));
  } else if (proto.has_num() || proto.has_channels() || proto.has_height() || proto.has_width()) {
    s = {proto.num(), proto.channels(), proto.height(), proto.width()};
  }
  return s;
}

BlobFormat SnapshotBlobFormat(const SolverParameter& param) {
  return param.has_store_blobs_in_old_format() && !param.store_blobs_in_old_format() ? BlobFormat::kRaw
                                                                                     : BlobFormat::kCaffe;
}

void BlobToProto(const Blob& blob, BlobProto* proto, bool write_diff, BlobFormat format) {
  proto->Clear();
  for (int d : blob.shape()) proto->mutable_shape()->add_dim(d);
  write_part(blob.data(), false, format, proto);
  if (write_diff) write_part(blob.diff(), true, format, proto);
}

bool ReadBlobProtoValues(const BlobProto& proto, bool diff, Blob* blob, const std::string& what) {
  const Part part = find_part(proto, diff, what);
  if (!part.field) return false;
  check_count(part, blob->count(), blob->shape_string(), what);
  Tensor& t = diff ? blob->diff() : blob->data();
  copy_part(part, t.mutable_data_raw(part.type));
  return true;
}

std::vector<double> BlobProtoData(const BlobProto& proto, const std::string& what) {
  const Part part = find_part(proto, false, what);
  if (!part.field) return {};
  if (proto.has_shape() || proto.has_num() || proto.has_channels() || proto.has_height() || proto.has_width()) {
    const std::vector<int> shape = BlobProtoShape(proto);
    size_t count = 1;
    for (int d : shape) count *= static_cast<size_t>(std::max(d, 0));
    check_count(part, count, shape_string(shape), what);
  } else if (part.raw && part.bytes % type_size(part.type) != 0) {
    fail(what, ": ", part.field, " holds ", part.bytes, " bytes, not a whole number of ", type_name(part.type),
         " values");
  }
  return dispatch_type(part.type, [&](auto z) {
    using T = decltype(z);
    std::vector<T> file(part.count);
    copy_part(part, file.data());
    std::vector<double> out(part.count);
    for (size_t i = 0; i < part.count; ++i) out[i] = static_cast<double>(static_cast<math_t<T>>(file[i]));
    return out;
  });
}

}  // namespace cortado
