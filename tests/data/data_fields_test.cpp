// NVCaffe's data and augmentation fields (issue: Caffe's and NVCaffe's files
// mean what they meant), each against its expected effect on a synthetic
// image built here: the random resize (img_rand_resize_*, the aspect ratio,
// the stretches, allow_upscale, the interpolation choices), crop_h/crop_w,
// ImageData's short_side, distort_param (brightness, contrast, saturation,
// hue, channel order, their order and probabilities), transform_param's
// random_seed; DataParameter.shuffle on a real LMDB (every record once an
// epoch, a new order each epoch, the same for the same seed, Seek, shards);
// the field errors of bad combinations and the one log line of the fields
// Cortado accepts without applying.
//
// Expected images are computed here with OpenCV calls (cv::resize,
// cv::cvtColor, Mat::convertTo) or by hand, never by the transformer; the
// only thing taken from it is a record's random choices (DataTransformer::
// Plan), so that the test can compute what those choices must give.
// Tolerances: 0 (values are 8-bit pixels through the same OpenCV operation,
// exact in every output type used) unless a test states another.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cortado/data/data_transformer.hpp"
#include "cortado/data/lmdb.hpp"
#include "cortado/layers/data_layer.hpp"
#include "cortado/layers/image_data_layer.hpp"
#include "cortado/util/rng.hpp"
#include "layers/source_layer.hpp"
#include "log_lines.hpp"
#include "temp_dir.hpp"
#include "test_util.hpp"

#ifdef CORTADO_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#define REQUIRE_OPENCV()
#else
#define REQUIRE_OPENCV() GTEST_SKIP() << "no OpenCV in this build"
#endif

namespace cortado {
namespace {

using test::TempDir;

std::string Key(int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08d", i);
  return buf;
}

TransformationParameter Transform(const std::string& text) {
  TransformationParameter p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

/// A Data layer reading `source`; data_extra goes inside data_param.
std::string DataText(const std::string& source, int batch, const std::string& extra,
                     const std::string& data_extra = "") {
  return str_cat("name: 'data' type: 'Data' top: 'data' top: 'label' data_param { source: '", source,
                 "' batch_size: ", batch, " ", data_extra, " } ", extra);
}

/// Record i: label 100 + i, one byte (i + k) % 251 per value of (1, 2, 3).
void WriteLabelDb(const std::string& path, int n) {
  LmdbWriter w(path, 7);
  for (int i = 0; i < n; ++i) {
    Datum d;
    d.set_channels(1);
    d.set_height(2);
    d.set_width(3);
    std::string data;
    for (int k = 0; k < 6; ++k) data.push_back(static_cast<char>((i + k) % 251));
    d.set_data(data);
    d.set_label(100 + i);
    w.Put(Key(i), d.SerializeAsString());
  }
  w.Close();
}

#ifdef CORTADO_USE_OPENCV

// A BGR image: B a horizontal ramp, G a vertical ramp, R a checkerboard of 4
// pixel squares at 30 and 220, so that every channel, every offset and every
// flip shows, and brightness and contrast reach both 0 and 255.
cv::Mat Picture(int height, int width) {
  cv::Mat m(height, width, CV_8UC3);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      cv::Vec3b& p = m.at<cv::Vec3b>(y, x);
      p[0] = static_cast<uint8_t>(x * 255 / std::max(1, width - 1));
      p[1] = static_cast<uint8_t>(y * 255 / std::max(1, height - 1));
      p[2] = ((x / 4 + y / 4) % 2) ? 220 : 30;
    }
  return m;
}

/// The image as a raw Datum: (C, H, W) bytes.
Datum RawDatum(const cv::Mat& m, int label = 0) {
  Datum d;
  d.set_channels(m.channels());
  d.set_height(m.rows);
  d.set_width(m.cols);
  std::string data(m.total() * m.channels(), '\0');
  for (int c = 0; c < m.channels(); ++c)
    for (int y = 0; y < m.rows; ++y)
      for (int x = 0; x < m.cols; ++x)
        data[(static_cast<size_t>(c) * m.rows + y) * m.cols + x] =
            static_cast<char>(m.ptr<uint8_t>(y)[x * m.channels() + c]);
  d.set_data(data);
  d.set_label(label);
  return d;
}

/// The image as an encoded (PNG) Datum.
Datum PngDatum(const cv::Mat& m, int label = 0) {
  std::vector<uint8_t> png;
  EXPECT_TRUE(cv::imencode(".png", m, png));
  Datum d;
  d.set_encoded(true);
  d.set_data(std::string(png.begin(), png.end()));
  d.set_label(label);
  return d;
}

/// The (C, ch, cw) window at (h0, w0) of an 8-bit image, flipped if `mirror`,
/// minus one mean per channel (or none), times scale.
std::vector<float> Planar(const cv::Mat& m, int h0, int w0, int ch, int cw, bool mirror = false,
                          const std::vector<float>& mean = {}, float scale = 1) {
  const int C = m.channels();
  std::vector<float> out(static_cast<size_t>(C) * ch * cw);
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < ch; ++y)
      for (int x = 0; x < cw; ++x) {
        const int sx = w0 + (mirror ? cw - 1 - x : x);
        const float v = m.ptr<uint8_t>(h0 + y)[sx * C + c];
        out[(static_cast<size_t>(c) * ch + y) * cw + x] = (v - (mean.empty() ? 0.f : mean[c])) * scale;
      }
  return out;
}

/// The whole image, centre-cropped to ch x cw.
std::vector<float> CentreCrop(const cv::Mat& m, int ch, int cw) {
  return Planar(m, (m.rows - ch) / 2, (m.cols - cw) / 2, ch, cw);
}

/// A record through `t` with a generator seeded `seed` (none if seed < 0).
std::vector<float> Apply(const DataTransformer& t, const Datum& d, int64_t seed = -1) {
  const std::vector<int> s = t.InferShape(d);
  std::vector<float> out(static_cast<size_t>(s[0]) * s[1] * s[2]);
  std::mt19937 gen(static_cast<uint32_t>(seed < 0 ? 0 : seed));
  t.Transform(d, out.data(), seed < 0 ? nullptr : &gen);
  return out;
}

TransformPlan PlanOf(const DataTransformer& t, int height, int width, uint32_t seed) {
  std::mt19937 gen(seed);
  return t.Plan(height, width, &gen);
}

void ExpectSame(const std::vector<float>& got, const std::vector<float>& want, float tolerance,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tolerance) << what << ": value " << i << " of " << got.size();
  }
}

