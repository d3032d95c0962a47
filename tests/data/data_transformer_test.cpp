// The random-resized crop of DataTransformer (transform_param.rand_crop_*,
// data/data_transformer.hpp) and the JPEG records decoded by libjpeg:
// - the windows follow the area and ratio ranges (statistics over many
//   draws), the same seed gives the same windows, torchvision's fallback;
// - the resampling pass is the documented formula;
// - JPEG records (encoded here): crop-only decoding is bit-identical to a full
//   decode; reduced-scale decoding agrees with a full decode followed by the
//   same crop and an area resize within the tolerance stated below;
// - a Data layer over JPEG records gives the same batches for 1 and several
//   threads, resumes with Seek, and names a corrupt record;
// - the FieldErrors of the parameters.

#include "cortado/data/data_transformer.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cortado/data/lmdb.hpp"
#include "cortado/layers/data_layer.hpp"
#include "layers/source_layer.hpp"
#include "temp_dir.hpp"
#include "test_util.hpp"
#ifdef CORTADO_USE_LIBJPEG
#include "cortado/data/jpeg_decode.hpp"
#include "jpeg_util.hpp"
#endif
#ifdef CORTADO_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace cortado {
namespace {

TransformationParameter Param(const std::string& text) {
  TransformationParameter p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

std::string FieldOf(const std::string& text, Phase phase = TRAIN) {
  try {
    DataTransformer t(Param(text), phase, "data", "Data");
  } catch (const FieldError& e) {
    EXPECT_NE(std::string(e.what()).find("'data'"), std::string::npos) << e.what();
    return e.field();
  }
  return "";
}

TEST(RandomResizedCropTest, ParameterErrorsNameTheField) {
  const std::string crop = "crop_size: 8 ";
  EXPECT_EQ(FieldOf(crop + "rand_crop_area_lower: 1.5"), "transform_param.rand_crop_area_lower");
  EXPECT_EQ(FieldOf(crop + "rand_crop_area_lower: -0.1"), "transform_param.rand_crop_area_lower");
  EXPECT_EQ(FieldOf(crop + "rand_crop_area_lower: 0.5 rand_crop_area_upper: 0.4"),
            "transform_param.rand_crop_area_upper");
  EXPECT_EQ(FieldOf(crop + "rand_crop_area_lower: 0.5 rand_crop_ratio_lower: 0"),
            "transform_param.rand_crop_ratio_lower");
  EXPECT_EQ(FieldOf(crop + "rand_crop_area_lower: 0.5 rand_crop_ratio_lower: 2 rand_crop_ratio_upper: 1"),
            "transform_param.rand_crop_ratio_upper");
  EXPECT_EQ(FieldOf("rand_crop_area_lower: 0.5"), "transform_param.rand_crop_area_lower");  // no crop
  EXPECT_EQ(FieldOf(crop + "rand_crop_area_lower: 0.5 img_rand_resize_lower: 10 img_rand_resize_upper: 20"),
            "transform_param.rand_crop_area_lower");
  EXPECT_EQ(FieldOf(crop + "rand_crop_ratio_upper: 2"), "transform_param.rand_crop_ratio_upper");  // while off
  EXPECT_EQ(FieldOf(crop + "rand_crop_area_lower: 0.08"), "");
  // TEST: accepted, off (the centre crop).
  DataTransformer test(Param(crop + "rand_crop_area_lower: 0.08"), TEST);
  EXPECT_FALSE(test.random_resized_crop());
  DataTransformer train(Param(crop + "rand_crop_area_lower: 0.08"), TRAIN);
  EXPECT_TRUE(train.random_resized_crop());
}

// Ranges where every first try fits a 400 x 400 image (the largest window is
// sqrt(0.5 * 160000 * 4/3) = 327 pixels), so the draws are the ranges'.
TEST(RandomResizedCropTest, WindowsFollowTheAreaAndRatioRanges) {
  DataTransformer t(Param("crop_size: 32 mirror: true rand_crop_area_lower: 0.1 rand_crop_area_upper: 0.5"), TRAIN);
  const int H = 400, W = 400, n = 20000;
  std::mt19937 gen(1);
  double area_sum = 0, log_ratio_sum = 0, h0_sum = 0, mirrored = 0;
  int area_low_half = 0, ratio_above_1 = 0;
  for (int i = 0; i < n; ++i) {
    const TransformPlan p = t.Plan(H, W, &gen);
    ASSERT_GT(p.window_h, 0);
    ASSERT_GE(p.window_h0, 0);
    ASSERT_GE(p.window_w0, 0);
    ASSERT_LE(p.window_h0 + p.window_h, H);
    ASSERT_LE(p.window_w0 + p.window_w, W);
    const double area = static_cast<double>(p.window_h) * p.window_w / (H * W);
    const double log_ratio = std::log(static_cast<double>(p.window_w) / p.window_h);
    // Rounding each side to whole pixels moves the area by about 1%.
    ASSERT_GE(area, 0.1 * 0.98);
    ASSERT_LE(area, 0.5 * 1.02);
    ASSERT_LE(std::fabs(log_ratio), std::log(4.0 / 3.0) + 0.02);
    area_sum += area;
    log_ratio_sum += log_ratio;
    area_low_half += area < 0.3;
    ratio_above_1 += log_ratio > 0;
    h0_sum += H == p.window_h ? 0.5 : static_cast<double>(p.window_h0) / (H - p.window_h);
    mirrored += p.mirror;
  }
  // Uniform area on [0.1, 0.5]: mean 0.3 (standard error 0.0008); log-uniform
  // ratio: mean log 0; uniform offsets; a fair mirror.
  EXPECT_NEAR(area_sum / n, 0.3, 0.004);
  EXPECT_NEAR(static_cast<double>(area_low_half) / n, 0.5, 0.02);
  EXPECT_NEAR(log_ratio_sum / n, 0.0, 0.005);
  EXPECT_NEAR(static_cast<double>(ratio_above_1) / n, 0.5, 0.02);
  EXPECT_NEAR(h0_sum / n, 0.5, 0.02);
  EXPECT_NEAR(mirrored / n, 0.5, 0.02);
}

TEST(RandomResizedCropTest, SameSeedSameWindows) {
  DataTransformer t(Param("crop_size: 32 mirror: true rand_crop_area_lower: 0.08"), TRAIN);
  auto windows = [&](uint32_t seed) {
    std::mt19937 gen(seed);
    std::vector<int> out;
    for (int i = 0; i < 200; ++i) {
      const TransformPlan p = t.Plan(375, 500, &gen);
      out.insert(out.end(), {p.window_h0, p.window_w0, p.window_h, p.window_w, p.mirror ? 1 : 0});
    }
    return out;
  };
  EXPECT_EQ(windows(5), windows(5));
  EXPECT_NE(windows(5), windows(6));
}

TEST(RandomResizedCropTest, FallbackIsTheCentreCropClippedToTheRatios) {
  // No try fits: every window of 90% of the area is wider than 100 pixels.
  DataTransformer t(Param("crop_size: 32 rand_crop_area_lower: 0.9"), TRAIN);
  std::mt19937 gen(3);
  TransformPlan tall = t.Plan(1000, 100, &gen);
  EXPECT_EQ(tall.window_w, 100);
  EXPECT_EQ(tall.window_h, 133);  // lround(100 / 0.75)
  EXPECT_EQ(tall.window_h0, (1000 - 133) / 2);
  EXPECT_EQ(tall.window_w0, 0);
  TransformPlan wide = t.Plan(100, 1000, &gen);
  EXPECT_EQ(wide.window_h, 100);
  EXPECT_EQ(wide.window_w, 133);  // lround(100 * 4/3)
  EXPECT_EQ(wide.window_w0, (1000 - 133) / 2);
  // Without a generator: midpoints (area 0.95, ratio 1), centred.
  TransformPlan mid = t.Plan(200, 200, nullptr);
  EXPECT_EQ(mid.window_h, 195);  // lround(sqrt(0.95 * 40000))
  EXPECT_EQ(mid.window_w, 195);
  EXPECT_EQ(mid.window_h0, 2);
  EXPECT_FALSE(mid.mirror);
}

Datum RawDatum(int C, int H, int W, const std::vector<uint8_t>& planar, int label = 0) {
  Datum d;
  d.set_channels(C);
  d.set_height(H);
  d.set_width(W);
  d.set_data(std::string(planar.begin(), planar.end()));
  d.set_label(label);
  return d;
}

// The documented pass: bilinear at sy(y), sx(x'), clamped, then mean and
// scale, for a planar raw record (computed here in double).
template <typename T>
void CheckResampleFormula(double tolerance) {
  const int C = 3, H = 19, W = 27, crop = 8;
  std::vector<uint8_t> pixels(static_cast<size_t>(C) * H * W);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 37 + i / 7) % 256);
  const Datum d = RawDatum(C, H, W, pixels);
  DataTransformer t(Param("crop_size: 8 mirror: true scale: 0.5 mean_value: 10 mean_value: 20 mean_value: 30 "
                          "rand_crop_area_lower: 0.05 rand_crop_ratio_lower: 0.5 rand_crop_ratio_upper: 2"),
                    TRAIN);
  for (uint32_t seed = 0; seed < 30; ++seed) {
    std::mt19937 gen(seed), copy(seed);
    const TransformPlan p = t.Plan(H, W, &copy);
    std::vector<T> out(static_cast<size_t>(C) * crop * crop);
    t.Transform(d, out.data(), &gen);
    auto pixel = [&](int c, int y, int x) {
      y = std::clamp(y, 0, H - 1);
      x = std::clamp(x, 0, W - 1);
      return static_cast<double>(pixels[(static_cast<size_t>(c) * H + y) * W + x]);
    };
    for (int c = 0; c < C; ++c) {
      for (int y = 0; y < crop; ++y) {
        for (int x = 0; x < crop; ++x) {
          const int xs = p.mirror ? crop - 1 - x : x;
          const double sy = p.window_h0 + (y + 0.5) * p.window_h / crop - 0.5;
          const double sx = p.window_w0 + (xs + 0.5) * p.window_w / crop - 0.5;
          const int y0 = static_cast<int>(std::floor(sy)), x0 = static_cast<int>(std::floor(sx));
          const double fy = sy - y0, fx = sx - x0;
          const double v = (1 - fy) * ((1 - fx) * pixel(c, y0, x0) + fx * pixel(c, y0, x0 + 1)) +
                           fy * ((1 - fx) * pixel(c, y0 + 1, x0) + fx * pixel(c, y0 + 1, x0 + 1));
          const double expected = (v - 10.0 * (c + 1)) * 0.5;
          ASSERT_NEAR(static_cast<double>(out[(static_cast<size_t>(c) * crop + y) * crop + x]), expected, tolerance)
              << "seed " << seed << " (" << c << ", " << y << ", " << x << ")";
        }
      }
    }
  }
}

