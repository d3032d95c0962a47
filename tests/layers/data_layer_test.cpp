// DataLayer: real LMDB databases of raw, float and encoded (PNG) Datum
// records, read through the layer; values after scale/mean/crop/mirror,
// labels exact as float, wrap-around, Seek reproducing an uninterrupted run,
// and the errors for bad sources, parameters and records.

#include "cortado/layers/data_layer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cortado/data/lmdb.hpp"
#include "cortado/util/rng.hpp"
#include "layers/source_layer.hpp"
#include "temp_dir.hpp"
#include "test_util.hpp"

#ifdef CORTADO_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#endif

namespace cortado {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

std::string Key(int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08d", i);
  return buf;
}

// Distinct for every (record, c, h, w) in the small shapes below, so that a
// wrong offset, channel or flip changes the value.
int Pixel(int i, int c, int h, int w) { return (i * 29 + c * 67 + h * 11 + w * 3) % 256; }
// Odd and above 2048: float16 cannot hold these, float can.
int Label(int i) { return 2049 + 2 * i; }

struct Shape3 {
  int c, h, w;
};

Datum RawDatum(int i, Shape3 s) {
  Datum d;
  d.set_channels(s.c);
  d.set_height(s.h);
  d.set_width(s.w);
  std::string data;
  for (int c = 0; c < s.c; ++c)
    for (int h = 0; h < s.h; ++h)
      for (int w = 0; w < s.w; ++w) data.push_back(static_cast<char>(Pixel(i, c, h, w)));
  d.set_data(data);
  d.set_label(Label(i));
  return d;
}

/// Writes n records; `edit(i, datum)` may change record i before it is stored.
void WriteDb(const std::string& path, int n, Shape3 s,
             const std::function<void(int, Datum*)>& edit = nullptr) {
  LmdbWriter w(path, 3);
  for (int i = 0; i < n; ++i) {
    Datum d = RawDatum(i, s);
    if (edit) edit(i, &d);
    w.Put(Key(i), d.SerializeAsString());
  }
  w.Close();
}

template <typename P>
class DataLayerTest : public test::SourceLayerTest<DataLayer, P> {};

TYPED_TEST_SUITE(DataLayerTest, test::AllPairs, test::PairNames);

/// A Data layer; data_extra goes inside data_param, extra after it.
std::string DataText(const std::string& source, int batch, const std::string& extra,
                     const std::string& data_extra = "") {
  return str_cat("name: 'data' type: 'Data' top: 'data' top: 'label' data_param { source: '", source,
                 "' batch_size: ", batch, " ", data_extra, " } ", extra);
}

TYPED_TEST(DataLayerTest, ReadsRecordsInOrderWrapsAndKeepsLabelsExact) {
  using F = typename TypeParam::Ftype;
  TempDir dir;
  const Shape3 s{2, 3, 4};
  WriteDb(dir / "db", 5, s);
  this->SetUp(DataText(dir / "db", 3,
                       "phase: TEST transform_param { scale: 0.25 mean_value: 10 mean_value: 20.5 }"));
  EXPECT_EQ(this->top_[0]->shape(), (std::vector<int>{3, 2, 3, 4}));
  EXPECT_EQ(this->top_[1]->shape(), (std::vector<int>{3}));
  const double mean[2] = {10, 20.5};
  const std::vector<std::vector<int>> batches = {{0, 1, 2}, {3, 4, 0}, {1, 2, 3}};
  for (const auto& records : batches) {
    this->Forward();
    EXPECT_EQ(this->top_[0]->data().type(), type_of<F>());
    EXPECT_EQ(this->top_[1]->data().type(), FLOAT);
    const std::vector<double> got = this->Data();
    const std::vector<float> labels = this->Labels();
    for (int n = 0; n < 3; ++n) {
      const int i = records[n];
      EXPECT_EQ(labels[n], static_cast<float>(Label(i))) << "record " << i;
      for (int c = 0; c < 2; ++c)
        for (int h = 0; h < 3; ++h)
          for (int w = 0; w < 4; ++w) {
            const double want = test::RoundTo<F>((Pixel(i, c, h, w) - mean[c]) * 0.25);
            ASSERT_EQ(got[((n * 2 + c) * 3 + h) * 4 + w], want) << "record " << i << " c" << c << " h" << h << " w" << w;
          }
    }
  }
}

TYPED_TEST(DataLayerTest, CenterCropAtTest) {
  using F = typename TypeParam::Ftype;
  TempDir dir;
  WriteDb(dir / "db", 2, {2, 5, 6});
  this->SetUp(DataText(dir / "db", 2, "phase: TEST transform_param { crop_size: 3 mean_value: 3 }"));
  ASSERT_EQ(this->top_[0]->shape(), (std::vector<int>{2, 2, 3, 3}));
  this->Forward();
  const std::vector<double> got = this->Data();
  const int h0 = 1, w0 = 1;  // ((5 - 3) / 2, (6 - 3) / 2)
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c)
      for (int h = 0; h < 3; ++h)
        for (int w = 0; w < 3; ++w)
          EXPECT_EQ(got[((n * 2 + c) * 3 + h) * 3 + w], test::RoundTo<F>(Pixel(n, c, h + h0, w + w0) - 3.0));
}