cv::Mat Resized(const cv::Mat& m, int height, int width, int interpolation) {
  cv::Mat r;
  cv::resize(m, r, cv::Size(width, height), 0, 0, interpolation);
  return r;
}

// ---- random resize ------------------------------------------------------------

// TEST with img_rand_resize_lower = upper (NVCaffe's TEST layers): a fixed
// resize of the shorter side, then the centre crop. 40 x 60 to a shorter side
// of 30 is 30 x 45, shrunk with interpolation_algo_down (INTER_NEAREST by
// default); growing to 80 is 80 x 120 with interpolation_algo_up (INTER_CUBIC
// by default), only with allow_upscale.
TEST(DataFieldsTest, FixedShorterSideResizeThenCentreCrop) {
  const cv::Mat img = Picture(40, 60);
  for (const Datum& d : {RawDatum(img), PngDatum(img)}) {
    const std::string kind = d.encoded() ? "png" : "raw";
    DataTransformer down(Transform("img_rand_resize_lower: 30 img_rand_resize_upper: 30 crop_size: 24"), TEST);
    EXPECT_EQ(down.InferShape(d), (std::vector<int>{3, 24, 24}));
    ExpectSame(Apply(down, d, 7), CentreCrop(Resized(img, 30, 45, cv::INTER_NEAREST), 24, 24), 0, kind + " down");
    DataTransformer area(
        Transform(
            "img_rand_resize_lower: 30 img_rand_resize_upper: 30 crop_size: 24 interpolation_algo_down: INTER_AREA"),
        TEST);
    ExpectSame(Apply(area, d, 7), CentreCrop(Resized(img, 30, 45, cv::INTER_AREA), 24, 24), 0, kind + " INTER_AREA");

    DataTransformer up(
        Transform("img_rand_resize_lower: 80 img_rand_resize_upper: 80 crop_size: 24 allow_upscale: true"), TEST);
    ExpectSame(Apply(up, d, 7), CentreCrop(Resized(img, 80, 120, cv::INTER_CUBIC), 24, 24), 0, kind + " up");
    DataTransformer up_linear(Transform("img_rand_resize_lower: 80 img_rand_resize_upper: 80 crop_size: 24 "
                                        "allow_upscale: true interpolation_algo_up: INTER_LINEAR"),
                              TEST);
    ExpectSame(Apply(up_linear, d, 7), CentreCrop(Resized(img, 80, 120, cv::INTER_LINEAR), 24, 24), 0,
               kind + " up INTER_LINEAR");
    // Without allow_upscale the image keeps its 40 x 60.
    DataTransformer clamped(Transform("img_rand_resize_lower: 80 img_rand_resize_upper: 80 crop_size: 24"), TEST);
    ExpectSame(Apply(clamped, d, 7), CentreCrop(img, 24, 24), 0, kind + " no upscale");
  }
  // A portrait image: the shorter side is the width (60 x 40 -> 45 x 30).
  const cv::Mat tall = Picture(60, 40);
  DataTransformer down(Transform("img_rand_resize_lower: 30 img_rand_resize_upper: 30 crop_size: 24"), TEST);
  ExpectSame(Apply(down, RawDatum(tall), 7), CentreCrop(Resized(tall, 45, 30, cv::INTER_NEAREST), 24, 24), 0,
             "portrait");
}