TEST(RandomResizedCropTest, ResamplingIsTheDocumentedFormula) {
  CheckResampleFormula<float>(1e-3);
  CheckResampleFormula<double>(1e-3);
  CheckResampleFormula<float16>(128 * 1e-3);  // float16 holds 11 bits: 0.0625 at 128
}

#ifdef CORTADO_USE_LIBJPEG

struct Photo {
  int H, W;
  std::vector<uint8_t> decoded;  // (H, W, 3) BGR, the full decode
  std::string file;
};

Photo MakePhoto(int H, int W, uint32_t seed, const test::JpegOptions& o = {}) {
  Photo p{H, W, {}, test::EncodeJpeg(test::PhotoPixels(H, W, seed), H, W, o)};
  EXPECT_TRUE(decode_jpeg(p.file, 3, [](const JpegInfo&, JpegRegion*) {}, &p.decoded));
  return p;
}

Datum JpegDatum(const Photo& p, int label = 0) {
  Datum d;
  d.set_encoded(true);
  d.set_data(p.file);
  d.set_channels(3);
  d.set_height(p.H);
  d.set_width(p.W);
  d.set_label(label);
  return d;
}

// The full decode as a raw (C, H, W) record: the path that decodes nothing.
Datum DecodedDatum(const Photo& p) {
  std::vector<uint8_t> planar(p.decoded.size());
  for (int y = 0; y < p.H; ++y)
    for (int x = 0; x < p.W; ++x)
      for (int c = 0; c < 3; ++c)
        planar[(static_cast<size_t>(c) * p.H + y) * p.W + x] = p.decoded[(static_cast<size_t>(y) * p.W + x) * 3 + c];
  return RawDatum(3, p.H, p.W, planar);
}