// Which (h0, w0, mirrored) crop of record i the image at `out` is; -1 if none.
std::tuple<int, int, int> FindCrop(const double* out, int i, Shape3 s, int crop) {
  for (int h0 = 0; h0 <= s.h - crop; ++h0)
    for (int w0 = 0; w0 <= s.w - crop; ++w0)
      for (int m = 0; m < 2; ++m) {
        bool same = true;
        for (int c = 0; c < s.c && same; ++c)
          for (int h = 0; h < crop && same; ++h)
            for (int w = 0; w < crop && same; ++w) {
              const int sw = m ? crop - 1 - w : w;
              same = out[(c * crop + h) * crop + w] == Pixel(i, c, h + h0, sw + w0);
            }
        if (same) return {h0, w0, m};
      }
  return {-1, -1, -1};
}

TYPED_TEST(DataLayerTest, RandomCropAndMirrorAtTrain) {
  TempDir dir;
  const Shape3 s{2, 5, 6};
  const int crop = 3;
  WriteDb(dir / "db", 6, s);
  set_random_seed(3);
  this->SetUp(DataText(dir / "db", 6, "phase: TRAIN transform_param { crop_size: 3 mirror: true }"));
  std::set<std::tuple<int, int, int>> seen;
  for (int epoch = 0; epoch < 4; ++epoch) {
    this->Forward();
    const std::vector<double> got = this->Data();
    for (int n = 0; n < 6; ++n) {
      const auto found = FindCrop(got.data() + n * s.c * crop * crop, n, s, crop);
      ASSERT_GE(std::get<0>(found), 0) << "image " << n << " of epoch " << epoch << " is no crop of its record";
      seen.insert(found);
    }
  }
  // 24 draws over 3*4*2 = 24 possibilities: far more than 4 distinct ones,
  // and both flips, unless the offsets are not random.
  EXPECT_GT(seen.size(), 6u);
  int mirrored = 0;
  for (const auto& t : seen) mirrored += std::get<2>(t);
  EXPECT_GT(mirrored, 0);
  EXPECT_LT(mirrored, static_cast<int>(seen.size()));
}

TYPED_TEST(DataLayerTest, SeekReproducesAnUninterruptedRun) {
  TempDir dir;
  WriteDb(dir / "db", 7, {1, 6, 6});
  const std::string transform = "phase: TRAIN transform_param { crop_size: 4 mirror: true }";
  const std::string text = DataText(dir / "db", 3, transform);
  const std::string skip_text = DataText(dir / "db", 3, transform, "rand_skip: 5");
  using Run = typename TestFixture::Run;
  auto run = [&](int64_t seed, const std::string& t, int64_t seek, int batches) {
    return this->Batches(seed, t, seek, batches);
  };
  for (const std::string& t : {text, skip_text}) {
    const Run full = run(1701, t, -1, 6);
    EXPECT_EQ(run(1701, t, -1, 2), Run(full.begin(), full.begin() + 2)) << "same seed, same batches";
    EXPECT_EQ(run(1701, t, 4, 2), Run(full.begin() + 4, full.begin() + 6)) << "Seek(4)";
    // Seek in the middle of a run, with batches already prefetched.
    set_random_seed(1701);
    this->SetUp(t);
    this->Forward();
    this->Forward();
    this->layer_->Seek(1);
    this->Forward();
    EXPECT_EQ(this->Data(), full[1].first) << "Seek(1) after two batches";
    this->Forward();
    EXPECT_EQ(this->Data(), full[2].first);
    EXPECT_NE(run(1702, t, -1, 6), full) << "another seed, other crops";
  }
}

