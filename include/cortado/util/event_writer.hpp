#pragma once
// TensorBoard event files, written without TensorFlow or protobuf's
// generated classes: the few messages an event file of scalars and
// histograms needs are encoded here by hand in protobuf's wire format, in
// TFRecord framing, so that TensorBoard (and its Python reader,
// event_accumulator) reads them as it reads TensorFlow's or PyTorch's.
//
// The format (tensorflow/core/util/event.proto, summary.proto; TFRecord):
// - A file is a sequence of records: uint64 length, uint32 masked CRC32C of
//   those 8 bytes, the data, uint32 masked CRC32C of the data (little
//   endian). mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8.
// - Each record is one Event: wall_time = 1 (double, seconds since the
//   epoch), step = 2 (int64), file_version = 3 (string; the first record
//   holds "brain.Event:2" and nothing else), summary = 5 (Summary).
// - Summary: repeated Value value = 1. Value: tag = 1 (string),
//   simple_value = 2 (float), histo = 5 (HistogramProto).
// - HistogramProto: min = 1, max = 2, num = 3, sum = 4, sum_squares = 5
//   (doubles), bucket_limit = 6 and bucket = 7 (packed doubles): bucket i
//   counts the values in [bucket_limit[i-1], bucket_limit[i]).
//
// Why by hand: the three messages are a few dozen lines of encoder, where
// TensorFlow's .proto files would be a copy of another project's schema in
// the tree (or a dependency on TensorFlow) for the sake of five fields.
//
// Contract of EventWriter:
// - The constructor creates the folder (and its parents) where missing and
//   opens a new file events.out.tfevents.<unix seconds>.<host>.<pid>.<n>
//   in it (n counts this process's writers, so that two never share a
//   file); it writes the file_version record. A folder that cannot be
//   created or a file that cannot be opened is an Error naming the path.
// - Scalar and Histogram append one event each; Flush hands the file to the
//   system, so that a TensorBoard reading the folder live sees the values.
//   A write that fails later (a full disk) is logged once as a warning
//   naming the file, and the writer writes nothing more: a training run is
//   not ended by its event file.
// - Event files are appended to, never rewritten, so they are not written
//   to a temporary name first: a run that is killed leaves every event it
//   flushed, and a reader skips a truncated last record.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace cortado {

/// CRC32C (Castagnoli, reflected polynomial 0x82f63b78) of n bytes,
/// continuing from `crc` (0 to start): Crc32c("123456789") = 0xe3069283.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);
/// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t MaskCrc(uint32_t crc);

/// One TFRecord: length, its masked CRC, the data, the data's masked CRC.
std::string FrameRecord(const std::string& data);
/// Reads the record at `*offset` of `bytes` into `data` and advances the
/// offset; false at the end (or at a truncated last record, which a writer
/// may still be writing). A CRC that does not match is an Error.
bool ReadRecord(const std::string& bytes, size_t* offset, std::string* data);

/// A histogram of values in TensorFlow's default buckets (those TensorBoard's
/// own writers use): limits +-1e-12 * 1.1^k up to 1e20, then +-DBL_MAX, and
/// 0, about 1550 in all; bucket i counts the values in
/// [limit[i-1], limit[i]). Non-finite values are not counted (nonfinite()
/// says how many there were): TensorBoard has no bucket for them. About 3 ns
/// a value (a table on the value's exponent and leading mantissa bits finds
/// the bucket, one comparison corrects it): a ResNet-50's 25 million
/// gradients in under 0.1 s.
class EventHistogram {
 public:
  EventHistogram();
  void Add(double x) { Add(&x, 1); }
  void Add(const double* x, size_t n);
  /// Adds x[i] * scale for i < n; T converts to double (float, double, and
  /// float16 and bfloat16 through their float).
  template <typename T>
  void Add(const T* x, size_t n, double scale = 1) {
    double chunk[1024];
    for (size_t i = 0; i < n; i += 1024) {
      const size_t m = n - i < 1024 ? n - i : 1024;
      for (size_t k = 0; k < m; ++k) chunk[k] = static_cast<double>(x[i + k]) * scale;
      Add(chunk, m);
    }
  }
  /// The bucket limits (TensorFlow's defaults), and the index of the bucket
  /// of a finite x: the first limit above x.
  static const std::vector<double>& limits();
  static size_t Bucket(double x);

  uint64_t count() const { return count_; }
  uint64_t nonfinite() const { return nonfinite_; }
  double min() const { return count_ ? min_ : 0; }
  double max() const { return count_ ? max_ : 0; }
  double sum() const { return sum_; }
  double sum_squares() const { return sum_squares_; }
  /// The HistogramProto message: runs of empty buckets merged into one
  /// (TensorFlow's encoding), the limits and counts of the rest.
  std::string Encode() const;

 private:
  std::vector<double> counts_;  // one per default limit
  uint64_t count_ = 0, nonfinite_ = 0;
  double min_ = 0, max_ = 0, sum_ = 0, sum_squares_ = 0;
};

class EventWriter {
 public:
  /// Creates `dir` where missing and opens a new event file in it.
  explicit EventWriter(const std::string& dir);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  /// A simple_value (a float, as TensorBoard stores scalars) at `step`.
  void Scalar(const std::string& tag, double value, int64_t step);
  void Histogram(const std::string& tag, const EventHistogram& h, int64_t step);
  void Flush();
  /// The event file's path.
  const std::string& path() const { return path_; }

  /// The encoded Event of one scalar and of one histogram (for tests).
  static std::string ScalarEvent(const std::string& tag, double value, int64_t step, double wall_time);
  static std::string HistogramEvent(const std::string& tag, const EventHistogram& h, int64_t step, double wall_time);

 private:
  void Write(const std::string& event);

  std::string path_;
  std::FILE* file_ = nullptr;
  bool failed_ = false;  // a write failed: warned once, nothing more is written
};

}  // namespace cortado
