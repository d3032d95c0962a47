// ImageData: real PNG files written with OpenCV and a real list file, read
// through the layer: the list's order with wrap-around, exact labels, resize
// and gray decoding against OpenCV's own reading of the same files, a
// shuffled order that is a new permutation each epoch and follows the seed
// (Seek and shards included), and the errors that name the list, the line
// and the image.

#include "cortado/layers/image_data_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cortado/util/rng.hpp"
#include "layers/source_layer.hpp"
#include "temp_dir.hpp"
#include "test_util.hpp"

#ifdef CORTADO_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace cortado {
namespace {

// Odd and above 2048: float16 cannot hold these, float can.
int Label(int i) { return 2049 + 2 * i; }

/// An ImageData layer; image_extra goes inside image_data_param, extra after it.
std::string ImageText(const test::TempDir& dir, int batch, const std::string& image_extra,
                      const std::string& extra = "") {
  return str_cat("name: 'images' type: 'ImageData' top: 'data' top: 'label' image_data_param { source: '",
                 dir / "list.txt", "' root_folder: '", dir.root(), "' batch_size: ", batch, " ", image_extra, " } ",
                 extra);
}

#ifdef CORTADO_USE_OPENCV
// Image i: 3 channels of distinct values, `height` x `width`.
cv::Mat Picture(int i, int height, int width) {
  cv::Mat m(height, width, CV_8UC3);
  for (int h = 0; h < height; ++h)
    for (int w = 0; w < width; ++w)
      for (int c = 0; c < 3; ++c) m.at<cv::Vec3b>(h, w)[c] = static_cast<uint8_t>((i * 41 + c * 67 + h * 13 + w * 5) % 256);
  return m;
}

/// Writes n PNGs (image i is 4 x 5, or 6 x 3 when i is odd) and the list
/// "img/<i>.png <Label(i)>", one a line (a blank line and CRLF included).
void WriteImages(const test::TempDir& dir, int n) {
  std::filesystem::create_directories(dir / "img");
  std::ofstream list(dir / "list.txt");
  for (int i = 0; i < n; ++i) {
    const std::string name = str_cat("img/", i, ".png");
    cv::imwrite(dir / name, i % 2 ? Picture(i, 6, 3) : Picture(i, 4, 5));
    list << name << " " << Label(i) << (i == 1 ? "\r\n\n" : "\n");
  }
}

/// OpenCV's own reading of image i, resized to 4 x 5, as (C, H, W) values.
std::vector<double> Expected(const test::TempDir& dir, int i, bool color) {
  cv::Mat m = cv::imread(dir / str_cat("img/", i, ".png"), color ? cv::IMREAD_COLOR : cv::IMREAD_GRAYSCALE);
  if (m.rows != 4 || m.cols != 5) {
    cv::Mat r;
    cv::resize(m, r, cv::Size(5, 4), 0, 0, cv::INTER_LINEAR);
    m = r;
  }
  const int C = m.channels();
  std::vector<double> out(static_cast<size_t>(C) * 20);
  for (int c = 0; c < C; ++c)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 5; ++w) out[(c * 4 + h) * 5 + w] = m.ptr<uint8_t>(h)[w * C + c];
  return out;
}
#endif

#ifdef CORTADO_USE_OPENCV
#define REQUIRE_OPENCV()
#else
#define REQUIRE_OPENCV() GTEST_SKIP() << "no OpenCV in this build"
#endif

template <typename P>
class ImageDataLayerTest : public test::SourceLayerTest<ImageDataLayer, P> {
 protected:
  /// The labels of the batches of SourceLayerTest::Batches.
  std::vector<std::vector<float>> LabelBatches(int64_t seed, const std::string& text, int64_t seek, int batches) {
    std::vector<std::vector<float>> out;
    for (auto& [data, labels] : this->Batches(seed, text, seek, batches)) out.push_back(std::move(labels));
    return out;
  }
};