// TRAIN, lower < upper: the shorter side takes every length in [32, 48]
// (with allow_upscale, the aspect ratio kept: width lround(1.5 s)), and the
// image is that resize cropped at the drawn offset and flipped as drawn.
TEST(DataFieldsTest, RandomShorterSideCoversTheRangeAndGivesTheResizedCrop) {
  const cv::Mat img = Picture(40, 60);
  const Datum d = RawDatum(img);
  DataTransformer t(Transform("img_rand_resize_lower: 32 img_rand_resize_upper: 48 allow_upscale: true "
                              "crop_size: 28 mirror: true"),
                    TRAIN);
  std::set<int> sides;
  int flipped = 0;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    const TransformPlan plan = PlanOf(t, 40, 60, seed);
    const int side = plan.resize_h == 0 ? 40 : plan.resize_h;
    const int width = plan.resize_h == 0 ? 60 : plan.resize_w;
    ASSERT_GE(side, 32);
    ASSERT_LE(side, 48);
    // NVCaffe's arithmetic: f = side / 40 in float, width lround(f * 60).
    EXPECT_EQ(width, std::lround(static_cast<float>(side) / 40.f * 60.f)) << "the aspect ratio changed";
    sides.insert(side);
    ASSERT_LE(plan.crop_h0, side - 28);
    ASSERT_LE(plan.crop_w0, width - 28);
    flipped += plan.mirror;
    if (seed < 20) {
      const int interpolation = side <= 40 ? cv::INTER_NEAREST : cv::INTER_CUBIC;
      const cv::Mat r = plan.resize_h == 0 ? img : Resized(img, side, width, interpolation);
      ExpectSame(Apply(t, d, seed), Planar(r, plan.crop_h0, plan.crop_w0, 28, 28, plan.mirror), 0,
                 str_cat("seed ", seed));
    }
  }
  EXPECT_EQ(sides.size(), 17u) << "not every length of [32, 48] was drawn in 200 records";
  EXPECT_GT(flipped, 60);
  EXPECT_LT(flipped, 140);
}

// rand_resize_ratio (NVCaffe: the longer side becomes r times the shorter),
// then the vertical and horizontal stretches, with fixed ranges: 40 x 60
// -> ratio 1.25: 40 x 50 -> vertical 0.8, horizontal 1.1: 32 x 55, cropped
// 24 x 30 (crop_h, crop_w) at the centre.
TEST(DataFieldsTest, AspectRatioAndStretchesFollowNVCaffesFormula) {
  const cv::Mat img = Picture(40, 60);
  DataTransformer t(Transform("rand_resize_ratio_lower: 1.25 rand_resize_ratio_upper: 1.25 "
                              "vertical_stretch_lower: 0.8 vertical_stretch_upper: 0.8 "
                              "horizontal_stretch_lower: 1.1 horizontal_stretch_upper: 1.1 crop_h: 24 crop_w: 30"),
                    TEST);
  EXPECT_TRUE(t.random_resize());
  EXPECT_EQ(t.InferShape(RawDatum(img)), (std::vector<int>{3, 24, 30}));
  const TransformPlan plan = PlanOf(t, 40, 60, 1);
  EXPECT_EQ(plan.resize_h, 32);
  EXPECT_EQ(plan.resize_w, 55);
  ExpectSame(Apply(t, RawDatum(img), 3), CentreCrop(Resized(img, 32, 55, cv::INTER_NEAREST), 24, 30), 0, "stretched");

  // Random stretches in [0.7, 1.3] (NVCaffe's ResNet-50 recipe) with
  // allow_upscale: every size is f * (40, 60) stretched within the ranges,
  // and never less than the crop.
  DataTransformer r(Transform("img_rand_resize_lower: 40 img_rand_resize_upper: 40 allow_upscale: true "
                              "vertical_stretch_lower: 0.7 vertical_stretch_upper: 1.3 "
                              "horizontal_stretch_lower: 0.7 horizontal_stretch_upper: 1.3 crop_size: 30"),
                    TRAIN);
  std::set<std::pair<int, int>> sizes;
  for (uint32_t seed = 0; seed < 100; ++seed) {
    const TransformPlan p = PlanOf(r, 40, 60, seed);
    const int h = p.resize_h ? p.resize_h : 40, w = p.resize_h ? p.resize_w : 60;
    EXPECT_GE(h, std::max(30L, std::lround(40 * 0.7f)));
    EXPECT_LE(h, std::lround(40 * 1.3f));
    EXPECT_GE(w, std::lround(60 * 0.7f));
    EXPECT_LE(w, std::lround(60 * 1.3f));
    sizes.insert({h, w});
  }
  EXPECT_GT(sizes.size(), 50u) << "the stretches are not random";
  // A square picks the stretched side at random: 40 x 40 with ratio 1.5 is
  // 40 x 60 or 60 x 40 (allow_upscale).
  DataTransformer sq(
      Transform("rand_resize_ratio_lower: 1.5 rand_resize_ratio_upper: 1.5 allow_upscale: true crop_size: 8"), TRAIN);
  std::set<std::pair<int, int>> square;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    const TransformPlan p = PlanOf(sq, 40, 40, seed);
    square.insert({p.resize_h, p.resize_w});
  }
  EXPECT_EQ(square, (std::set<std::pair<int, int>>{{40, 60}, {60, 40}}));
}