template <typename T>
std::vector<T> Apply(const DataTransformer& t, const Datum& d, uint32_t seed, size_t count) {
  std::vector<T> out(count);
  std::mt19937 gen(seed);
  t.Transform(d, out.data(), &gen);
  return out;
}

// Crop-only decoding (scale 8: every window narrower than twice the crop):
// bit-identical to the decode-everything path, for the random-resized crop
// and for the fixed random crop, 4:2:0 and 4:2:2 and progressive files.
TEST(JpegTransformTest, CropOnlyDecodeIsBitIdentical) {
  test::JpegOptions o422;
  o422.v_samp = 1;
  test::JpegOptions progressive;
  progressive.progressive = true;
  for (const Photo& p : {MakePhoto(190, 250, 1), MakePhoto(201, 173, 2, o422), MakePhoto(160, 240, 3, progressive)}) {
    const Datum jpeg = JpegDatum(p), raw = DecodedDatum(p);
    for (const std::string& text :
         {std::string("crop_size: 130 mirror: true scale: 0.01 mean_value: 104 mean_value: 117 mean_value: 123 "
                      "rand_crop_area_lower: 0.08"),
          std::string("crop_h: 100 crop_w: 90 mirror: true scale: 0.5 mean_value: 100")}) {
      DataTransformer t(Param(text), TRAIN);
      const size_t n = 3 * static_cast<size_t>(t.crop_h()) * t.crop_w();
      for (uint32_t seed = 0; seed < 40; ++seed) {
        ASSERT_EQ(Apply<float>(t, jpeg, seed, n), Apply<float>(t, raw, seed, n)) << text << " seed " << seed;
        ASSERT_EQ(Apply<float16>(t, jpeg, seed, n), Apply<float16>(t, raw, seed, n)) << text << " seed " << seed;
      }
    }
  }
  // TEST's centre crop, and no crop at all.
  const Photo p = MakePhoto(120, 150, 4);
  for (const std::string& text : {std::string("crop_size: 64"), std::string("scale: 2")}) {
    DataTransformer t(Param(text), TEST);
    const size_t n = t.crop_h() > 0 ? 3 * 64 * 64 : 3 * 120 * 150;
    EXPECT_EQ(Apply<float>(t, JpegDatum(p), 0, n), Apply<float>(t, DecodedDatum(p), 0, n)) << text;
  }
}

