// The image tools end to end: convert_imageset and compute_image_mean run as
// the built binaries on PNG and JPEG files written here with OpenCV, with
// known pixel values. The databases are read back with LmdbCursor, the mean
// file with protobuf, and then used as a Data layer's transform_param.mean_file
// in a real net. Bad input must end in one message and exit status 1.
//
// Built only with OpenCV (the tools need it; CMake defines the tools' paths).

#include "cortado/config.hpp"

#if defined(CORTADO_USE_OPENCV) && defined(CORTADO_CONVERT_IMAGESET) && defined(CORTADO_COMPUTE_IMAGE_MEAN)

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "cortado/data/lmdb.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/net/net.hpp"
#include "cortado.pb.h"
#include "command.hpp"
#include "test_paths.hpp"

namespace cortado {
namespace {

namespace fs = std::filesystem;

constexpr int kH = 5, kW = 6;  // the size of the test images a, b, d and e

// The value written at (h, w), OpenCV channel c (B, G, R) of test image i.
int Pixel(int i, int h, int w, int c) { return (i * 37 + h * 11 + w * 5 + c * 71) % 256; }

cv::Mat MakeImage(int i, int H = kH, int W = kW) {
  cv::Mat m(H, W, CV_8UC3);
  for (int h = 0; h < H; ++h)
    for (int w = 0; w < W; ++w)
      for (int c = 0; c < 3; ++c) m.at<cv::Vec3b>(h, w)[c] = static_cast<uint8_t>(Pixel(i, h, w, c));
  return m;
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

cv::Mat DecodeBytes(const std::string& bytes, int flags = cv::IMREAD_ANYCOLOR) {
  return cv::imdecode(cv::Mat(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data())), flags);
}

bool SameMat(const cv::Mat& a, const cv::Mat& b) {
  return a.size() == b.size() && a.type() == b.type() && cv::norm(a, b, cv::NORM_INF) == 0;
}

struct Record {
  std::string key;
  Datum datum;
};

std::vector<Record> ReadDb(const std::string& path) {
  std::vector<Record> out;
  LmdbCursor cursor(path);
  for (; cursor.Valid(); cursor.Next()) {
    Record r;
    r.key = std::string(cursor.key());
    EXPECT_TRUE(r.datum.ParseFromArray(cursor.value().data(), static_cast<int>(cursor.value().size())))
        << "record '" << r.key << "' is not a Datum";
    out.push_back(std::move(r));
  }
  return out;
}

using ToolRun = test::CommandRun;

void ExpectNoCrash(const ToolRun& r) {
  for (const char* bad : {"terminate", "Aborted", "Check failed", "SIGSEGV", "core dumped"}) {
    EXPECT_EQ(r.output.find(bad), std::string::npos) << "the output shows a crash (\"" << bad << "\"):\n" << r.output;
  }
}

class ImageToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::path(::testing::TempDir()) /
           ("cortado_tools_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "img" / "sub dir");
    ASSERT_TRUE(cv::imwrite(Path("img/a.png"), MakeImage(0)));
    ASSERT_TRUE(cv::imwrite(Path("img/sub dir/b c.png"), MakeImage(1)));
    ASSERT_TRUE(cv::imwrite(Path("img/d.png"), MakeImage(2)));
    ASSERT_TRUE(cv::imwrite(Path("img/e.jpg"), MakeImage(3), {cv::IMWRITE_JPEG_QUALITY, 90}));
    // 8x10, one colour (B, G, R) = (200, 100, 50): its gray value and any
    // resize of it are known without OpenCV.
    ASSERT_TRUE(cv::imwrite(Path("img/uniform.png"), cv::Mat(8, 10, CV_8UC3, cv::Scalar(200, 100, 50))));
    // A one-channel PNG, to be stored in 3-channel databases.
    cv::Mat gray(kH, kW, CV_8UC1);
    for (int h = 0; h < kH; ++h)
      for (int w = 0; w < kW; ++w) gray.at<uint8_t>(h, w) = static_cast<uint8_t>(Pixel(4, h, w, 0));
    ASSERT_TRUE(cv::imwrite(Path("img/gray.png"), gray));
    std::ofstream(dir_ / "img" / "bad.png") << "this is not an image\n";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string Path(const std::string& rel) const { return (dir_ / rel).string(); }
  void WriteList(const std::string& text, const std::string& name = "list.txt") const {
    std::ofstream(dir_ / name) << text;
  }

  // Runs a tool in the test directory; captures stdout and stderr.
  ToolRun RunTool(const std::string& tool, const std::string& args) const {
    const std::string cmd = "cd '" + dir_.string() + "' && GLOG_logtostderr=1 timeout 120 '" + tool + "' " + args;
    return test::RunCommand(cmd);
  }
  ToolRun Convert(const std::string& flags, const std::string& db, const std::string& list = "list.txt") const {
    return RunTool(test::PathSetting("CORTADO_CONVERT_IMAGESET", CORTADO_CONVERT_IMAGESET), flags + " img/ " + list + " " + db);
  }
  ToolRun Mean(const std::string& args) const { return RunTool(test::PathSetting("CORTADO_COMPUTE_IMAGE_MEAN", CORTADO_COMPUTE_IMAGE_MEAN), args); }

  // A failed run: status 1, the messages expected, no crash, and neither the
  // database nor a temporary left behind.
  void ExpectFailure(const ToolRun& r, const std::vector<std::string>& messages, const std::string& db = "") const {
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("error: "), std::string::npos) << r.output;
    for (const std::string& m : messages) EXPECT_NE(r.output.find(m), std::string::npos) << m << " in:\n" << r.output;
    ExpectNoCrash(r);
    if (!db.empty()) {
      EXPECT_FALSE(fs::exists(dir_ / db)) << db << " was left behind";
    }
    ExpectNoTemporaries();
  }
  void ExpectNoTemporaries() const {
    for (const auto& e : fs::directory_iterator(dir_)) {
      EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path() << " was left behind";
    }
  }