// crop_h x crop_w without a resize: the shape, the centre at TEST, a window
// of the image at TRAIN (at the drawn offsets, which cover the range).
TEST(DataFieldsTest, NonSquareCrop) {
  const cv::Mat img = Picture(12, 20);
  const Datum d = RawDatum(img);
  DataTransformer test_t(Transform("crop_h: 6 crop_w: 11 mean_value: 10 mean_value: 20 mean_value: 30 scale: 0.5"),
                         TEST);
  EXPECT_EQ(test_t.InferShape(d), (std::vector<int>{3, 6, 11}));
  ExpectSame(Apply(test_t, d, 1), Planar(img, 3, 4, 6, 11, false, {10, 20, 30}, 0.5f), 0, "centre");
  DataTransformer train_t(Transform("crop_h: 6 crop_w: 11 mirror: true"), TRAIN);
  std::set<int> rows, cols;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    const TransformPlan p = PlanOf(train_t, 12, 20, seed);
    rows.insert(p.crop_h0);
    cols.insert(p.crop_w0);
    ExpectSame(Apply(train_t, d, seed), Planar(img, p.crop_h0, p.crop_w0, 6, 11, p.mirror), 0, str_cat("seed ", seed));
  }
  EXPECT_EQ(*rows.rbegin(), 6);
  EXPECT_EQ(*cols.rbegin(), 9);
  EXPECT_EQ(rows.size(), 7u);
}

// With a random resize the mean file's centre window is subtracted
// (NVCaffe), whatever the crop's offset.
TEST(DataFieldsTest, MeanFileWithARandomResizeIsTheCentreWindow) {
  TempDir dir;
  BlobProto mean;
  for (int d : {1, 3, 10, 16}) mean.mutable_shape()->add_dim(d);
  for (int k = 0; k < 3 * 10 * 16; ++k) mean.add_data(static_cast<float>(k % 97) * 0.5f);
  {
    std::ofstream out(dir / "mean.binaryproto", std::ios::binary);
    ASSERT_TRUE(mean.SerializeToOstream(&out));
  }
  const cv::Mat img = Picture(40, 60);
  DataTransformer t(Transform(str_cat("img_rand_resize_lower: 30 img_rand_resize_upper: 36 crop_h: 8 crop_w: 12 "
                                      "mean_file: '", dir / "mean.binaryproto", "'")),
                    TRAIN);
  for (uint32_t seed = 0; seed < 5; ++seed) {
    const TransformPlan p = PlanOf(t, 40, 60, seed);
    const cv::Mat r = p.resize_h ? Resized(img, p.resize_h, p.resize_w, cv::INTER_NEAREST) : img;
    std::vector<float> want = Planar(r, p.crop_h0, p.crop_w0, 8, 12);
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 8; ++y)
        for (int x = 0; x < 12; ++x) want[(c * 8 + y) * 12 + x] -= mean.data((c * 10 + 1 + y) * 16 + 2 + x);
    ExpectSame(Apply(t, RawDatum(img), seed), want, 0, str_cat("seed ", seed));
  }
}

// ImageData's short_side: 40 x 60 -> 20 x 30; 50 x 30 -> 33 x 20
// (50 * 20 / 30 rounded down), bilinear, then the centre 16 x 16.
TEST(DataFieldsTest, ImageDataShortSide) {
  TempDir dir;
  const std::vector<cv::Mat> images = {Picture(40, 60), Picture(50, 30)};
  {
    std::ofstream list(dir / "list.txt");
    for (size_t i = 0; i < images.size(); ++i) {
      ASSERT_TRUE(cv::imwrite(dir / str_cat(i, ".png"), images[i]));
      list << i << ".png " << i << "\n";
    }
  }
  ImageDataLayer<float, float> layer(test::MakeParam<test::TypePair<float, float>>(
      str_cat("name: 'images' type: 'ImageData' top: 'data' top: 'label' phase: TEST image_data_param { source: '",
              dir / "list.txt", "' root_folder: '", dir.root(), "' batch_size: 2 short_side: 20 } ",
              "transform_param { crop_size: 16 }")));
  test::Blobs top;
  top.add(FLOAT);
  top.add(FLOAT);
  layer.SetUp({}, top.vec);
  layer.Forward({}, top.vec);
  const std::vector<double> got = test::GetData(*top[0]);
  const std::vector<float> want0 = CentreCrop(Resized(images[0], 20, 30, cv::INTER_LINEAR), 16, 16);
  const std::vector<float> want1 = CentreCrop(Resized(images[1], 33, 20, cv::INTER_LINEAR), 16, 16);
  ExpectSame(std::vector<float>(got.begin(), got.begin() + 768), want0, 0, "40 x 60");
  ExpectSame(std::vector<float>(got.begin() + 768, got.end()), want1, 0, "50 x 30");
}

// ---- distort_param -----------------------------------------------------------------