TYPED_TEST_SUITE(ImageDataLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(ImageDataLayerTest, ReadsTheListInOrderResizedWithExactLabels) {
  REQUIRE_OPENCV();
#ifdef CORTADO_USE_OPENCV
  using F = typename TypeParam::Ftype;
  test::TempDir dir("cortado_image_data_test");
  WriteImages(dir, 5);
  this->SetUp(ImageText(dir, 3, "new_height: 4 new_width: 5", "phase: TEST transform_param { scale: 0.5 }"));
  EXPECT_EQ(this->top_[0]->shape(), (std::vector<int>{3, 3, 4, 5}));
  const std::vector<std::vector<int>> batches = {{0, 1, 2}, {3, 4, 0}, {1, 2, 3}};
  for (const auto& images : batches) {
    this->Forward();
    const std::vector<double> got = this->Data();
    const std::vector<float> labels = this->Labels();
    for (int n = 0; n < 3; ++n) {
      const int i = images[n];
      EXPECT_EQ(labels[n], static_cast<float>(Label(i))) << "image " << i;
      const std::vector<double> want = Expected(dir, i, true);
      for (size_t k = 0; k < want.size(); ++k)
        ASSERT_EQ(got[n * 60 + k], test::RoundTo<F>(want[k] * 0.5)) << "image " << i << ", value " << k;
    }
  }
  // Image 0 is 4 x 5 already: its pixels are the ones written.
  const cv::Mat p = Picture(0, 4, 5);
  EXPECT_EQ(Expected(dir, 0, true)[(2 * 4 + 3) * 5 + 1], p.at<cv::Vec3b>(3, 1)[2]);
#endif
}

TYPED_TEST(ImageDataLayerTest, GrayWhenIsColorIsFalse) {
  REQUIRE_OPENCV();
#ifdef CORTADO_USE_OPENCV
  using F = typename TypeParam::Ftype;
  test::TempDir dir("cortado_image_data_test");
  WriteImages(dir, 2);
  this->SetUp(ImageText(dir, 2, "new_height: 4 new_width: 5 is_color: false"));
  EXPECT_EQ(this->top_[0]->shape(), (std::vector<int>{2, 1, 4, 5}));
  this->Forward();
  const std::vector<double> got = this->Data();
  for (int n = 0; n < 2; ++n) {
    const std::vector<double> want = Expected(dir, n, false);
    for (size_t k = 0; k < want.size(); ++k) ASSERT_EQ(got[n * 20 + k], test::RoundTo<F>(want[k])) << n << " " << k;
  }
#endif
}

// shuffle: every epoch (a batch of the whole list here) is a permutation of
// the list, a new one each epoch, the same for the same seed, and Seek and
// shards see the order one uninterrupted reader sees.
TYPED_TEST(ImageDataLayerTest, ShuffleIsANewPermutationEachEpochAndFollowsTheSeed) {
  REQUIRE_OPENCV();
#ifdef CORTADO_USE_OPENCV
  test::TempDir dir("cortado_image_data_test");
  const int n = 8;
  WriteImages(dir, n);
  const std::string text = ImageText(dir, n, "new_height: 4 new_width: 5 shuffle: true");
  const auto run = this->LabelBatches(7, text, -1, 4);
  std::vector<float> sorted_labels;
  for (int i = 0; i < n; ++i) sorted_labels.push_back(static_cast<float>(Label(i)));
  int in_list_order = 0;
  for (const std::vector<float>& epoch : run) {
    std::vector<float> s = epoch;
    std::sort(s.begin(), s.end());
    EXPECT_EQ(s, sorted_labels) << "an epoch is not a permutation of the list";
    in_list_order += epoch == sorted_labels;
  }
  EXPECT_LT(in_list_order, 2) << "shuffle: true left the list's order";
  EXPECT_NE(run[0], run[1]);
  EXPECT_NE(run[1], run[2]);
  EXPECT_EQ(this->LabelBatches(7, text, -1, 4), run) << "the same seed gave another order";
  EXPECT_NE(this->LabelBatches(8, text, -1, 1)[0], run[0]) << "another seed gave the same order";
  EXPECT_EQ(this->LabelBatches(7, text, 2, 2), (std::vector<std::vector<float>>{run[2], run[3]}));

  // Two shards of batch 4: together, batch b is batch b of the single reader
  // (shard s holds its positions s, s + 2, ...).
  for (int shard = 0; shard < 2; ++shard) {
    const auto part = this->LabelBatches(
        7, ImageText(dir, n / 2, str_cat("new_height: 4 new_width: 5 shuffle: true num_shards: 2 shard_id: ", shard)),
        -1, 4);
    for (int b = 0; b < 4; ++b)
      for (int k = 0; k < n / 2; ++k) EXPECT_EQ(part[b][k], run[b][2 * k + shard]) << "shard " << shard << " batch " << b;
  }
#endif
}

TYPED_TEST(ImageDataLayerTest, GpuMatchesCpu) {
  REQUIRE_OPENCV();
#ifdef CORTADO_USE_OPENCV
  test::TempDir dir("cortado_image_data_test");
  WriteImages(dir, 5);
  const std::string text = ImageText(dir, 2, "new_height: 4 new_width: 5 shuffle: true prefetch: 2",
                                     "phase: TRAIN transform_param { crop_size: 3 mirror: true }");
  test::CheckGpuAgainstCpu<TypeParam>(text, {}, [](int, Blob*) {}, test::GpuTolerance{0, 0}, {}, 2, 5);
#endif
}

FieldError SetUpError(const std::string& text) { return test::SourceSetUpError<ImageDataLayer>(text, 2); }

TEST(ImageDataLayerErrorTest, BadListsAndParametersNameTheFieldFileAndLine) {
  test::TempDir dir("cortado_image_data_test");
  FieldError e = SetUpError(ImageText(dir, 2, ""));  // no list.txt
  EXPECT_EQ(e.field(), "image_data_param.source");
  EXPECT_NE(std::string(e.what()).find(dir / "list.txt"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("cannot open the list file"), std::string::npos) << e.what();
  std::ofstream(dir / "list.txt") << "img/0.png 3\nimg/1.png three\n";
  e = SetUpError(ImageText(dir, 2, ""));
  EXPECT_NE(std::string(e.what()).find(dir / "list.txt" + ":2: label 'three' is not an integer"), std::string::npos)
      << e.what();
  std::ofstream(dir / "list.txt") << "img/0.png 3\n";
  e = SetUpError(ImageText(dir, 2, "new_height: 4"));
  EXPECT_EQ(e.field(), "image_data_param.new_width");
  e = SetUpError(ImageText(dir, 0, ""));
  EXPECT_EQ(e.field(), "image_data_param.batch_size");
  e = SetUpError(ImageText(dir, 2, "shard_id: 3 num_shards: 2"));
  EXPECT_EQ(e.field(), "image_data_param.shard_id");
  e = SetUpError(ImageText(dir, 2, "", "transform_param { force_gray: true }"));
  EXPECT_EQ(e.field(), "transform_param.force_color");
  e = SetUpError(ImageText(dir, 2, "crop_size: 2", "transform_param { crop_size: 2 }"));
  EXPECT_EQ(e.field(), "image_data_param.crop_size");
  // The first image is missing: SetUp reads it for the shape.
  e = SetUpError(ImageText(dir, 2, ""));
  EXPECT_EQ(e.field(), "image_data_param.source");
  EXPECT_NE(std::string(e.what()).find(dir / "list.txt" + ":1: image '" + dir.root() + "img/0.png': cannot open"),
            std::string::npos)
      << e.what();
}

TEST(ImageDataLayerErrorTest, AMissingOrUndecodableImageLaterNamesTheLineAndPath) {
  REQUIRE_OPENCV();
#ifdef CORTADO_USE_OPENCV
  test::TempDir dir("cortado_image_data_test");
  WriteImages(dir, 2);
  std::ofstream(dir / "img/bad.png") << "not a png";
  for (const std::string& line : {"img/missing.png 1", "img/bad.png 1"}) {
    {
      std::ofstream list(dir / "list.txt");
      list << "img/0.png 0\nimg/1.png 1\n" << line << "\n";
    }
    ImageDataLayer<float, float> layer(
        test::MakeParam<test::TypePair<float, float>>(ImageText(dir, 3, "new_height: 4 new_width: 5")));
    test::Blobs top;
    top.add(FLOAT);
    top.add(FLOAT);
    layer.SetUp({}, top.vec);
    try {
      layer.Forward({}, top.vec);
      ADD_FAILURE() << "Forward read a batch with " << line;
    } catch (const FieldError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.field(), "image_data_param.source") << msg;
      const std::string file = line.substr(0, line.find(' '));
      EXPECT_NE(msg.find(dir / "list.txt" + ":3: image '" + dir.root() + file + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(file == "img/bad.png" ? "cannot decode" : "cannot open"), std::string::npos) << msg;
    }
  }
#endif
}

}  // namespace
}  // namespace cortado