// The batches are a function of (seed, stream position) only, however many
// threads transform them: 1, 3 (uneven chunks of a batch of 7) or 7.
// Several workers, stopped and restarted mid-run by Seek, continue with the
// batch an uninterrupted single reader gives.
TYPED_TEST(DataLayerTest, SeekWithSeveralWorkersContinuesTheStream) {
  TempDir dir;
  WriteDb(dir / "db", 10, {2, 5, 6});
  const std::string transform = "phase: TRAIN transform_param { crop_size: 3 mirror: true }";
  const auto one = this->Batches(31, DataText(dir / "db", 3, transform, "threads: 1"), -1, 8);
  const std::string three = DataText(dir / "db", 3, transform, "threads: 3 prefetch: 2");
  set_random_seed(31);
  this->SetUp(three);
  for (int b : {0, 1, 2}) {
    this->Forward();
    EXPECT_EQ(this->Data(), one[b].first) << "batch " << b;
  }
  this->layer_->Seek(6);
  this->Forward();
  EXPECT_EQ(this->Data(), one[6].first) << "Seek(6) after three batches";
  this->layer_->Seek(1);
  for (int b : {1, 2, 3, 4}) {
    this->Forward();
    EXPECT_EQ(this->Data(), one[b].first) << "batch " << b << " after Seek(1)";
    EXPECT_EQ(this->Labels(), one[b].second) << "batch " << b << " after Seek(1)";
  }
}

TYPED_TEST(DataLayerTest, ThreadsDoNotChangeTheBatches) {
  TempDir dir;
  WriteDb(dir / "db", 9, {2, 5, 6});
  const std::string transform = "phase: TRAIN transform_param { crop_size: 3 mirror: true }";
  auto run = [&](int threads) {
    return this->Batches(77, DataText(dir / "db", 7, transform, str_cat("threads: ", threads)), -1, 4);
  };
  const auto one = run(1);
  EXPECT_EQ(run(3), one);
  EXPECT_EQ(run(7), one);
  // Labels of the second batch: records 7, 8, 0, 1, ... in order.
  EXPECT_EQ(one[1].second[0], Label(7));
  EXPECT_EQ(one[1].second[2], Label(0));
}

// Shard s of S reads positions s, s + S, ... with the crops and flips they
// have unsharded: batch b of the S shards (batch B each), interleaved, is
// batch b of one reader with batch S * B, wrap-around, rand_skip and Seek
// included. This is what makes a multi-rank step the step of one big batch.
TYPED_TEST(DataLayerTest, ShardsTogetherAreTheUnshardedBatch) {
  TempDir dir;
  const Shape3 s{2, 5, 6};
  const int image = s.c * 3 * 3;
  WriteDb(dir / "db", 11, s);  // 11: the shards wrap around at different records
  const std::string transform = "phase: TRAIN transform_param { crop_size: 3 mirror: true }";
  using Run = typename TestFixture::Run;
  auto run = [&](const std::string& data_extra, int batch, int64_t seek, int batches) {
    return this->Batches(2024, DataText(dir / "db", batch, transform, data_extra), seek, batches);
  };
  for (const std::string skip : {"", "rand_skip: 7 "}) {
    const int S = 3, B = 2, batches = 5;
    const Run whole = run(skip, S * B, -1, batches);
    std::vector<Run> shard;
    for (int k = 0; k < S; ++k) shard.push_back(run(skip + str_cat("shard_id: ", k, " num_shards: ", S), B, -1, batches));
    for (int b = 0; b < batches; ++b) {
      for (int i = 0; i < S * B; ++i) {
        const auto& part = shard[i % S][b];
        const int j = i / S;
        EXPECT_EQ(part.second[j], whole[b].second[i]) << skip << "batch " << b << " image " << i;
        EXPECT_EQ(std::vector<double>(part.first.begin() + j * image, part.first.begin() + (j + 1) * image),
                  std::vector<double>(whole[b].first.begin() + i * image, whole[b].first.begin() + (i + 1) * image))
            << skip << "batch " << b << " image " << i;
      }
    }
    // Resume: a shard's Seek(3) gives its own batches 3 and 4.
    EXPECT_EQ(run(skip + "shard_id: 1 num_shards: 3", B, 3, 2), Run(shard[1].begin() + 3, shard[1].end()));
  }
}