  fs::path dir_;
};

// ---- convert_imageset ---------------------------------------------------------------

TEST_F(ImageToolsTest, RawRecordsHoldTheImagesPixels) {
  WriteList("a.png 3\nsub dir/b c.png 1\n\nd.png 0\n");  // a path with spaces; a blank line
  const ToolRun r = Convert("", "db");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("wrote 3 records"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("0 skipped"), std::string::npos) << r.output;
  ExpectNoTemporaries();

  const std::vector<Record> recs = ReadDb(Path("db"));
  ASSERT_EQ(recs.size(), 3u);
  const std::vector<std::string> keys = {"00000000_a.png", "00000001_sub dir/b c.png", "00000002_d.png"};
  const int labels[] = {3, 1, 0};
  for (int i = 0; i < 3; ++i) {
    const Datum& d = recs[i].datum;
    EXPECT_EQ(recs[i].key, keys[i]);
    EXPECT_EQ(d.label(), labels[i]);
    EXPECT_FALSE(d.encoded());
    ASSERT_EQ(d.channels(), 3);
    ASSERT_EQ(d.height(), kH);
    ASSERT_EQ(d.width(), kW);
    ASSERT_EQ(d.data().size(), static_cast<size_t>(3 * kH * kW));
    int wrong = 0;
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < kH; ++h)
        for (int w = 0; w < kW; ++w) {
          const int got = static_cast<uint8_t>(d.data()[(c * kH + h) * kW + w]);
          if (got != Pixel(i, h, w, c) && wrong++ < 5) {
            ADD_FAILURE() << keys[i] << " (c, h, w) = (" << c << ", " << h << ", " << w << "): " << got
                          << ", wrote " << Pixel(i, h, w, c);
          }
        }
    EXPECT_EQ(wrong, 0) << keys[i];
  }
}