// Each distortion alone, with probability 1, against its definition.
TEST(DataFieldsTest, EachDistortionAlone) {
  const cv::Mat img = Picture(16, 24);
  const Datum d = RawDatum(img);
  // Contrast with a fixed factor 1.5: x * 1.5 rounded (half to even, as
  // OpenCV's saturate_cast) and clipped to 255, computed by hand.
  {
    DataTransformer t(Transform("distort_param { contrast_prob: 1 contrast_lower: 1.5 contrast_upper: 1.5 }"), TRAIN);
    std::vector<float> want = Planar(img, 0, 0, 16, 24);
    for (float& v : want) v = static_cast<float>(std::min<long>(255, std::lrint(v * 1.5f)));
    ExpectSame(Apply(t, d, 3), want, 0, "contrast 1.5");
  }
  // Saturation 0: every pixel gray at its HSV value, max(B, G, R).
  {
    DataTransformer t(Transform("distort_param { saturation_prob: 1 saturation_lower: 0 saturation_upper: 0 }"), TRAIN);
    std::vector<float> want(3 * 16 * 24);
    for (int y = 0; y < 16; ++y)
      for (int x = 0; x < 24; ++x) {
        const cv::Vec3b p = img.at<cv::Vec3b>(y, x);
        for (int c = 0; c < 3; ++c) want[(c * 16 + y) * 24 + x] = std::max({p[0], p[1], p[2]});
      }
    ExpectSame(Apply(t, d, 3), want, 0, "saturation 0");
  }
  // Brightness: a delta in [-32, 32) added to every value (OpenCV's
  // convertTo), both signs over the records; hue: the delta added to the H
  // of OpenCV's HSV.
  DataTransformer bright(Transform("distort_param { brightness_prob: 1 brightness_delta: 32 }"), TRAIN);
  DataTransformer hue(Transform("distort_param { hue_prob: 1 hue_delta: 18 }"), TRAIN);
  int negative = 0;
  for (uint32_t seed = 0; seed < 12; ++seed) {
    const TransformPlan p = PlanOf(bright, 16, 24, seed);
    ASSERT_TRUE(p.distort.brightness);
    ASSERT_LE(std::fabs(p.distort.brightness_delta), 32.f);
    negative += p.distort.brightness_delta < 0;
    cv::Mat want;
    img.convertTo(want, -1, 1, p.distort.brightness_delta);
    ExpectSame(Apply(bright, d, seed), Planar(want, 0, 0, 16, 24), 0, str_cat("brightness, seed ", seed));

    const TransformPlan q = PlanOf(hue, 16, 24, seed);
    ASSERT_TRUE(q.distort.hue);
    ASSERT_LE(std::fabs(q.distort.hue_delta), 18.f);
    cv::Mat hsv, bgr;
    cv::cvtColor(img, hsv, cv::COLOR_BGR2HSV);
    std::vector<cv::Mat> planes;
    cv::split(hsv, planes);
    planes[0].convertTo(planes[0], -1, 1, q.distort.hue_delta);
    cv::merge(planes, hsv);
    cv::cvtColor(hsv, bgr, cv::COLOR_HSV2BGR);
    ExpectSame(Apply(hue, d, seed), Planar(bgr, 0, 0, 16, 24), 0, str_cat("hue, seed ", seed));
  }
  EXPECT_GT(negative, 0);
  EXPECT_LT(negative, 12);
  // Channel order: a permutation of the three planes.
  DataTransformer order(Transform("distort_param { random_order_prob: 1 }"), TRAIN);
  std::set<std::array<int, 3>> orders;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    const TransformPlan p = PlanOf(order, 16, 24, seed);
    ASSERT_TRUE(p.distort.reorder);
    orders.insert(p.distort.order);
    const std::vector<float> src = Planar(img, 0, 0, 16, 24), got = Apply(order, d, seed);
    std::vector<float> want;
    for (int k : p.distort.order) want.insert(want.end(), src.begin() + k * 384, src.begin() + (k + 1) * 384);
    ExpectSame(got, want, 0, str_cat("order, seed ", seed));
  }
  EXPECT_EQ(orders.size(), 6u) << "not every order of three channels was drawn in 60 records";
}