TYPED_TEST(DataLayerTest, FloatDataRecordsAndLegacyDataParamScale) {
  using F = typename TypeParam::Ftype;
  TempDir dir;
  const Shape3 s{1, 2, 3};
  WriteDb(dir / "db", 2, s, [](int i, Datum* d) {
    d->clear_data();
    for (int j = 0; j < 6; ++j) d->add_float_data(i * 8 + j * 0.5f - 1.0f);
  });
  this->SetUp(DataText(dir / "db", 2, "phase: TEST transform_param { mean_value: 0.5 }", "scale: 2"));
  this->Forward();
  const std::vector<double> got = this->Data();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 6; ++j)
      EXPECT_EQ(got[i * 6 + j], test::RoundTo<F>((i * 8 + j * 0.5 - 1.0 - 0.5) * 2)) << i << "," << j;
}

TYPED_TEST(DataLayerTest, MeanFileWithCenterCrop) {
  using F = typename TypeParam::Ftype;
  TempDir dir;
  const Shape3 s{2, 4, 4};
  WriteDb(dir / "db", 1, s);
  auto mean = [](int c, int h, int w) { return c * 3 + h * 0.5 + w * 0.25; };
  BlobProto proto;
  for (int d : {1, 2, 4, 4}) proto.mutable_shape()->add_dim(d);
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 4; ++w) proto.add_data(static_cast<float>(mean(c, h, w)));
  {
    std::ofstream f(dir / "mean.binaryproto", std::ios::binary);
    ASSERT_TRUE(proto.SerializeToOstream(&f));
  }
  this->SetUp(DataText(dir / "db", 1,
                       str_cat("phase: TEST transform_param { crop_size: 2 scale: 0.5 mean_file: '",
                               dir / "mean.binaryproto", "' }")));
  this->Forward();
  const std::vector<double> got = this->Data();
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 2; ++w)
        EXPECT_EQ(got[(c * 2 + h) * 2 + w],
                  test::RoundTo<F>((Pixel(0, c, h + 1, w + 1) - mean(c, h + 1, w + 1)) * 0.5));
}

#ifdef CORTADO_USE_OPENCV
std::string EncodePng(const cv::Mat& img) {
  std::vector<uchar> buf;
  CORTADO_CHECK(cv::imencode(".png", img, buf));
  return std::string(buf.begin(), buf.end());
}

// A 4x5 BGR image for record i: channel c at (h, w) is Pixel(i, c, h, w).
cv::Mat ColorImage(int i) {
  cv::Mat img(4, 5, CV_8UC3);
  for (int h = 0; h < 4; ++h)
    for (int w = 0; w < 5; ++w)
      for (int c = 0; c < 3; ++c) img.at<cv::Vec3b>(h, w)[c] = static_cast<uchar>(Pixel(i, c, h, w));
  return img;
}

