#include "cortado/blob.hpp"

#include <climits>

#include "cortado/io/blob_io.hpp"
#include "cortado/util/math.hpp"

namespace cortado {

std::string shape_string(const std::vector<int>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

std::string Blob::shape_string() const { return cortado::shape_string(shape_); }

const char* layout_name(Layout l) { return l == Layout::NHWC ? "NHWC" : "NCHW"; }

bool Blob::channels_last() const {
  return layout_ == Layout::NHWC && shape_.size() > 2 && shape_[1] > 1 && count(2) > 1;
}

void Blob::Reshape(const std::vector<int>& shape) {
  size_t count = 1;
  double approx = 1;
  for (int d : shape) {
    if (d < 0) fail("blob shape ", cortado::shape_string(shape), " has a negative dimension");
    count *= static_cast<size_t>(d);
    approx *= d;
  }
  if (approx > static_cast<double>(kMaxBlobCount))
    fail("blob shape ", cortado::shape_string(shape), " holds ", approx, " values, more than the ", kMaxBlobCount,
         " a blob may hold");
  shape_ = shape;
  count_ = count;
  data_->resize(count);
  // A diff shared by the Net's memory plan (net_memory.hpp) with blobs of
  // this blob's old count: a new count takes a buffer of its own rather than
  // resizing theirs. (A view's layer shares its diff again after reshaping.)
  if (diff_.use_count() > 1 && diff_->count() != count) {
    diff_ = std::make_shared<Tensor>(diff_->type(), count);
  } else {
    diff_->resize(count);
  }
}

void Blob::Reshape(const BlobShape& shape) {
  std::vector<int> s;
  for (int64_t d : shape.dim()) {
    if (d < 0 || d > INT_MAX) fail("blob dimension ", d, " is out of range");
    s.push_back(static_cast<int>(d));
  }
  Reshape(s);
}

size_t Blob::count(int start, int end) const {
  CORTADO_CHECK_LE(start, end);
  CORTADO_CHECK_LE(end, num_axes());
  size_t c = 1;
  for (int i = start; i < end; ++i) c *= static_cast<size_t>(shape_[i]);
  return c;
}

int Blob::CanonicalAxisIndex(int axis) const {
  CORTADO_CHECK(axis >= -num_axes() && axis < std::max(num_axes(), 1)) << "axis " << axis << " out of range for " << shape_string();
  return axis < 0 ? axis + num_axes() : axis;
}

int Blob::LegacyShape(int index) const {
  CORTADO_CHECK_LE(num_axes(), 4);
  if (index >= num_axes()) return 1;
  return shape(index);
}

size_t Blob::offset(int n, int c, int h, int w) const {
  return ((static_cast<size_t>(n) * channels() + c) * height() + h) * width() + w;
}

void Blob::ShareData(const Blob& other) {
  CORTADO_CHECK_EQ(count_, other.count_);
  data_ = other.data_;
}

void Blob::ShareDiff(const Blob& other) {
  CORTADO_CHECK_EQ(count_, other.count_);
  diff_ = other.diff_;
}

namespace {
template <typename Fn>
double reduce(const Tensor& t, size_t n, Fn fn) {
  return dispatch_type(t.type(), [&](auto z) {
    using T = decltype(z);
    return fn(static_cast<int64_t>(n), static_cast<const T*>(t.data_raw(type_of<T>())));
  });
}
}  // namespace

double Blob::asum_data() const {
  return reduce(*data_, count_, [](int64_t n, const auto* p) { return cpu_asum(n, p); });
}
double Blob::asum_diff() const {
  return reduce(*diff_, count_, [](int64_t n, const auto* p) { return cpu_asum(n, p); });
}
double Blob::sumsq_data() const {
  return reduce(*data_, count_, [](int64_t n, const auto* p) { return cpu_sumsq(n, p); });
}
double Blob::sumsq_diff() const {
  return reduce(*diff_, count_, [](int64_t n, const auto* p) { return cpu_sumsq(n, p); });
}

namespace {
// Legacy 4D shapes (1, 1, 1, N) match an N-vector, as in Caffe.
bool legacy_equal(const std::vector<int>& a, const std::vector<int>& b) {
  if (a == b) return true;
  auto strip = [](std::vector<int> v) {
    while (v.size() > 1 && v.front() == 1) v.erase(v.begin());
    return v;
  };
  return strip(a) == strip(b);
}
}  // namespace

bool Blob::ShapeEquals(const BlobProto& proto) const { return legacy_equal(shape_, BlobProtoShape(proto)); }

void Blob::FromProto(const BlobProto& proto, bool reshape, const std::string& what) {
  const std::vector<int> s = BlobProtoShape(proto);
  if (reshape) {
    Reshape(s);
  } else if (!legacy_equal(shape_, s)) {
    fail(what, ": shape ", cortado::shape_string(s), " in the file does not match the expected ", shape_string());
  }
  if (!ReadBlobProtoValues(proto, false, this, what) && count_ > 0)
    fail(what, ": holds no values (no data, double_data or raw_data), expected ", count_, " for shape ", shape_string());
  ReadBlobProtoValues(proto, true, this, what);
}

void Blob::ToProto(BlobProto* proto, bool write_diff) const { BlobToProto(*this, proto, write_diff, BlobFormat::kCaffe); }

}  // namespace cortado