// SSD's recipe (probability 0.5 each, NVCaffe's SSD models): the steps a
// record's plan chose, applied here with OpenCV in the plan's order, then
// the crop, the flip and the mean: the distortion comes first, so a value
// clipped at 255 stays clipped after the mean. Also the probabilities: each
// step in about half the records, each order in about half.
TEST(DataFieldsTest, DistortionRecipeOrderAndProbabilities) {
  const cv::Mat img = Picture(20, 28);
  const Datum png = PngDatum(img);
  DataTransformer t(Transform("crop_size: 16 mirror: true mean_value: 104 mean_value: 117 mean_value: 123 "
                              "distort_param { brightness_prob: 0.5 brightness_delta: 32 contrast_prob: 0.5 "
                              "contrast_lower: 0.5 contrast_upper: 1.5 hue_prob: 0.5 hue_delta: 18 "
                              "saturation_prob: 0.5 saturation_lower: 0.5 saturation_upper: 1.5 "
                              "random_order_prob: 0.25 }"),
                    TRAIN);
  std::map<std::string, int> counts;
  const int records = 400;
  for (uint32_t seed = 0; seed < records; ++seed) {
    const TransformPlan p = PlanOf(t, 20, 28, seed);
    const TransformPlan::Distortion& s = p.distort;
    counts["brightness"] += s.brightness;
    counts["contrast"] += s.contrast;
    counts["saturation"] += s.saturation;
    counts["hue"] += s.hue;
    counts["reorder"] += s.reorder;
    counts["contrast_last"] += s.contrast_last;
    if (s.contrast) {
      EXPECT_GE(s.contrast_factor, 0.5f);
      EXPECT_LT(s.contrast_factor, 1.5f);
    }
    if (seed >= 40) continue;
    cv::Mat m = img.clone();
    auto hsv_channel = [&](int channel, float alpha, float beta) {
      cv::Mat hsv;
      cv::cvtColor(m, hsv, cv::COLOR_BGR2HSV);
      std::vector<cv::Mat> planes;
      cv::split(hsv, planes);
      planes[static_cast<size_t>(channel)].convertTo(planes[static_cast<size_t>(channel)], -1, alpha, beta);
      cv::merge(planes, hsv);
      cv::cvtColor(hsv, m, cv::COLOR_HSV2BGR);
    };
    auto contrast = [&] {
      if (s.contrast && std::fabs(s.contrast_factor - 1) > 1e-3f) m.convertTo(m, -1, s.contrast_factor, 0);
    };
    if (s.brightness && s.brightness_delta != 0) m.convertTo(m, -1, 1, s.brightness_delta);
    if (!s.contrast_last) contrast();
    if (s.saturation) hsv_channel(1, s.saturation_factor, 0);
    if (s.hue && s.hue_delta != 0) hsv_channel(0, 1, s.hue_delta);
    if (s.contrast_last) contrast();
    if (s.reorder) {
      std::vector<cv::Mat> planes, out;
      cv::split(m, planes);
      for (int k : s.order) out.push_back(planes[static_cast<size_t>(k)]);
      cv::merge(out, m);
    }
    ExpectSame(Apply(t, png, seed), Planar(m, p.crop_h0, p.crop_w0, 16, 16, p.mirror, {104, 117, 123}), 0,
               str_cat("seed ", seed));
  }
  // Binomial(400, 0.5): 200 +- 30 is over 4 standard deviations.
  for (const char* step : {"brightness", "contrast", "saturation", "hue", "contrast_last"}) {
    EXPECT_NEAR(counts[step], records / 2, 30) << step;
  }
  EXPECT_NEAR(counts["reorder"], records / 4, 30);
}

// ---- through the layers, on a real LMDB --------------------------------------------------

template <typename P>
class DataFieldsLayerTest : public test::SourceLayerTest<DataLayer, P> {};
TYPED_TEST_SUITE(DataFieldsLayerTest, test::AllPairs, test::PairNames);

// A Data layer over an LMDB of encoded images of two sizes, with NVCaffe's
// random resize, crop_h/crop_w, mirror, a distortion and transform_param's
// random_seed: record p of the stream is what the record's plan, drawn from
// record_rng_seed(random_seed, p), gives through OpenCV here, in every type
// pair (8-bit values are exact in all of them), whatever the solver's seed.
TYPED_TEST(DataFieldsLayerTest, RandomResizeCropAndDistortionThroughTheLayer) {
  using F = typename TypeParam::Ftype;
  TempDir dir;
  const std::vector<cv::Mat> images = {Picture(30, 40), Picture(36, 28), Picture(30, 30)};
  {
    LmdbWriter w(dir / "db");
    for (size_t i = 0; i < images.size(); ++i)
      w.Put(Key(static_cast<int>(i)), PngDatum(images[i], static_cast<int>(i)).SerializeAsString());
    w.Close();
  }
  const std::string transform =
      "img_rand_resize_lower: 24 img_rand_resize_upper: 32 crop_h: 20 crop_w: 22 mirror: true random_seed: 5 "
      "distort_param { brightness_prob: 0.5 brightness_delta: 20 }";
  const std::string text = DataText(dir / "db", 2, str_cat("phase: TRAIN transform_param { ", transform, " }"));
  const auto run = this->Batches(11, text, -1, 3);
  EXPECT_EQ(this->top_[0]->shape(), (std::vector<int>{2, 3, 20, 22}));
  EXPECT_EQ(this->Batches(12, text, -1, 3), run) << "random_seed: the solver's seed changed the images";
  DataTransformer reference(Transform(transform), TRAIN);
  for (int p = 0; p < 6; ++p) {
    const cv::Mat& img = images[static_cast<size_t>(p % 3)];
    std::mt19937 gen(static_cast<uint32_t>(record_rng_seed(5, p)));
    const TransformPlan plan = reference.Plan(img.rows, img.cols, &gen);
    cv::Mat m = img.clone();
    if (plan.distort.brightness && plan.distort.brightness_delta != 0)
      m.convertTo(m, -1, 1, plan.distort.brightness_delta);
    if (plan.resize_h) {
      const bool down = plan.resize_h <= m.rows && plan.resize_w <= m.cols;
      m = Resized(m, plan.resize_h, plan.resize_w, down ? cv::INTER_NEAREST : cv::INTER_CUBIC);
    }
    const std::vector<float> want = Planar(m, plan.crop_h0, plan.crop_w0, 20, 22, plan.mirror);
    const std::vector<double>& got = run[static_cast<size_t>(p / 2)].first;
    const size_t at = static_cast<size_t>(p % 2) * want.size();
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_EQ(got[at + k], test::RoundTo<F>(want[k])) << "record " << p << " value " << k;
    }
    EXPECT_EQ(run[static_cast<size_t>(p / 2)].second[static_cast<size_t>(p % 2)], static_cast<float>(p % 3));
  }
}