TEST_F(ImageToolsTest, GrayAndResize) {
  WriteList("uniform.png 0\na.png 1\n");
  ToolRun r = Convert("--gray --resize_width=4 --resize_height=3", "gray_db");
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<Record> recs = ReadDb(Path("gray_db"));
  ASSERT_EQ(recs.size(), 2u);
  for (const Record& rec : recs) {
    EXPECT_EQ(rec.datum.channels(), 1);
    EXPECT_EQ(rec.datum.height(), 3);
    EXPECT_EQ(rec.datum.width(), 4);
    ASSERT_EQ(rec.datum.data().size(), 12u);
  }
  // Gray = 0.299 R + 0.587 G + 0.114 B = 96.45 for the uniform image.
  for (char v : recs[0].datum.data()) EXPECT_NEAR(static_cast<uint8_t>(v), 96.45, 1.0);

  // In color the uniform image stays exactly (200, 100, 50) whatever the interpolation.
  r = Convert("--resize_width=4 --resize_height=3", "color_db");
  ASSERT_EQ(r.status, 0) << r.output;
  recs = ReadDb(Path("color_db"));
  ASSERT_EQ(recs.size(), 2u);
  const Datum& u = recs[0].datum;
  ASSERT_EQ(u.channels(), 3);
  ASSERT_EQ(u.data().size(), 36u);
  const int bgr[] = {200, 100, 50};
  for (int i = 0; i < 36; ++i) EXPECT_EQ(static_cast<uint8_t>(u.data()[i]), bgr[i / 12]) << i;
}

TEST_F(ImageToolsTest, MinAndMaxDimKeepTheAspectRatio) {
  WriteList("uniform.png 0\n");  // 8x10
  ToolRun r = Convert("--min_dim=16", "up_db");
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<Record> recs = ReadDb(Path("up_db"));
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].datum.height(), 16);
  EXPECT_EQ(recs[0].datum.width(), 20);
  r = Convert("--max_dim=5", "down_db");
  ASSERT_EQ(r.status, 0) << r.output;
  recs = ReadDb(Path("down_db"));
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].datum.height(), 4);
  EXPECT_EQ(recs[0].datum.width(), 5);
}

TEST_F(ImageToolsTest, EncodedRecordsRoundTrip) {
  WriteList("a.png 0\ne.jpg 1\ngray.png 2\n");
  ToolRun r = Convert("--encoded", "enc_db");
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<Record> recs = ReadDb(Path("enc_db"));
  ASSERT_EQ(recs.size(), 3u);
  for (const Record& rec : recs) {
    EXPECT_TRUE(rec.datum.encoded()) << rec.key;
    EXPECT_EQ(rec.datum.channels(), 3) << rec.key;
    EXPECT_EQ(rec.datum.height(), kH) << rec.key;
    EXPECT_EQ(rec.datum.width(), kW) << rec.key;
  }
  // PNG and JPEG files are stored byte for byte and decode to the original.
  EXPECT_EQ(recs[0].datum.data(), ReadAll(dir_ / "img/a.png"));
  EXPECT_TRUE(SameMat(DecodeBytes(recs[0].datum.data()), MakeImage(0)));
  EXPECT_EQ(recs[1].datum.data(), ReadAll(dir_ / "img/e.jpg"));
  EXPECT_TRUE(SameMat(DecodeBytes(recs[1].datum.data()), cv::imread(Path("img/e.jpg"), cv::IMREAD_COLOR)));
  // A one-channel file in a color database is re-encoded with 3 equal channels,
  // so the Data layer (which decodes with the file's own channels) sees 3.
  const cv::Mat g = DecodeBytes(recs[2].datum.data());
  ASSERT_EQ(g.channels(), 3);
  ASSERT_EQ(g.rows, kH);
  for (int h = 0; h < kH; ++h)
    for (int w = 0; w < kW; ++w)
      for (int c = 0; c < 3; ++c) EXPECT_EQ(g.at<cv::Vec3b>(h, w)[c], Pixel(4, h, w, 0));

  // --encode_type=png re-encodes the JPEG losslessly: the same pixels as decoding the file.
  WriteList("e.jpg 1\n");
  r = Convert("--encode_type=png", "png_db");
  ASSERT_EQ(r.status, 0) << r.output;
  recs = ReadDb(Path("png_db"));
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_TRUE(recs[0].datum.encoded());
  EXPECT_EQ(recs[0].datum.data().compare(0, 4, "\x89PNG"), 0);
  EXPECT_TRUE(SameMat(DecodeBytes(recs[0].datum.data()), cv::imread(Path("img/e.jpg"), cv::IMREAD_COLOR)));

  // Resizing an encoded image stores the resized image.
  WriteList("uniform.png 0\n");
  r = Convert("--encoded --resize_width=4 --resize_height=3", "small_db");
  ASSERT_EQ(r.status, 0) << r.output;
  recs = ReadDb(Path("small_db"));
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_TRUE(SameMat(DecodeBytes(recs[0].datum.data()), cv::Mat(3, 4, CV_8UC3, cv::Scalar(200, 100, 50))));
}

