#pragma once
// A Blob is a shape, a data tensor and a diff tensor. It is not a template:
// each layer reads and writes it in the layer's own types (forward in Ftype,
// backward in Btype), and the tensors convert at the boundary. Labels and
// reductions are read and written as float whatever the net's types.

#include <memory>
#include <string>
#include <vector>

#include "cortado/tensor.hpp"

namespace cortado {

/// The most values one blob may hold (2^40): larger shapes are user errors.
constexpr size_t kMaxBlobCount = size_t(1) << 40;

/// The order of a blob's values in memory. The shape is always Caffe's
/// (N, C, spatial...); NHWC ("channels last") stores axis 0, then the spatial
/// axes, then axis 1: value (n, c, h, w) of a 4-D blob sits at
/// ((n*H + h)*W + w)*C + c. A blob of one or two axes, or with no spatial
/// extent beyond 1, holds the same bytes in both. The Net's layout plan
/// (net_layout.hpp) sets it before the producer's SetUp; parameter blobs
/// are always NCHW (files keep Caffe's layout).
enum class Layout : unsigned char { NCHW = 0, NHWC = 1 };
const char* layout_name(Layout l);

class Blob {
 public:
  Blob() : Blob(FLOAT) {}
  explicit Blob(Type type) : data_(std::make_shared<Tensor>(type)), diff_(std::make_shared<Tensor>(type)) {}
  Blob(const std::vector<int>& shape, Type type = FLOAT) : Blob(type) { Reshape(shape); }

  /// Changes the shape; the buffers grow if needed and are then zero.
  /// Throws Error for a negative dimension or more than kMaxBlobCount values.
  void Reshape(const std::vector<int>& shape);
  void Reshape(const BlobShape& shape);
  void ReshapeLike(const Blob& other) { Reshape(other.shape()); }

  const std::vector<int>& shape() const { return shape_; }
  int shape(int axis) const { return shape_[CanonicalAxisIndex(axis)]; }
  int num_axes() const { return static_cast<int>(shape_.size()); }
  size_t count() const { return count_; }
  /// Product of dimensions [start, end).
  size_t count(int start, int end) const;
  size_t count(int start) const { return count(start, num_axes()); }
  /// Maps a negative axis to num_axes() + axis; CHECKs the range.
  int CanonicalAxisIndex(int axis) const;
  std::string shape_string() const;
  // Legacy 4D accessors.
  int num() const { return LegacyShape(0); }
  int channels() const { return LegacyShape(1); }
  int height() const { return LegacyShape(2); }
  int width() const { return LegacyShape(3); }
  int LegacyShape(int index) const;
  size_t offset(int n, int c = 0, int h = 0, int w = 0) const;

  template <typename T> const T* cpu_data() const { return data_->data<T>(); }
  template <typename T> const T* cpu_diff() const { return diff_->data<T>(); }
  template <typename T> T* mutable_cpu_data() { return data_->mutable_data<T>(); }
  template <typename T> T* mutable_cpu_diff() { return diff_->mutable_data<T>(); }
  // Device pointers (CUDA builds); same conversion rules as the host ones.
  template <typename T> const T* gpu_data() const { return data_->gpu_data<T>(); }
  template <typename T> const T* gpu_diff() const { return diff_->gpu_data<T>(); }
  template <typename T> T* mutable_gpu_data() { return data_->mutable_gpu_data<T>(); }
  template <typename T> T* mutable_gpu_diff() { return diff_->mutable_gpu_data<T>(); }

  Tensor& data() { return *data_; }
  Tensor& diff() { return *diff_; }
  const Tensor& data() const { return *data_; }
  const Tensor& diff() const { return *diff_; }
  Type data_type() const { return data_->type(); }

  Layout layout() const { return layout_; }
  void set_layout(Layout l) { layout_ = l; }
  /// Whether the values are channels last and that order differs from NCHW's
  /// (more than two axes and a spatial extent above 1).
  bool channels_last() const;

  /// Makes this blob use other's data (or diff) buffer; shapes must hold the
  /// same count. Used for parameter sharing and in Reshape/Flatten layers.
  void ShareData(const Blob& other);
  void ShareDiff(const Blob& other);

  /// Sum of |x| and of x^2 over data or diff, in double.
  double asum_data() const;
  double asum_diff() const;
  double sumsq_data() const;
  double sumsq_diff() const;

  /// Reads shape and values; with reshape false the shapes must match (the
  /// message names `what`). Values come from double_data, data or NVCaffe's
  /// raw_data, the first present (io/blob_io.hpp: ReadBlobProtoValues);
  /// the diff likewise when the proto has one.
  void FromProto(const BlobProto& proto, bool reshape, const std::string& what = "blob");
  /// Writes shape and data as float (BVLC Caffe reads it); double blobs write
  /// double_data. write_diff adds the diff. NVCaffe's raw format:
  /// io/blob_io.hpp, BlobToProto.
  void ToProto(BlobProto* proto, bool write_diff = false) const;
  bool ShapeEquals(const BlobProto& proto) const;

 private:
  std::vector<int> shape_;
  size_t count_ = 0;
  Layout layout_ = Layout::NCHW;
  std::shared_ptr<Tensor> data_;
  std::shared_ptr<Tensor> diff_;
};

/// "(2, 3, 4)" style text of a shape.
std::string shape_string(const std::vector<int>& shape);

}  // namespace cortado