#endif  // CORTADO_USE_OPENCV

// ---- shuffle ---------------------------------------------------------------------------

/// The labels of `batches` batches of a Data layer.
std::vector<std::vector<float>> Labels(int64_t seed, const std::string& text, int64_t seek, int batches) {
  set_random_seed(seed);
  DataLayer<float, float> layer(test::MakeParam<test::TypePair<float, float>>(text));
  test::Blobs top;
  top.add(FLOAT);
  top.add(FLOAT);
  layer.SetUp({}, top.vec);
  if (seek >= 0) layer.Seek(seek);
  std::vector<std::vector<float>> out;
  for (int b = 0; b < batches; ++b) {
    layer.Forward({}, top.vec);
    const float* l = top[1]->cpu_data<float>();
    out.emplace_back(l, l + top[1]->count());
  }
  return out;
}

std::vector<float> Concat(const std::vector<std::vector<float>>& batches) {
  std::vector<float> out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

// shuffle at TRAIN on a real LMDB of 10 records read 4 at a time (batches
// straddle the epochs): every epoch holds every record once, each epoch in a
// new order, the same for the same seed and another for another seed; a Seek
// gives the batches of an uninterrupted run, and two shards of batch 2
// together are the batches of one reader of batch 4. TEST reads in key order.
TEST(DataFieldsShuffleTest, EveryRecordOnceAnEpochANewOrderEachEpochResumableAndShardAware) {
  TempDir dir;
  const int n = 10;
  WriteLabelDb(dir / "db", n);
  const std::string text = DataText(dir / "db", 4, "phase: TRAIN", "shuffle: true");
  const auto run = Labels(21, text, -1, 10);  // 40 records: 4 epochs
  const std::vector<float> stream = Concat(run);
  std::vector<float> all(n);
  std::iota(all.begin(), all.end(), 100.f);
  std::vector<std::vector<float>> epochs;
  for (int e = 0; e < 4; ++e) {
    epochs.emplace_back(stream.begin() + e * n, stream.begin() + (e + 1) * n);
    std::vector<float> sorted = epochs.back();
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, all) << "epoch " << e << " is not every record once";
    EXPECT_NE(epochs.back(), all) << "epoch " << e << " is in key order";
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
  EXPECT_NE(epochs[2], epochs[3]);
  EXPECT_EQ(Labels(21, text, -1, 10), run) << "the same seed gave another order";
  EXPECT_NE(Concat(Labels(22, text, -1, 3)), std::vector<float>(stream.begin(), stream.begin() + 12))
      << "another seed gave the same order";
  for (int seek : {1, 3, 7}) {
    EXPECT_EQ(Labels(21, text, seek, 2), (std::vector<std::vector<float>>{run[seek], run[seek + 1]}))
        << "Seek(" << seek << ")";
  }
  for (int shard = 0; shard < 2; ++shard) {
    const auto part = Labels(
        21, DataText(dir / "db", 2, "phase: TRAIN", str_cat("shuffle: true num_shards: 2 shard_id: ", shard)), -1, 10);
    for (int b = 0; b < 10; ++b)
      for (int k = 0; k < 2; ++k) EXPECT_EQ(part[b][k], run[b][2 * k + shard]) << "shard " << shard << " batch " << b;
  }
  // rand_skip moves the start within the shuffled stream.
  // (rand_skip 30: the 8 records read start within the first 32 of the 40.)
  const auto skipped = Labels(21, DataText(dir / "db", 4, "phase: TRAIN", "shuffle: true rand_skip: 30"), -1, 2);
  const std::vector<float> s = Concat(skipped);
  const auto at = std::search(stream.begin(), stream.end(), s.begin(), s.end());
  EXPECT_NE(at, stream.end()) << "rand_skip left the shuffled stream";

  const auto test_run = Concat(Labels(21, DataText(dir / "db", 5, "phase: TEST", "shuffle: true"), -1, 2));
  EXPECT_EQ(test_run, all) << "a TEST net reads in key order";
}

// ---- errors and the log line -----------------------------------------------------------------

FieldError SetUpError(const std::string& text) { return test::SourceSetUpError<DataLayer>(text, 2); }

TEST(DataFieldsErrorTest, BadCombinationsNameTheField) {
  TempDir dir;
  WriteLabelDb(dir / "db", 2);
  auto error = [&](const std::string& transform) {
    return SetUpError(DataText(dir / "db", 1, str_cat("phase: TRAIN transform_param { ", transform, " }")));
  };
  EXPECT_EQ(error("crop_h: 2").field(), "transform_param.crop_w");
  EXPECT_EQ(error("crop_w: 2").field(), "transform_param.crop_h");
  EXPECT_EQ(error("crop_h: 2 crop_w: 2 crop_size: 2").field(), "transform_param.crop_size");
  EXPECT_EQ(error("crop_h: 3 crop_w: 2").field(), "transform_param.crop_h");  // 3 rows of a 2 x 3 record
  EXPECT_EQ(error("img_rand_resize_lower: 2 img_rand_resize_upper: 3").field(), "transform_param.img_rand_resize_lower")
      << "a random resize without a crop";
  EXPECT_EQ(error("img_rand_resize_lower: 3 img_rand_resize_upper: 2 crop_size: 1").field(),
            "transform_param.img_rand_resize_upper");
  EXPECT_EQ(error("img_rand_resize_lower: 3 crop_size: 1").field(), "transform_param.img_rand_resize_upper");
  EXPECT_EQ(error("vertical_stretch_lower: 0.9").field(), "transform_param.vertical_stretch_lower")
      << "a stretch without a crop";
  EXPECT_EQ(error("forward_packing: NHWC").field(), "transform_param.forward_packing");
  EXPECT_EQ(error("distort_param { contrast_prob: 0.5 contrast_lower: 1.5 contrast_upper: 0.5 }").field(),
            "transform_param.distort_param.contrast_upper");
  EXPECT_EQ(error("distort_param { brightness_prob: 0.5 brightness_delta: -3 }").field(),
            "transform_param.distort_param.brightness_delta");
#ifdef CORTADO_USE_OPENCV
  // The records have one channel: no HSV.
  const FieldError gray = error("distort_param { saturation_prob: 0.5 saturation_lower: 0.5 saturation_upper: 1.5 }");
  EXPECT_EQ(gray.field(), "transform_param.distort_param.saturation_prob");
  EXPECT_NE(std::string(gray.what()).find("3-channel"), std::string::npos) << gray.what();
  // float_data records cannot be resized or distorted.
  LmdbWriter w(dir / "floats");
  Datum d;
  d.set_channels(1);
  d.set_height(4);
  d.set_width(4);
  for (int k = 0; k < 16; ++k) d.add_float_data(k);
  w.Put(Key(0), d.SerializeAsString());
  w.Close();
  EXPECT_EQ(
      SetUpError(
          DataText(dir / "floats", 1,
                   "phase: TRAIN transform_param { img_rand_resize_lower: 4 img_rand_resize_upper: 4 crop_size: 2 }"))
          .field(),
      "transform_param.img_rand_resize_lower");
#endif
}

// NVCaffe's tuning fields are accepted with one line per layer naming each
// of them; an augmentation Cortado does not apply makes it a WARNING.
TEST(DataFieldsLogTest, AcceptedFieldsGetOneLineNamingThem) {
  TempDir dir;
  WriteLabelDb(dir / "db", 2);
  auto set_up = [&](const std::string& text) {
    DataLayer<float, float> layer(test::MakeParam<test::TypePair<float, float>>(text));
    test::Blobs top;
    top.add(FLOAT);
    top.add(FLOAT);
    layer.SetUp({}, top.vec);
  };
  {
    test::LogLines log;
    set_up(DataText(dir / "db", 1, "phase: TRAIN transform_param { use_gpu_transform: true display: false }",
                    "cache: true parser_threads: 4"));
    const auto lines = log.with("accepted but not applied");
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0].first, google::GLOG_INFO);
    for (const char* field : {"data_param.cache", "data_param.parser_threads", "transform_param.use_gpu_transform",
                              "transform_param.display"}) {
      EXPECT_NE(lines[0].second.find(field), std::string::npos) << field << " not in: " << lines[0].second;
    }
  }
  {
    test::LogLines log;
    set_up(DataText(dir / "db", 1,
                    "phase: TRAIN transform_param { noise_param { prob: 0.5 } expand_param { prob: 0.5 } }"));
    const auto lines = log.with("accepted but not applied");
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0].first, google::GLOG_WARNING);
    EXPECT_NE(lines[0].second.find("noise_param"), std::string::npos) << lines[0].second;
    EXPECT_NE(lines[0].second.find("expand_param"), std::string::npos) << lines[0].second;
  }
  {
    test::LogLines log;
    set_up(DataText(dir / "db", 1, "phase: TRAIN", "shuffle: true"));
    EXPECT_TRUE(log.with("accepted but not applied").empty()) << "shuffle at TRAIN is applied";
  }
}

}  // namespace
}  // namespace cortado