#ifdef CORTADO_USE_OPENCV
// Reduced-scale decoding against a full decode followed by the same crop and
// OpenCV's area resize (INTER_AREA, the reference for shrinking) of the
// window to the crop. Tolerance, in levels of 255 over the windows that
// decode at s = 1, 2 or 4: mean |difference| <= 4 and 99% of the values
// within 20 (the reduced transform keeps frequencies that area averaging
// damps; jpeg_decode_test.cpp measures that part alone). The
// decode-everything path's bilinear taps, shrinking by up to 6 here, alias
// (measured: mean 3.4 and 99% within 14.4 for the reduced scales, 8.3 and
// 25.5 for bilinear on the full decode); the reduced-scale path must not be
// worse than it by more than 1 level on average.
TEST(JpegTransformTest, ReducedScaleDecodeAgreesWithFullDecodeAndAreaResize) {
  const Photo p = MakePhoto(480, 640, 9);
  const int crop = 80;
  DataTransformer t(Param("crop_size: 80 rand_crop_area_lower: 0.2"), TRAIN);
  const Datum jpeg = JpegDatum(p), raw = DecodedDatum(p);
  const cv::Mat full(p.H, p.W, CV_8UC3, const_cast<uint8_t*>(p.decoded.data()));
  std::vector<double> diff_jpeg, diff_raw;
  int reduced = 0;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 copy(seed);
    const TransformPlan plan = t.Plan(p.H, p.W, &copy);
    if (jpeg_scale_for(plan.window_h, plan.window_w, crop, crop) == 8) continue;
    ++reduced;
    cv::Mat ref;
    cv::resize(full(cv::Rect(plan.window_w0, plan.window_h0, plan.window_w, plan.window_h)), ref,
               cv::Size(crop, crop), 0, 0, cv::INTER_AREA);
    const std::vector<float> a = Apply<float>(t, jpeg, seed, 3 * crop * crop), b = Apply<float>(t, raw, seed, 3 * crop * crop);
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < crop; ++y)
        for (int x = 0; x < crop; ++x) {
          const double r = ref.at<cv::Vec3b>(y, x)[c];
          const size_t k = (static_cast<size_t>(c) * crop + y) * crop + x;
          diff_jpeg.push_back(std::fabs(a[k] - r));
          diff_raw.push_back(std::fabs(b[k] - r));
        }
  }
  ASSERT_GT(reduced, 20) << "the windows must exercise the reduced scales";
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double d : v) s += d;
    return s / static_cast<double>(v.size());
  };
  auto p99 = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() * 99 / 100];
  };
  EXPECT_LE(mean(diff_jpeg), 4.0);
  EXPECT_LE(p99(diff_jpeg), 20.0);
  EXPECT_LE(mean(diff_jpeg), mean(diff_raw) + 1.0);
  RecordProperty("p99_reduced_scale", std::to_string(p99(diff_jpeg)));
  RecordProperty("p99_full_bilinear", std::to_string(p99(diff_raw)));
  RecordProperty("mean_abs_reduced_scale", std::to_string(mean(diff_jpeg)));
  RecordProperty("mean_abs_full_bilinear", std::to_string(mean(diff_raw)));
}
#endif  // CORTADO_USE_OPENCV