TEST_F(ImageToolsTest, ShuffleIsAReproduciblePermutation) {
  const int n = 20;
  fs::create_directories(dir_ / "img" / "s");
  std::string list;
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(cv::imwrite(Path("img/s/" + std::to_string(i) + ".png"), MakeImage(10 + i, 2, 2)));
    list += "s/" + std::to_string(i) + ".png " + std::to_string(i) + "\n";
  }
  WriteList(list);
  for (const char* db : {"shuffled_1", "shuffled_2"}) {
    const ToolRun r = Convert("--shuffle", db);
    ASSERT_EQ(r.status, 0) << r.output;
  }
  const ToolRun r = Convert("--shuffle --seed=7", "shuffled_seed7");
  ASSERT_EQ(r.status, 0) << r.output;

  // The images in database order, as indices into the list.
  auto order = [&](const std::string& db) {
    std::vector<int> out;
    const std::vector<Record> recs = ReadDb(Path(db));
    for (size_t k = 0; k < recs.size(); ++k) {
      const std::string& key = recs[k].key;
      char prefix[16];
      std::snprintf(prefix, sizeof(prefix), "%08d_", static_cast<int>(k));
      EXPECT_EQ(key.rfind(prefix, 0), 0u) << key;  // the index is the position in the database
      const size_t slash = key.find("s/"), dot = key.rfind(".png");
      EXPECT_TRUE(slash != std::string::npos && dot != std::string::npos) << key;
      const int i = std::stoi(key.substr(slash + 2, dot - slash - 2));
      // Label and pixels travel with their image.
      EXPECT_EQ(recs[k].datum.label(), i) << key;
      EXPECT_EQ(static_cast<uint8_t>(recs[k].datum.data()[0]), Pixel(10 + i, 0, 0, 0)) << key;
      out.push_back(i);
    }
    return out;
  };
  std::vector<int> identity(n);
  for (int i = 0; i < n; ++i) identity[i] = i;
  const std::vector<int> s1 = order("shuffled_1"), s2 = order("shuffled_2"), s7 = order("shuffled_seed7");
  std::vector<int> sorted = s1;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, identity) << "a shuffle is a permutation of the list";
  EXPECT_NE(s1, identity) << "the shuffle left the list in order";
  EXPECT_EQ(s1, s2) << "the same seed gives the same order";
  EXPECT_NE(s7, s1) << "another seed gives another order";
  sorted = s7;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, identity);
}

// ---- compute_image_mean and the Data layer -------------------------------------------

// The mean of images 0, 1, 2 at (c, h, w), computed from the values written.
double ExpectedMean(int c, int h, int w) {
  return (Pixel(0, h, w, c) + Pixel(1, h, w, c) + Pixel(2, h, w, c)) / 3.0;
}