TYPED_TEST(DataLayerTest, EncodedPngRecords) {
  using F = typename TypeParam::Ftype;
  TempDir dir;
  // Encoded records carry no dimensions, as Caffe's convert_imageset writes them.
  WriteDb(dir / "db", 3, {1, 1, 1}, [](int i, Datum* d) {
    d->clear_channels();
    d->clear_height();
    d->clear_width();
    d->set_encoded(true);
    d->set_data(EncodePng(ColorImage(i)));
  });
  this->SetUp(DataText(dir / "db", 2, "phase: TEST transform_param { scale: 0.5 }"));
  ASSERT_EQ(this->top_[0]->shape(), (std::vector<int>{2, 3, 4, 5}));
  for (const std::vector<int> records : {std::vector<int>{0, 1}, std::vector<int>{2, 0}}) {
    this->Forward();
    const std::vector<double> got = this->Data();
    const std::vector<float> labels = this->Labels();
    for (int n = 0; n < 2; ++n) {
      const int i = records[n];
      EXPECT_EQ(labels[n], static_cast<float>(Label(i)));
      for (int c = 0; c < 3; ++c)
        for (int h = 0; h < 4; ++h)
          for (int w = 0; w < 5; ++w)
            ASSERT_EQ(got[((n * 3 + c) * 4 + h) * 5 + w], test::RoundTo<F>(Pixel(i, c, h, w) * 0.5))
                << "record " << i << " c" << c << " h" << h << " w" << w;
    }
  }
}

TYPED_TEST(DataLayerTest, EncodedGrayPngWithForceColor) {
  using F = typename TypeParam::Ftype;
  TempDir dir;
  WriteDb(dir / "db", 1, {1, 1, 1}, [](int i, Datum* d) {
    cv::Mat img(3, 2, CV_8UC1);
    for (int h = 0; h < 3; ++h)
      for (int w = 0; w < 2; ++w) img.at<uchar>(h, w) = static_cast<uchar>(Pixel(i, 0, h, w));
    d->set_encoded(true);
    d->set_data(EncodePng(img));
  });
  this->SetUp(DataText(dir / "db", 1, "phase: TEST transform_param { force_color: true }"));
  ASSERT_EQ(this->top_[0]->shape(), (std::vector<int>{1, 3, 3, 2}));
  this->Forward();
  const std::vector<double> got = this->Data();
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < 3; ++h)
      for (int w = 0; w < 2; ++w) EXPECT_EQ(got[(c * 3 + h) * 2 + w], test::RoundTo<F>(Pixel(0, 0, h, w)));
  // force_gray on a color image gives one channel.
  TempDir dir2;
  WriteDb(dir2 / "db", 1, {1, 1, 1}, [](int i, Datum* d) {
    d->set_encoded(true);
    d->set_data(EncodePng(ColorImage(i)));
  });
  this->SetUp(DataText(dir2 / "db", 1, "phase: TEST transform_param { force_gray: true }"));
  EXPECT_EQ(this->top_[0]->shape(), (std::vector<int>{1, 1, 4, 5}));
}
#endif  // CORTADO_USE_OPENCV

// ---- errors (one pair is enough: the checks do not depend on the types) ----------

using FloatLayer = DataLayer<float, float>;
using FloatPair = test::TypePair<float, float>;

/// Sets up a Data layer from text and returns the FieldError it throws.
FieldError SetUpError(const std::string& text) { return test::SourceSetUpError<DataLayer>(text, 2); }

TEST(DataLayerErrorTest, MissingSourceNamesFieldAndPath) {
  TempDir dir;
  const FieldError e = SetUpError(DataText(dir / "no_such_lmdb", 2, ""));
  EXPECT_EQ(e.field(), "data_param.source");
  EXPECT_NE(std::string(e.what()).find(dir / "no_such_lmdb"), std::string::npos) << e.what();
  EXPECT_EQ(e.layer(), "data");
}