template <typename P>
class JpegDataLayerTest : public test::SourceLayerTest<DataLayer, P> {};
using JpegPairs = ::testing::Types<test::TypePair<float, float>, test::TypePair<float16, float16>>;
TYPED_TEST_SUITE(JpegDataLayerTest, JpegPairs, test::PairNames);

std::string Key(int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08d", i);
  return buf;
}

// JPEGs of varied sizes and aspect ratios; record `bad` (if >= 0) corrupt.
void WriteJpegDb(const std::string& path, int n, int bad = -1) {
  LmdbWriter w(path);
  for (int i = 0; i < n; ++i) {
    const int H = 60 + 17 * (i % 5), W = 70 + 23 * (i % 4);
    Datum d = JpegDatum(MakePhoto(H, W, 100 + static_cast<uint32_t>(i)), 7 * i);
    if (i == bad) d.set_data(d.data().substr(0, 3) + std::string(200, '\x42'));
    w.Put(Key(i), d.SerializeAsString());
  }
  w.Close();
}

const char* kRandomResizedCrop =
    "phase: TRAIN transform_param { crop_size: 48 mirror: true scale: 0.017 mean_value: 104 mean_value: 117 "
    "mean_value: 123 rand_crop_area_lower: 0.08 }";

std::string JpegDataText(const std::string& source, int batch, int threads) {
  return str_cat("name: 'data' type: 'Data' top: 'data' top: 'label' data_param { source: '", source,
                 "' batch_size: ", batch, " threads: ", threads, " } ", kRandomResizedCrop);
}

TYPED_TEST(JpegDataLayerTest, ThreadsDoNotChangeTheBatchesAndSeekResumes) {
  test::TempDir dir;
  WriteJpegDb(dir / "db", 13);
  const auto one = this->Batches(21, JpegDataText(dir / "db", 5, 1), -1, 6);
  EXPECT_EQ(this->Batches(21, JpegDataText(dir / "db", 5, 3), -1, 6), one);
  EXPECT_EQ(this->Batches(21, JpegDataText(dir / "db", 5, 4), -1, 6), one);
  const auto resumed = this->Batches(21, JpegDataText(dir / "db", 5, 2), 3, 3);
  for (int b = 0; b < 3; ++b) EXPECT_EQ(resumed[static_cast<size_t>(b)], one[static_cast<size_t>(b) + 3]) << b;
  // Not trivially equal: the crops differ between batches and from another seed.
  EXPECT_NE(one[0].first, one[3].first);
  EXPECT_NE(this->Batches(22, JpegDataText(dir / "db", 5, 1), -1, 1)[0].first, one[0].first);
  EXPECT_EQ(one[1].second[0], 7.f * 5);
}

TEST(JpegDataLayerErrorTest, CorruptJpegRecordNamesSourceAndKey) {
  test::TempDir dir;
  WriteJpegDb(dir / "db", 6, 3);
  for (int threads : {1, 2}) {
    DataLayer<float, float> layer(test::MakeParam<test::TypePair<float, float>>(JpegDataText(dir / "db", 1, threads)));
    test::Blobs top;
    top.add(FLOAT);
    top.add(FLOAT);
    layer.SetUp({}, top.vec);
    int ok = 0;
    std::string msg;
    for (int i = 0; i < 6 && msg.empty(); ++i) {
      try {
        layer.Forward({}, top.vec);
        ++ok;
      } catch (const Error& e) {
        msg = e.what();
      }
    }
    EXPECT_EQ(ok, 3) << threads << " threads";
    EXPECT_NE(msg.find("'data'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(dir / "db"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'00000003'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cannot decode the JPEG image (203 bytes)"), std::string::npos) << msg;
    EXPECT_THROW(layer.Forward({}, top.vec), Error);
  }
}

#endif  // CORTADO_USE_LIBJPEG

}  // namespace
}  // namespace cortado