TEST_F(ImageToolsTest, MeanOfRawAndEncodedRecords) {
  WriteList("a.png 3\nsub dir/b c.png 1\nd.png 0\n");
  ASSERT_EQ(Convert("", "db").status, 0);
  ASSERT_EQ(Convert("--encoded", "enc_db").status, 0);
  const ToolRun r = Mean("db mean.binaryproto");
  ASSERT_EQ(r.status, 0) << r.output;
  ExpectNoTemporaries();

  BlobProto mean;
  ReadBinaryProto(Path("mean.binaryproto"), &mean);
  EXPECT_EQ(mean.num(), 1);
  EXPECT_EQ(mean.channels(), 3);
  EXPECT_EQ(mean.height(), kH);
  EXPECT_EQ(mean.width(), kW);
  ASSERT_EQ(mean.shape().dim_size(), 4);
  EXPECT_EQ(mean.shape().dim(0), 1);
  EXPECT_EQ(mean.shape().dim(1), 3);
  EXPECT_EQ(mean.shape().dim(2), kH);
  EXPECT_EQ(mean.shape().dim(3), kW);
  ASSERT_EQ(mean.data_size(), 3 * kH * kW);
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < kH; ++h)
      for (int w = 0; w < kW; ++w) {
        EXPECT_NEAR(mean.data((c * kH + h) * kW + w), ExpectedMean(c, h, w), 1e-4) << c << " " << h << " " << w;
      }
  // The printed per-channel means.
  for (int c = 0; c < 3; ++c) {
    double s = 0;
    for (int h = 0; h < kH; ++h)
      for (int w = 0; w < kW; ++w) s += ExpectedMean(c, h, w);
    const std::string tag = "mean_value channel [" + std::to_string(c) + "]: ";
    const size_t at = r.output.find(tag);
    ASSERT_NE(at, std::string::npos) << r.output;
    EXPECT_NEAR(std::stod(r.output.substr(at + tag.size())), s / (kH * kW), 1e-3) << tag;
  }

  // Encoded (PNG) records give the same mean.
  const ToolRun re = Mean("enc_db enc_mean.binaryproto");
  ASSERT_EQ(re.status, 0) << re.output;
  BlobProto enc_mean;
  ReadBinaryProto(Path("enc_mean.binaryproto"), &enc_mean);
  ASSERT_EQ(enc_mean.data_size(), mean.data_size());
  for (int i = 0; i < mean.data_size(); ++i) EXPECT_FLOAT_EQ(enc_mean.data(i), mean.data(i)) << i;
}

TEST_F(ImageToolsTest, DataLayerSubtractsTheComputedMean) {
  WriteList("a.png 3\nsub dir/b c.png 1\nd.png 0\n");
  ASSERT_EQ(Convert("", "db").status, 0);
  ASSERT_EQ(Mean("db mean.binaryproto").status, 0);
  std::ofstream(dir_ / "net.prototxt") << "name: 'mean_check'\n"
                                       << "layer { name: 'data' type: 'Data' top: 'data' top: 'label'\n"
                                       << "  data_param { source: '" << Path("db") << "' batch_size: 3 }\n"
                                       << "  transform_param { mean_file: '" << Path("mean.binaryproto")
                                       << "' scale: 0.5 } }\n";
  Net net(Path("net.prototxt"), TEST);
  net.Forward();
  const Blob& data = *net.blob_by_name("data");
  const Blob& label = *net.blob_by_name("label");
  ASSERT_EQ(data.shape(), (std::vector<int>{3, 3, kH, kW}));
  const double* x = data.cpu_data<double>();
  for (int n = 0; n < 3; ++n)
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < kH; ++h)
        for (int w = 0; w < kW; ++w) {
          const double want = (Pixel(n, h, w, c) - ExpectedMean(c, h, w)) * 0.5;
          ASSERT_NEAR(x[((n * 3 + c) * kH + h) * kW + w], want, 1e-4) << n << " " << c << " " << h << " " << w;
        }
  const double* y = label.cpu_data<double>();
  EXPECT_EQ(y[0], 3);
  EXPECT_EQ(y[1], 1);
  EXPECT_EQ(y[2], 0);
}