TEST(DataLayerErrorTest, BadParameters) {
  TempDir dir;
  WriteDb(dir / "db", 2, {2, 3, 3});
  FieldError e = SetUpError(DataText(dir / "db", 2, "", "backend: LEVELDB"));
  EXPECT_EQ(e.field(), "data_param.backend");
  EXPECT_NE(std::string(e.what()).find("LEVELDB is not supported, use LMDB"), std::string::npos) << e.what();
  e = SetUpError(DataText(dir / "db", 0, ""));
  EXPECT_EQ(e.field(), "data_param.batch_size");
  e = SetUpError(DataText(dir / "db", 2, "", "prefetch: 0"));
  EXPECT_EQ(e.field(), "data_param.prefetch");
  e = SetUpError(DataText(dir / "db", 2, "", "threads: 1000"));
  EXPECT_EQ(e.field(), "data_param.threads");
  e = SetUpError(DataText(dir / "db", 2, "", "shard_id: 2 num_shards: 2"));
  EXPECT_EQ(e.field(), "data_param.shard_id");
  EXPECT_NE(std::string(e.what()).find("must be less than num_shards = 2"), std::string::npos) << e.what();
  e = SetUpError(DataText(dir / "db", 2, "", "num_shards: 0"));
  EXPECT_EQ(e.field(), "data_param.num_shards");
  e = SetUpError(DataText(dir / "db", 2, "transform_param { crop_size: 4 }"));
  EXPECT_EQ(e.field(), "transform_param.crop_size");
  e = SetUpError(DataText(dir / "db", 2, "transform_param { mean_value: 1 mean_value: 2 mean_value: 3 }"));
  EXPECT_EQ(e.field(), "transform_param.mean_value");
  e = SetUpError(DataText(dir / "db", 2, "transform_param { mean_file: '" + dir / "missing.binaryproto" + "' }"));
  EXPECT_EQ(e.field(), "transform_param.mean_file");
  EXPECT_NE(std::string(e.what()).find("missing.binaryproto"), std::string::npos) << e.what();
  e = SetUpError(DataText(dir / "db", 2, "transform_param { scale: 3 }", "scale: 2"));
  EXPECT_EQ(e.field(), "data_param.scale");
  e = SetUpError(DataText(dir / "db", 2, "transform_param { force_color: true force_gray: true }"));
  EXPECT_EQ(e.field(), "transform_param.force_gray");
  TempDir empty;
  LmdbWriter(empty / "db").Close();
  e = SetUpError(DataText(empty / "db", 2, ""));
  EXPECT_EQ(e.field(), "data_param.source");
  EXPECT_NE(std::string(e.what()).find("no records"), std::string::npos) << e.what();
}

/// Forwards until one throws; returns its message ("" if none in `max` forwards).
std::string ForwardError(FloatLayer* layer, const BlobVec& top, int max, int* ok_forwards) {
  *ok_forwards = 0;
  for (int k = 0; k < max; ++k) {
    try {
      layer->Forward({}, top);
      ++*ok_forwards;
    } catch (const Error& e) {
      return e.what();
    }
  }
  return "";
}

