// decode_jpeg (data/jpeg_decode.hpp) on JPEGs encoded here: a region decode
// at every scale is exactly the region of the full decode at that scale; the
// full decode is exactly OpenCV's; a reduced-scale decode is the full decode
// averaged over blocks within a stated tolerance; files left to OpenCV and
// corrupt files. Built with libjpeg-turbo only.
#ifdef CORTADO_USE_LIBJPEG

#include "cortado/data/jpeg_decode.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cortado/common.hpp"
#include "jpeg_util.hpp"

#ifdef CORTADO_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#endif

namespace cortado {
namespace {

struct Decoded {
  std::vector<uint8_t> pixels;
  int height = 0, width = 0, channels = 0;
};

// The whole image at scale/8, or the region r.
Decoded Decode(const std::string& file, int channels, int scale, const JpegRegion* region = nullptr) {
  Decoded d;
  JpegInfo info;
  const bool ok = decode_jpeg(
      file, channels,
      [&](const JpegInfo& i, JpegRegion* r) {
        info = i;
        if (region) *r = *region;
        r->scale = scale;
      },
      &d.pixels);
  EXPECT_TRUE(ok);
  d.height = region ? region->height : jpeg_scaled_size(info.height, scale);
  d.width = region ? region->width : jpeg_scaled_size(info.width, scale);
  d.channels = static_cast<int>(d.pixels.size() / (static_cast<size_t>(d.height) * d.width));
  return d;
}

// Encoder settings real files use: 4:2:0, 4:2:2, 4:4:4, progressive, restart
// markers, gray.
std::vector<std::pair<std::string, test::JpegOptions>> Variants() {
  std::vector<std::pair<std::string, test::JpegOptions>> v;
  test::JpegOptions o;
  v.push_back({"420", o});
  o.v_samp = 1;
  v.push_back({"422", o});
  o.h_samp = 1;
  v.push_back({"444", o});
  o = {};
  o.progressive = true;
  v.push_back({"420 progressive", o});
  o = {};
  o.restart_rows = 2;
  o.quality = 75;
  v.push_back({"420 restart q75", o});
  o = {};
  o.gray = true;
  v.push_back({"gray", o});
  return v;
}

TEST(JpegDecodeTest, RegionAtEveryScaleIsTheRegionOfTheFullDecode) {
  // Odd sizes: partial iMCUs at the right and bottom edges.
  const int H = 141, W = 203;
  const std::vector<uint8_t> bgr = test::PhotoPixels(H, W, 3);
  std::mt19937 gen(11);
  for (const auto& [name, options] : Variants()) {
    const std::string file = test::EncodeJpeg(bgr, H, W, options);
    for (int channels : {0, 1, 3}) {
      for (int scale : {1, 2, 3, 4, 8}) {
        const Decoded full = Decode(file, channels, scale);
        ASSERT_EQ(full.height, jpeg_scaled_size(H, scale));
        for (int t = 0; t < 25; ++t) {
          JpegRegion r;
          // Regions touching the edges and regions starting on iMCU boundaries.
          r.width = 1 + static_cast<int>(gen() % static_cast<uint32_t>(full.width));
          r.height = 1 + static_cast<int>(gen() % static_cast<uint32_t>(full.height));
          r.x0 = t % 5 == 0 ? 0 : t % 5 == 1 ? full.width - r.width
                                              : static_cast<int>(gen() % static_cast<uint32_t>(full.width - r.width + 1));
          if (t % 5 == 2) r.x0 = std::min(full.width - r.width, 16 * (r.x0 / 16));
          r.y0 = t % 3 == 0 ? 0 : static_cast<int>(gen() % static_cast<uint32_t>(full.height - r.height + 1));
          const Decoded part = Decode(file, channels, scale, &r);
          ASSERT_EQ(part.channels, full.channels);
          const int C = full.channels;
          int differ = 0;
          for (int y = 0; y < r.height; ++y)
            for (int x = 0; x < r.width * C; ++x)
              differ += part.pixels[(static_cast<size_t>(y) * r.width) * C + x] !=
                        full.pixels[(static_cast<size_t>(y + r.y0) * full.width + r.x0) * C + x];
          // Tolerance: none (bit-identical).
          ASSERT_EQ(differ, 0) << name << " channels " << channels << " scale " << scale << "/8 region (" << r.x0
                               << ", " << r.y0 << ", " << r.width << ", " << r.height << ")";
        }
      }
    }
  }
}

// A decode at scale s/8 inverse-transforms each 8x8 block to s x s pixels:
// close to the full decode averaged over (8/s) x (8/s) boxes. Not equal: the
// reduced transform keeps the frequencies below the smaller image's Nyquist
// limit that a box average damps, and this image has texture at 0.9
// radians a pixel, which the box damps most at s = 4. Tolerances (levels of
// 255) for s = 1, 2, 4: mean |difference| <= 1, 3, 7; 99% of the values
// within 4, 10, 20 (measured: 0.5, 2.0, 5.3 and 2, 7, 16).
TEST(JpegDecodeTest, ReducedScaleIsTheFullDecodeAveragedWithinTolerance) {
  const int H = 256, W = 320;  // multiples of 16: the boxes tile the image
  const std::string file = test::EncodeJpeg(test::PhotoPixels(H, W, 5), H, W);
  const Decoded full = Decode(file, 3, 8);
  for (int scale : {1, 2, 4}) {
    const Decoded small = Decode(file, 3, scale);
    const int f = 8 / scale;
    ASSERT_EQ(small.height, H / f);
    std::vector<int> diff;
    for (int y = 0; y < small.height; ++y) {
      for (int x = 0; x < small.width; ++x) {
        for (int c = 0; c < 3; ++c) {
          double sum = 0;
          for (int dy = 0; dy < f; ++dy)
            for (int dx = 0; dx < f; ++dx) sum += full.pixels[((y * f + dy) * static_cast<size_t>(W) + x * f + dx) * 3 + c];
          diff.push_back(std::abs(static_cast<int>(std::lround(sum / (f * f))) -
                                  small.pixels[(y * static_cast<size_t>(small.width) + x) * 3 + c]));
        }
      }
    }
    double mean = 0;
    for (int d : diff) mean += d;
    mean /= static_cast<double>(diff.size());
    std::sort(diff.begin(), diff.end());
    const int p99 = diff[diff.size() * 99 / 100];
    const int k = scale == 1 ? 0 : scale == 2 ? 1 : 2;
    EXPECT_LE(mean, (std::array<double, 3>{1, 3, 7}[k])) << "scale " << scale << "/8";
    EXPECT_LE(p99, (std::array<int, 3>{4, 10, 20}[k])) << "scale " << scale << "/8";
    // And not trivially: the decode has content.
    EXPECT_NE(small.pixels[0], small.pixels[small.pixels.size() / 2 + 1]);
  }
}

#ifdef CORTADO_USE_OPENCV
// The full decode is OpenCV's, for every variant and channel request.
TEST(JpegDecodeTest, FullDecodeIsOpenCVs) {
  const int H = 97, W = 131;
  const std::vector<uint8_t> bgr = test::PhotoPixels(H, W, 7);
  for (const auto& [name, options] : Variants()) {
    const std::string file = test::EncodeJpeg(bgr, H, W, options);
    const cv::Mat buf(1, static_cast<int>(file.size()), CV_8UC1, const_cast<char*>(file.data()));
    for (const auto& [channels, flags] :
         {std::pair<int, int>{0, cv::IMREAD_ANYCOLOR}, {1, cv::IMREAD_GRAYSCALE}, {3, cv::IMREAD_COLOR}}) {
      const cv::Mat ref = cv::imdecode(buf, flags);
      const Decoded d = Decode(file, channels, 8);
      ASSERT_EQ(d.channels, ref.channels()) << name << " channels " << channels;
      ASSERT_EQ(d.pixels.size(), ref.total() * ref.elemSize());
      EXPECT_TRUE(std::equal(d.pixels.begin(), d.pixels.end(), ref.ptr<uint8_t>(0))) << name << " channels " << channels;
    }
  }
}
#endif

TEST(JpegDecodeTest, ExifRotationAndCmykAreLeftToOpenCV) {
  const int H = 40, W = 56;
  const std::vector<uint8_t> bgr = test::PhotoPixels(H, W, 1);
  test::JpegOptions o;
  std::vector<uint8_t> pixels;
  int calls = 0;
  auto count = [&](const JpegInfo& info, JpegRegion*) {
    ++calls;
    EXPECT_EQ(info.width, W);
    EXPECT_EQ(info.height, H);
  };
  o.app1 = test::ExifOrientation(1);
  EXPECT_TRUE(decode_jpeg(test::EncodeJpeg(bgr, H, W, o), 0, count, &pixels));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(pixels.size(), size_t{H} * W * 3);
  o.app1 = test::ExifOrientation(6);  // rotated 90 degrees: OpenCV turns it
  EXPECT_FALSE(decode_jpeg(test::EncodeJpeg(bgr, H, W, o), 0, count, &pixels));
  o = {};
  o.cmyk = true;
  EXPECT_FALSE(decode_jpeg(test::EncodeJpeg(bgr, H, W, o), 3, count, &pixels));
  EXPECT_EQ(calls, 1) << "choose is not called for the files left to OpenCV";
}

TEST(JpegDecodeTest, CorruptFilesThrowAndTruncatedDataDecodes) {
  const int H = 64, W = 80;
  const std::string file = test::EncodeJpeg(test::PhotoPixels(H, W, 2), H, W);
  std::vector<uint8_t> pixels;
  auto whole = [](const JpegInfo&, JpegRegion*) {};
  EXPECT_TRUE(is_jpeg(file));
  EXPECT_FALSE(is_jpeg("\x89PNG\r\n"));
  for (const std::string& bad : {std::string("\xFF\xD8\xFF garbage that is no JPEG header"),
                                 file.substr(0, 120) /* cut inside the tables */, std::string("\xFF\xD8\xFF")}) {
    try {
      decode_jpeg(bad, 0, whole, &pixels);
      ADD_FAILURE() << "no error for " << bad.size() << " bytes";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot decode the JPEG image (" + std::to_string(bad.size()) + " bytes)"),
                std::string::npos)
          << e.what();
    }
  }
  // Half the entropy-coded data: libjpeg's warning, the missing blocks gray.
  EXPECT_TRUE(decode_jpeg(file.substr(0, file.size() / 2), 0, whole, &pixels));
  EXPECT_EQ(pixels.size(), size_t{H} * W * 3);
  // An exception from choose leaves no state behind.
  EXPECT_THROW(decode_jpeg(file, 0, [](const JpegInfo&, JpegRegion*) { fail("from choose"); }, &pixels), Error);
}

TEST(JpegDecodeTest, ScaleForAWindow) {
  EXPECT_EQ(jpeg_scale_for(224, 224, 224, 224), 8);
  EXPECT_EQ(jpeg_scale_for(447, 500, 224, 224), 8);  // 447 * 4 / 8 < 224
  EXPECT_EQ(jpeg_scale_for(448, 500, 224, 224), 4);
  EXPECT_EQ(jpeg_scale_for(900, 1000, 224, 224), 2);
  EXPECT_EQ(jpeg_scale_for(1792, 1800, 224, 224), 1);
  EXPECT_EQ(jpeg_scale_for(100, 1800, 224, 224), 8);  // enlarged: decoded whole
  EXPECT_EQ(jpeg_scale_for(1000, 1000, 224, 300), 4);  // 250 < 300 columns at 2/8
  EXPECT_EQ(jpeg_scaled_size(203, 3), 77);  // ceil(203 * 3 / 8)
}

}  // namespace
}  // namespace cortado

#endif  // CORTADO_USE_LIBJPEG