// ---- bad input ------------------------------------------------------------------------

TEST_F(ImageToolsTest, BadListFiles) {
  ExpectFailure(Convert("", "db", "no_such_list.txt"), {"no_such_list.txt", "cannot open"}, "db");

  WriteList("a.png 0\nd.png 1\nsub dir/b c.png abc\n");
  ExpectFailure(Convert("", "db"), {"list.txt:3", "'abc'", "not an integer"}, "db");
  WriteList("a.png 0\nd.png\n");
  ExpectFailure(Convert("", "db"), {"list.txt:2", "no label"}, "db");
  WriteList("a.png -2\n");
  ExpectFailure(Convert("", "db"), {"list.txt:1", "negative"}, "db");
  WriteList("\n\n");
  ExpectFailure(Convert("", "db"), {"list.txt", "no images"}, "db");
}

TEST_F(ImageToolsTest, BadImages) {
  WriteList("a.png 0\nmissing.png 1\nd.png 2\n");
  ExpectFailure(Convert("", "db"), {"list.txt:2", "img/missing.png", "cannot open", "--skip_bad"}, "db");
  WriteList("a.png 0\nbad.png 1\n");
  ExpectFailure(Convert("--encoded", "db"), {"list.txt:2", "img/bad.png", "cannot decode"}, "db");

  // --skip_bad: a warning naming the image, the rest converted, the count in the summary.
  WriteList("a.png 0\nmissing.png 1\nbad.png 2\nd.png 3\n");
  const ToolRun r = Convert("--skip_bad", "db");
  ASSERT_EQ(r.status, 0) << r.output;
  ExpectNoCrash(r);
  EXPECT_NE(r.output.find("missing.png"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bad.png"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("wrote 2 records"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 skipped"), std::string::npos) << r.output;
  const std::vector<Record> recs = ReadDb(Path("db"));
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].key, "00000000_a.png");
  EXPECT_EQ(recs[1].key, "00000003_d.png");
}

TEST_F(ImageToolsTest, BadOptionsAndOutputs) {
  WriteList("a.png 0\n");
  ASSERT_EQ(Convert("", "db").status, 0);
  // An existing database is refused and left as it was.
  const ToolRun again = Convert("", "db");
  ExpectFailure(again, {"db", "already exists"});
  EXPECT_EQ(ReadDb(Path("db")).size(), 1u);

  ExpectFailure(Convert("--backend=leveldb", "db2"), {"leveldb", "LMDB"}, "db2");
  ExpectFailure(Convert("--resize_width=4", "db2"), {"--resize_height"}, "db2");
  ExpectFailure(Convert("--encode_type=gif", "db2"), {"--encode_type=gif"}, "db2");
  WriteList("a.png 0\nuniform.png 1\n");
  ExpectFailure(Convert("--check_size", "db2"), {"list.txt:2", "uniform.png", "--check_size"}, "db2");

  // compute_image_mean: a missing database, records of two shapes (named by key).
  ExpectFailure(Mean("no_such_db mean.binaryproto"), {"no_such_db"});
  EXPECT_FALSE(fs::exists(dir_ / "mean.binaryproto"));
  ASSERT_EQ(Convert("", "mixed").status, 0);
  ExpectFailure(Mean("mixed mean.binaryproto"), {"00000001_uniform.png", "(3, 8, 10)", "(3, 5, 6)"});
  EXPECT_FALSE(fs::exists(dir_ / "mean.binaryproto"));
}

}  // namespace
}  // namespace cortado

#endif  // CORTADO_USE_OPENCV
