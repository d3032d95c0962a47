// TensorBoard event files (util/event_writer.hpp): CRC32C against published
// vectors, the TFRecord framing both ways, and the events parsed back by
// protobuf itself (tests/event_files.hpp: descriptors of TensorFlow's
// messages), so that the hand encoding is checked by an independent parser.
// tests/scripts/tensorboard_test.py reads a trainer's file with
// TensorBoard's own reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cortado/common.hpp"
#include "cortado/util/event_writer.hpp"
#include "event_files.hpp"
#include "temp_dir.hpp"

namespace cortado {
namespace {

using test::EventSchema;
using test::ParseEvents;
using test::ReadEvent;

TEST(Crc32cTest, KnownVectors) {
  // The check value of CRC-32C, and RFC 3720's (iSCSI) vectors B.4.
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8a9136aau);
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62a8ab43u);
  std::string up, down;
  for (int i = 0; i < 32; ++i) {
    up.push_back(static_cast<char>(i));
    down.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(Crc32c(up.data(), up.size()), 0x46dd794eu);
  EXPECT_EQ(Crc32c(down.data(), down.size()), 0x113fdb5cu);
  EXPECT_EQ(Crc32c("", 0), 0u);
  // Continuing a CRC over a second piece is the CRC of the whole.
  EXPECT_EQ(Crc32c("6789", 4, Crc32c("12345", 5)), 0xe3069283u);
}

TEST(Crc32cTest, Mask) {
  EXPECT_EQ(MaskCrc(0), 0xa282ead8u);
  const uint32_t c = 0xe3069283u;
  EXPECT_EQ(MaskCrc(c), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TfRecordTest, RoundTrip) {
  const std::string a = "first", b(1000, 'x'), empty;
  std::string file = FrameRecord(a) + FrameRecord(empty) + FrameRecord(b);
  EXPECT_EQ(FrameRecord(a).size(), a.size() + 16);
  size_t at = 0;
  std::string got;
  ASSERT_TRUE(ReadRecord(file, &at, &got));
  EXPECT_EQ(got, a);
  ASSERT_TRUE(ReadRecord(file, &at, &got));
  EXPECT_EQ(got, empty);
  ASSERT_TRUE(ReadRecord(file, &at, &got));
  EXPECT_EQ(got, b);
  EXPECT_FALSE(ReadRecord(file, &at, &got));
  // A last record still being written ends the reading without an error.
  const std::string partial = file.substr(0, file.size() - 3);
  at = 0;
  int n = 0;
  while (ReadRecord(partial, &at, &got)) ++n;
  EXPECT_EQ(n, 2);
  // A changed byte is caught by the data's CRC, a changed length by the length's.
  std::string bad = file;
  bad[12 + 2] ^= 1;
  at = 0;
  EXPECT_THROW(ReadRecord(bad, &at, &got), Error);
  bad = file;
  bad[0] ^= 1;
  at = 0;
  EXPECT_THROW(ReadRecord(bad, &at, &got), Error);
}

// One event's bytes, parsed.
ReadEvent ParseOne(EventSchema* schema, const std::string& event) {
  std::vector<ReadEvent> all = ParseEvents(FrameRecord(event), schema);
  CORTADO_CHECK_EQ(all.size(), 1u);
  return all[0];
}

TEST(EventWriterTest, ScalarEventParsesAsTensorFlowsEvent) {
  EventSchema schema;
  const ReadEvent e = ParseOne(&schema, EventWriter::ScalarEvent("train/loss", 2.302585, 1234567890123LL, 1.7e9));
  EXPECT_EQ(e.wall_time, 1.7e9);
  EXPECT_EQ(e.step, 1234567890123LL);
  EXPECT_EQ(e.tag, "train/loss");
  EXPECT_TRUE(e.has_simple_value);
  EXPECT_FALSE(e.has_histo);
  EXPECT_EQ(e.simple_value, 2.302585f);
  // A negative step is int64's ten-byte varint.
  EXPECT_EQ(ParseOne(&schema, EventWriter::ScalarEvent("x", -1, -5, 0)).step, -5);
}

// The table's guess plus its correction is std::upper_bound over the limits,
// for every limit, its neighbours, and values across and beyond the range.
TEST(EventWriterTest, HistogramBucketIsTheFirstLimitAboveTheValue) {
  const std::vector<double>& limits = EventHistogram::limits();
  ASSERT_GT(limits.size(), 1500u);
  EXPECT_EQ(limits.back(), DBL_MAX);
  EXPECT_EQ(limits.front(), -DBL_MAX);
  auto want = [&](double x) {
    const size_t b = static_cast<size_t>(std::upper_bound(limits.begin(), limits.end(), x) - limits.begin());
    return std::min(b, limits.size() - 1);
  };
  std::vector<double> xs = {0.0, -0.0, DBL_MIN, -DBL_MIN, 4.9e-324, -4.9e-324, 1e-300, 1e300, -1e300, DBL_MAX, -DBL_MAX};
  for (double l : limits) {
    xs.push_back(l);
    xs.push_back(std::nextafter(l, -DBL_MAX));
    xs.push_back(std::nextafter(l, DBL_MAX));
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-16, 26);
  for (int i = 0; i < 200000; ++i) xs.push_back((i % 2 ? -1 : 1) * std::pow(10.0, exponent(rng)));
  for (double x : xs) ASSERT_EQ(EventHistogram::Bucket(x), want(x)) << x;
}

TEST(EventWriterTest, HistogramCountsAndEncoding) {
  EventHistogram h;
  const std::vector<double> xs = {-1.0, 0.0, 0.5, 0.5, 2.0, 1e30};
  for (double x : xs) h.Add(x);
  h.Add(std::numeric_limits<double>::infinity());
  h.Add(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(h.count(), 6u);
  EXPECT_EQ(h.nonfinite(), 2u);
  EXPECT_EQ(h.min(), -1.0);
  EXPECT_EQ(h.max(), 1e30);
  EXPECT_DOUBLE_EQ(h.sum(), 1.5 + 1e30);
  EXPECT_DOUBLE_EQ(h.sum_squares(), 1 + 0.25 + 0.25 + 4 + 1e60);

  EventSchema schema;
  const ReadEvent e = ParseOne(&schema, EventWriter::HistogramEvent("grad/conv1/0", h, 30, 0));
  EXPECT_EQ(e.tag, "grad/conv1/0");
  EXPECT_EQ(e.step, 30);
  ASSERT_TRUE(e.has_histo);
  EXPECT_FALSE(e.has_simple_value);
  EXPECT_EQ(e.num, 6);
  EXPECT_EQ(e.min, -1);
  EXPECT_EQ(e.max, 1e30);
  EXPECT_EQ(e.sum, h.sum());
  EXPECT_EQ(e.sum_squares, h.sum_squares());
  const std::vector<double>& limit = e.bucket_limit;
  const std::vector<double>& count = e.bucket;
  const size_t n = count.size();
  ASSERT_EQ(limit.size(), n);
  // Increasing limits, ending at DBL_MAX; each value in the bucket whose
  // [previous limit, limit) holds it; counts summing to num.
  for (size_t i = 1; i < n; ++i) EXPECT_LT(limit[i - 1], limit[i]);
  EXPECT_EQ(limit.back(), DBL_MAX);
  double total = 0;
  for (double c : count) total += c;
  EXPECT_EQ(total, 6);
  for (double x : xs) {
    size_t b = 0;
    while (!(x < limit[b])) ++b;
    EXPECT_GE(count[b], x == 0.5 ? 2 : 1) << x;
    if (b > 0) EXPECT_LE(limit[b - 1], x);
  }
  // Runs of empty buckets are merged: 5 nonempty buckets, at most 6 runs between and around them.
  EXPECT_LE(n, 11u);

  // Float16-like input through the template: scaled on the way in.
  EventHistogram s;
  const float vals[] = {1024.0f, -2048.0f};
  s.Add(vals, 2, 1.0 / 1024);
  EXPECT_EQ(s.min(), -2.0);
  EXPECT_EQ(s.max(), 1.0);
  EventHistogram none;
  EXPECT_EQ(none.min(), 0);
  EXPECT_EQ(ParseOne(&schema, EventWriter::HistogramEvent("empty", none, 0, 0)).num, 0);
}

TEST(EventWriterTest, FileOfEvents) {
  test::TempDir dir("event_writer");
  const std::string folder = dir / "runs/a";  // parents created
  std::string path;
  {
    EventWriter w(folder);
    path = w.path();
    EXPECT_EQ(std::filesystem::path(path).parent_path(), std::filesystem::path(folder));
    EXPECT_EQ(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u) << path;
    w.Scalar("train/lr", 0.01, 10);
    EventHistogram h;
    h.Add(0.25);
    w.Histogram("grad/ip/0", h, 10);
    w.Flush();
    // Flushed: a reader sees every event while the writer is open.
    EventSchema schema;
    EXPECT_EQ(ParseEvents(test::ReadFileBytes(path), &schema).size(), 3u);
    EventWriter second(folder);  // another file, never the same one
    EXPECT_NE(second.path(), path);
  }
  EventSchema schema;
  const std::vector<ReadEvent> events = ParseEvents(test::ReadFileBytes(path), &schema);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_EQ(events[0].tag, "");
  EXPECT_GT(events[0].wall_time, 1.5e9);
  EXPECT_EQ(events[1].tag, "train/lr");
  EXPECT_EQ(events[1].step, 10);
  EXPECT_EQ(events[1].simple_value, 0.01f);
  EXPECT_GE(events[1].wall_time, events[0].wall_time);
  EXPECT_EQ(events[2].tag, "grad/ip/0");
  EXPECT_EQ(events[2].num, 1);
  EXPECT_EQ(events[2].sum, 0.25);
}

TEST(EventWriterTest, FolderThatCannotBeCreatedIsAnErrorNamingIt) {
  test::TempDir dir("event_writer");
  { std::ofstream(dir / "file") << "x"; }
  const std::string bad = dir / "file/runs";
  try {
    EventWriter w(bad);
    FAIL() << "no error for " << bad;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cortado