TEST(DataLayerErrorTest, CorruptRecordNamesSourceAndKey) {
  TempDir dir;
  // Record 4 is one byte short.
  WriteDb(dir / "db", 6, {2, 3, 3}, [](int i, Datum* d) {
    if (i == 4) d->mutable_data()->pop_back();
  });
  FloatLayer layer(test::MakeParam<FloatPair>(DataText(dir / "db", 2, "phase: TEST")));
  test::Blobs top;
  top.add(FLOAT);
  top.add(FLOAT);
  layer.SetUp({}, top.vec);
  int ok = 0;
  const std::string msg = ForwardError(&layer, top.vec, 5, &ok);
  EXPECT_EQ(ok, 2) << "batches (0, 1) and (2, 3) are good";
  EXPECT_NE(msg.find(dir / "db"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'00000004'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("17 bytes"), std::string::npos) << msg;
  // The error stays: later forwards raise it again instead of waiting forever.
  EXPECT_THROW(layer.Forward({}, top.vec), Error);
  // Seeking back restarts the reader.
  layer.Seek(0);
  EXPECT_NO_THROW(layer.Forward({}, top.vec));
  EXPECT_EQ(top[1]->cpu_data<float>()[1], static_cast<float>(Label(1)));
}

// With several workers the batches after a bad one may be filled first;
// Forward still gives every batch before it, then the error, in order.
TEST(DataLayerErrorTest, WorkersRaiseABadRecordAtItsBatch) {
  TempDir dir;
  WriteDb(dir / "db", 9, {2, 3, 3}, [](int i, Datum* d) {
    if (i == 5) d->mutable_data()->pop_back();
  });
  for (int threads : {2, 3, 4}) {
    FloatLayer layer(
        test::MakeParam<FloatPair>(DataText(dir / "db", 1, "phase: TEST", str_cat("threads: ", threads))));
    test::Blobs top;
    top.add(FLOAT);
    top.add(FLOAT);
    layer.SetUp({}, top.vec);
    int ok = 0;
    const std::string msg = ForwardError(&layer, top.vec, 8, &ok);
    EXPECT_EQ(ok, 5) << threads << " workers: records 0 to 4 are good";
    EXPECT_NE(msg.find("'00000005'"), std::string::npos) << msg;
    EXPECT_THROW(layer.Forward({}, top.vec), Error);
    layer.Seek(6);  // past the bad record: the workers start again there
    layer.Forward({}, top.vec);
    EXPECT_EQ(top[1]->cpu_data<float>()[0], static_cast<float>(Label(6))) << threads << " workers";
  }
}

TEST(DataLayerErrorTest, RecordOfAnotherShapeOrNotADatum) {
  TempDir dir;
  WriteDb(dir / "db", 4, {1, 3, 3}, [](int i, Datum* d) {
    if (i == 2) *d = RawDatum(i, {1, 4, 3});
  });
  FloatLayer layer(test::MakeParam<FloatPair>(DataText(dir / "db", 1, "phase: TEST")));
  test::Blobs top;
  top.add(FLOAT);
  layer.SetUp({}, top.vec);
  int ok = 0;
  std::string msg = ForwardError(&layer, top.vec, 4, &ok);
  EXPECT_EQ(ok, 2);
  EXPECT_NE(msg.find("'00000002'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("first record"), std::string::npos) << msg;

  TempDir dir2;
  {
    LmdbWriter w(dir2 / "db");
    w.Put(Key(0), RawDatum(0, {1, 2, 2}).SerializeAsString());
    w.Put(Key(1), std::string("\xff\xff\xff\xff garbage", 12));
  }
  FloatLayer layer2(test::MakeParam<FloatPair>(DataText(dir2 / "db", 1, "phase: TEST")));
  layer2.SetUp({}, top.vec);
  msg = ForwardError(&layer2, top.vec, 3, &ok);
  EXPECT_EQ(ok, 1);
  EXPECT_NE(msg.find("'00000001'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a Datum"), std::string::npos) << msg;
}

#ifdef CORTADO_USE_OPENCV
TEST(DataLayerErrorTest, UndecodableImageNamesKey) {
  TempDir dir;
  WriteDb(dir / "db", 3, {1, 1, 1}, [](int i, Datum* d) {
    d->set_encoded(true);
    d->set_data(i == 1 ? std::string("\x89PNG but not really") : EncodePng(ColorImage(i)));
  });
  FloatLayer layer(test::MakeParam<FloatPair>(DataText(dir / "db", 1, "phase: TEST")));
  test::Blobs top;
  top.add(FLOAT);
  layer.SetUp({}, top.vec);
  int ok = 0;
  const std::string msg = ForwardError(&layer, top.vec, 3, &ok);
  EXPECT_EQ(ok, 1);
  EXPECT_NE(msg.find("'00000001'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("decode"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir / "db"), std::string::npos) << msg;
}
#endif

// GPU against CPU: the batch is copied from pinned memory on the device's
// stream; the same seed gives the same crops, flips and labels (float).
// Six forwards over a prefetch of 2, so that the reader refills batches
// whose device copies it must wait for, and the database wraps around.
TYPED_TEST(DataLayerTest, GpuMatchesCpu) {
  TempDir dir;
  WriteDb(dir / "db", 7, Shape3{2, 5, 6});
  auto fill = [](int, Blob*) {};
  const std::string text = DataText(dir / "db", 3, "phase: TRAIN transform_param { crop_size: 3 mirror: true }",
                                    "prefetch: 2");
  test::CheckGpuAgainstCpu<TypeParam>(text, {}, fill, test::GpuTolerance{0, 0}, {}, 2, 6);
}

}  // namespace
}  // namespace cortado
