// TensorBoard event files (util/event_writer.hpp): protobuf's wire format by
// hand for Event, Summary, Summary.Value and HistogramProto, in TFRecord
// framing with masked CRC32C.
#include "cortado/util/event_writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <glog/logging.h>

#include "cortado/common.hpp"

namespace cortado {

// ---- CRC32C ------------------------------------------------------------------------------

namespace {
// The byte table of the reflected Castagnoli polynomial. Event files are a
// few records per display, so one table lookup per byte is plenty.
std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[i] = c;
  }
  return t;
}
}  // namespace

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
  static const std::array<uint32_t, 256> table = MakeCrcTable();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

// ---- protobuf's wire format ----------------------------------------------------------------

namespace {
enum WireType { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void PutFixed32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutFixed64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t GetFixed32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
uint64_t GetFixed64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void PutKey(std::string* out, int field, WireType type) { PutVarint(out, (static_cast<uint64_t>(field) << 3) | type); }
void PutDouble(std::string* out, int field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  PutKey(out, field, kFixed64);
  PutFixed64(out, bits);
}
void PutFloat(std::string* out, int field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  PutKey(out, field, kFixed32);
  PutFixed32(out, bits);
}
void PutInt64(std::string* out, int field, int64_t v) {
  PutKey(out, field, kVarint);
  PutVarint(out, static_cast<uint64_t>(v));  // negative: ten bytes, as protobuf writes int64
}
void PutBytes(std::string* out, int field, const std::string& bytes) {
  PutKey(out, field, kBytes);
  PutVarint(out, bytes.size());
  out->append(bytes);
}
void PutPackedDoubles(std::string* out, int field, const std::vector<double>& v) {
  PutKey(out, field, kBytes);
  PutVarint(out, 8 * v.size());
  for (double d : v) {
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    PutFixed64(out, bits);
  }
}

// Event {wall_time = 1; step = 2; file_version = 3; summary = 5}, with a
// Summary of one Value {tag = 1; simple_value = 2 | histo = 5}.
std::string EventOf(double wall_time, int64_t step, const std::string& value) {
  std::string summary;
  PutBytes(&summary, 1, value);
  std::string event;
  PutDouble(&event, 1, wall_time);
  PutInt64(&event, 2, step);
  PutBytes(&event, 5, summary);
  return event;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// TensorFlow's default bucket limits (tensorflow/core/lib/histogram): the
// negative ones, 0, the positive ones, each range 10% wider than the last.
const std::vector<double>& DefaultLimits() {
  static const std::vector<double> limits = [] {
    std::vector<double> pos;
    for (double v = 1e-12; v < 1e20; v *= 1.1) pos.push_back(v);
    pos.push_back(DBL_MAX);
    std::vector<double> all;
    for (auto it = pos.rbegin(); it != pos.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), pos.begin(), pos.end());
    return all;
  }();
  return limits;
}
}  // namespace

// ---- TFRecord --------------------------------------------------------------------------

std::string FrameRecord(const std::string& data) {
  std::string out;
  out.reserve(data.size() + 16);
  PutFixed64(&out, data.size());
  PutFixed32(&out, MaskCrc(Crc32c(out.data(), 8)));
  out.append(data);
  PutFixed32(&out, MaskCrc(Crc32c(data.data(), data.size())));
  return out;
}

bool ReadRecord(const std::string& bytes, size_t* offset, std::string* data) {
  const size_t at = *offset;
  if (bytes.size() < at + 12) return false;
  const char* p = bytes.data() + at;
  if (GetFixed32(p + 8) != MaskCrc(Crc32c(p, 8))) fail("event record at byte ", at, ": the length's CRC does not match");
  const uint64_t n = GetFixed64(p);
  if (bytes.size() - at - 12 < n + 4) return false;
  if (GetFixed32(p + 12 + n) != MaskCrc(Crc32c(p + 12, n))) fail("event record at byte ", at, ": the data's CRC does not match");
  data->assign(p + 12, n);
  *offset = at + 12 + n + 4;
  return true;
}

// ---- EventHistogram --------------------------------------------------------------------

EventHistogram::EventHistogram() : counts_(DefaultLimits().size(), 0.0) {}

namespace {
// The bucket of x is the index of the first limit above x (std::upper_bound
// over DefaultLimits(), as TensorFlow's Histogram::Add). A search per value
// costs about 35 ns (a ResNet-50's gradients: nearly a second), so a table
// gives a first guess instead: keyed by x's sign, binary exponent and
// leading kMantissaBits mantissa bits, it holds the bucket of the smallest
// magnitude with that key. A key spans under 1% of magnitude and a bucket
// 10%, so the guess is the bucket or one short of it (one more comparison);
// the loops below make the answer exact whatever the guess.
constexpr int kMinExp = -41, kMaxExp = 67;  // 2^-41 < 1e-12, the smallest limit; 2^67 > 1e20
constexpr int kMantissaBits = 7;
constexpr int kSlots = (kMaxExp - kMinExp + 1) << kMantissaBits;

int KeyOf(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const int sign = static_cast<int>(bits >> 63);
  int e = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  int m = static_cast<int>((bits >> (52 - kMantissaBits)) & ((1 << kMantissaBits) - 1));
  if (e < kMinExp) e = kMinExp, m = 0;  // zeros, subnormals and tiny values: with 2^kMinExp
  if (e > kMaxExp) e = kMaxExp, m = (1 << kMantissaBits) - 1;
  return sign * kSlots + ((e - kMinExp) << kMantissaBits) + m;
}

const std::vector<uint16_t>& GuessTable() {
  static const std::vector<uint16_t> table = [] {
    const std::vector<double>& limits = DefaultLimits();
    std::vector<uint16_t> t(2 * kSlots);
    for (int sign = 0; sign < 2; ++sign)
      for (int e = kMinExp; e <= kMaxExp; ++e)
        for (int m = 0; m < (1 << kMantissaBits); ++m) {
          const double v = (sign ? -1 : 1) * std::ldexp(1.0 + std::ldexp(m, -kMantissaBits), e);
          t[KeyOf(v)] = static_cast<uint16_t>(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin());
        }
    return t;
  }();
  return table;
}


size_t BucketOf(double x, const std::vector<double>& limits, const std::vector<uint16_t>& guess) {
  size_t b = guess[KeyOf(x)];
  while (b > 0 && limits[b - 1] > x) --b;
  while (b + 1 < limits.size() && limits[b] <= x) ++b;  // DBL_MAX itself: the last bucket
  return b;
}
}  // namespace

const std::vector<double>& EventHistogram::limits() { return DefaultLimits(); }

size_t EventHistogram::Bucket(double x) { return BucketOf(x, DefaultLimits(), GuessTable()); }

void EventHistogram::Add(const double* xs, size_t n) {
  const std::vector<double>& limits = DefaultLimits();
  const std::vector<uint16_t>& guess = GuessTable();
  for (size_t i = 0; i < n; ++i) {
    const double x = xs[i];
    if (!std::isfinite(x)) {
      ++nonfinite_;
      continue;
    }
    counts_[BucketOf(x, limits, guess)] += 1;
    if (count_ == 0 || x < min_) min_ = x;
    if (count_ == 0 || x > max_) max_ = x;
    ++count_;
    sum_ += x;
    sum_squares_ += x * x;
  }
}

std::string EventHistogram::Encode() const {
  const std::vector<double>& limits = DefaultLimits();
  std::vector<double> limit, bucket;
  for (size_t i = 0; i < counts_.size();) {
    double end = limits[i], n = counts_[i];
    ++i;
    if (n <= 0) {  // a run of empty buckets as one
      while (i < counts_.size() && counts_[i] <= 0) end = limits[i++];
    }
    limit.push_back(end);
    bucket.push_back(n);
  }
  std::string h;
  PutDouble(&h, 1, min());
  PutDouble(&h, 2, max());
  PutDouble(&h, 3, static_cast<double>(count_));
  PutDouble(&h, 4, sum_);
  PutDouble(&h, 5, sum_squares_);
  PutPackedDoubles(&h, 6, limit);
  PutPackedDoubles(&h, 7, bucket);
  return h;
}

// ---- EventWriter -----------------------------------------------------------------------

std::string EventWriter::ScalarEvent(const std::string& tag, double value, int64_t step, double wall_time) {
  std::string v;
  PutBytes(&v, 1, tag);
  PutFloat(&v, 2, static_cast<float>(value));
  return EventOf(wall_time, step, v);
}

std::string EventWriter::HistogramEvent(const std::string& tag, const EventHistogram& h, int64_t step,
                                        double wall_time) {
  std::string v;
  PutBytes(&v, 1, tag);
  PutBytes(&v, 5, h.Encode());
  return EventOf(wall_time, step, v);
}

EventWriter::EventWriter(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    fail("TensorBoard folder '", dir, "': cannot create it", ec ? ": " + ec.message() : std::string());
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) std::strcpy(host, "localhost");
  static std::atomic<int> serial{0};
  const auto seconds = static_cast<int64_t>(Now());
  path_ = (fs::path(dir) / str_cat("events.out.tfevents.", seconds, ".", host, ".", getpid(), ".", serial++)).string();
  file_ = std::fopen(path_.c_str(), "wbx");  // x: never another writer's file
  if (!file_) fail("TensorBoard event file '", path_, "': cannot open it: ", std::strerror(errno));
  std::string first;
  PutDouble(&first, 1, Now());
  PutBytes(&first, 3, "brain.Event:2");
  Write(first);
  Flush();
}

EventWriter::~EventWriter() {
  if (file_) std::fclose(file_);
}

void EventWriter::Scalar(const std::string& tag, double value, int64_t step) {
  Write(ScalarEvent(tag, value, step, Now()));
}

void EventWriter::Histogram(const std::string& tag, const EventHistogram& h, int64_t step) {
  Write(HistogramEvent(tag, h, step, Now()));
}

void EventWriter::Write(const std::string& event) {
  if (failed_) return;
  const std::string record = FrameRecord(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    LOG(WARNING) << "TensorBoard event file '" << path_ << "': cannot write (" << std::strerror(errno)
                 << "); no more events are written";
    failed_ = true;
  }
}

void EventWriter::Flush() {
  if (failed_) return;
  if (std::fflush(file_) != 0) {
    LOG(WARNING) << "TensorBoard event file '" << path_ << "': cannot write (" << std::strerror(errno)
                 << "); no more events are written";
    failed_ = true;
  }
}

}  // namespace cortado
