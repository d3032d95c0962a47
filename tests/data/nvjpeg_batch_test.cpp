// NvjpegBatchDecoder (data/nvjpeg_batch.hpp). Loading nvJPEG and the
// parameter checks run wherever CUDA is built (no device needed); the GPU
// transform is compared with the CPU transform of the same records, drawn
// from the same generators, and skips without a device or without nvJPEG.
//
// Tolerances, in levels of 255 before the scale (nvjpeg_batch.hpp says why):
// - 4:4:4 files: at most 4 levels, a mean of at most 1 level (the two
//   decoders' inverse DCT and colour conversion);
// - 4:2:0 files: a mean of at most 2 levels (chroma upsampling may differ
//   where chroma changes fast; no maximum is claimed);
// plus, for float16 and bfloat16 output, the rounding of each side (one
// unit in the last place of the value).
#include <gtest/gtest.h>

#include "cortado/config.hpp"

#ifdef CORTADO_USE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cortado/bfloat16.hpp"
#include "cortado/data/data_transformer.hpp"
#include "cortado/data/nvjpeg_batch.hpp"
#include "cortado/layer.hpp"
#ifdef CORTADO_USE_LIBJPEG
#include "jpeg_util.hpp"
#endif

namespace cortado {
namespace {

const std::vector<std::string> kMissing{"libcortado-no-such-nvjpeg.so.99", "/nonexistent/folder/libnvjpeg.so"};

TEST(NvjpegLibraryTest, DefaultNamesTryCuda13ThenCuda12) {
  EXPECT_EQ(NvjpegLibrary::DefaultNames(),
            (std::vector<std::string>{"libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"}));
}

TEST(NvjpegLibraryTest, MissingLibraryNamesEveryNameTried) {
  try {
    NvjpegLibrary library(kMissing);
    FAIL() << "loaded " << library.name();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cannot load nvJPEG"), std::string::npos) << m;
    for (const std::string& name : kMissing) EXPECT_NE(m.find(name), std::string::npos) << m;
    EXPECT_NE(m.find("LD_LIBRARY_PATH"), std::string::npos) << m;
  }
}

// A library that loads but is not nvJPEG (the C library) is refused, naming
// the first entry point it lacks: the entry points are looked up one by one
// (a lookup that never happened would leave them null and crash at the first
// call, as an unqualified bind(...) did when it meant std::bind).
TEST(NvjpegLibraryTest, LibraryWithoutTheEntryPointsIsRefused) {
  try {
    NvjpegLibrary library({"libc.so.6"});
    FAIL() << "accepted " << library.name() << " as nvJPEG";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("libc.so.6 has no nvjpegCreateEx"), std::string::npos) << m;
  }
}

// Where nvJPEG is installed (loading it needs no device), every entry point
// resolves; skipped where it is not.
TEST(NvjpegLibraryTest, DefaultNamesResolveEveryEntryPoint) {
  std::unique_ptr<NvjpegLibrary> library;
  try {
    library = std::make_unique<NvjpegLibrary>();
  } catch (const Error& e) {
    const std::string m = e.what();
    if (m.find("cannot load nvJPEG") != std::string::npos) GTEST_SKIP() << m;
    FAIL() << m;  // it loaded, but an entry point is missing
  }
  const std::vector<std::string> names = NvjpegLibrary::DefaultNames();
  EXPECT_NE(std::find(names.begin(), names.end(), library->name()), names.end()) << library->name();
}

TEST(NvjpegBatchDecoderTest, MissingLibraryFailsBeforeAnyDeviceWork) {
  TransformationParameter p;
  p.set_crop_size(16);
  try {
    NvjpegBatchDecoder decoder(p, TRAIN, "data", kMissing);
    FAIL() << "created a decoder without nvJPEG";
  } catch (const FieldError& e) {
    FAIL() << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(kMissing[0]), std::string::npos) << e.what();
  }
}

// Fields the GPU path lacks are FieldErrors, found before nvJPEG is loaded
// (the library names here do not exist).
TEST(NvjpegBatchDecoderTest, RejectsFieldsTheGpuPathLacks) {
  auto field_of = [](const TransformationParameter& p) -> std::string {
    try {
      NvjpegBatchDecoder decoder(p, TRAIN, "data", kMissing);
    } catch (const FieldError& e) {
      EXPECT_EQ(e.layer(), "data");
      return e.field();
    } catch (const Error& e) {
      return std::string("Error: ") + e.what();
    }
    return "";
  };
  TransformationParameter distort;
  distort.mutable_distort_param()->set_brightness_prob(0.5f);
  EXPECT_EQ(field_of(distort), "transform_param.distort_param");
  TransformationParameter resize;
  resize.set_crop_size(16);
  resize.set_img_rand_resize_lower(20);
  resize.set_img_rand_resize_upper(30);
  EXPECT_EQ(field_of(resize), "transform_param.img_rand_resize_lower");
  TransformationParameter means;
  means.add_mean_value(1);
  means.add_mean_value(2);
  EXPECT_EQ(field_of(means), "transform_param.mean_value");
  TransformationParameter gray_means;  // force_gray: one channel, so three means are too many
  gray_means.set_force_gray(true);
  for (float v : {1.f, 2.f, 3.f}) gray_means.add_mean_value(v);
  EXPECT_EQ(field_of(gray_means), "transform_param.mean_value");
}

#ifdef CORTADO_USE_LIBJPEG

Datum JpegDatum(const std::string& file) {
  Datum d;
  d.set_encoded(true);
  d.set_data(file);
  return d;
}

// The photos of one batch: photo-like content, sizes that vary.
std::vector<std::string> Photos(int count, const test::JpegOptions& o, int height = 96, int width = 128) {
  std::vector<std::string> files;
  for (int i = 0; i < count; ++i) {
    const int h = height + 8 * (i % 3), w = width - 8 * (i % 2);
    files.push_back(test::EncodeJpeg(test::PhotoPixels(h, w, 100u + static_cast<uint32_t>(i)), h, w, o));
  }
  return files;
}

TransformationParameter CropMirrorMeanScale(int crop) {
  TransformationParameter p;
  p.set_crop_size(static_cast<uint32_t>(crop));
  p.set_mirror(true);
  for (float v : {104.f, 117.f, 123.f}) p.add_mean_value(v);
  p.set_scale(0.0174f);
  return p;
}

struct Tolerance {
  double max_levels;   // < 0: no maximum
  double mean_levels;
};

// One unit in the last place of v in T (0 for float: its rounding is far below a level).
template <typename T>
double ulp(double v) {
  if (std::is_same_v<T, float>) return 0;
  const int bits = std::is_same_v<T, float16> ? 10 : 7;
  return std::ldexp(1.0, std::ilogb(std::max(std::fabs(v), 1e-3)) - bits);
}

// Runs both paths on `files` with one generator per record (the same seeds)
// and checks the tolerance; returns the decoder's CPU fallbacks.
template <typename T>
int64_t CompareWithCpu(const TransformationParameter& p, Phase phase, const std::vector<std::string>& files,
                       Tolerance tol) {
  NvjpegBatchDecoder gpu(p, phase, "data");
  const DataTransformer cpu(p, phase, "data", "Data");
  const std::vector<int> shape = cpu.InferShape(JpegDatum(files[0]));
  const int64_t per_image = int64_t{shape[0]} * shape[1] * shape[2];
  const int64_t count = per_image * static_cast<int64_t>(files.size());
  std::vector<std::mt19937> gens_gpu, gens_cpu;
  for (size_t i = 0; i < files.size(); ++i) {
    gens_gpu.emplace_back(static_cast<std::mt19937::result_type>(record_rng_seed(7, static_cast<int64_t>(i))));
  }
  gens_cpu = gens_gpu;
  std::vector<std::mt19937*> rngs;
  for (auto& g : gens_gpu) rngs.push_back(&g);
  std::vector<std::string_view> views(files.begin(), files.end());

  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  T* out = nullptr;
  EXPECT_EQ(cudaMalloc(&out, sizeof(T) * static_cast<size_t>(count)), cudaSuccess);
  const std::vector<int> written = gpu.Decode<T>(views, rngs, out, count, stream);
  EXPECT_EQ(written, (std::vector<int>{static_cast<int>(files.size()), shape[0], shape[1], shape[2]}));
  std::vector<T> got(static_cast<size_t>(count));
  EXPECT_EQ(cudaMemcpyAsync(got.data(), out, sizeof(T) * got.size(), cudaMemcpyDeviceToHost, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaFree(out);
  cudaStreamDestroy(stream);

  std::vector<T> want(static_cast<size_t>(count));
  const double scale = std::fabs(p.has_scale() ? p.scale() : 1.0);
  double worst = 0, sum = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    cpu.Transform<T>(JpegDatum(files[i]), want.data() + static_cast<int64_t>(i) * per_image, &gens_cpu[i]);
    for (int64_t k = 0; k < per_image; ++k) {
      const auto at = static_cast<size_t>(static_cast<int64_t>(i) * per_image + k);
      const double a = static_cast<float>(got[at]), b = static_cast<float>(want[at]);
      const double levels = std::max(0.0, std::fabs(a - b) - ulp<T>(b)) / scale;
      sum += levels;
      if (tol.max_levels >= 0 && levels > tol.max_levels && levels > worst) {
        ADD_FAILURE() << "record " << i << ", value " << k << " (c, y, x) = (" << k / (shape[1] * shape[2]) << ", "
                      << k / shape[2] % shape[1] << ", " << k % shape[2] << "): GPU " << a << ", CPU " << b << ", "
                      << levels << " levels apart (at most " << tol.max_levels << ")";
      }
      worst = std::max(worst, levels);
    }
  }
  const double mean = sum / static_cast<double>(count);
  EXPECT_LE(mean, tol.mean_levels) << "the mean difference in levels of 255 (the largest: " << worst << ")";
  std::printf("[ nvjpeg   ] %s backend, %zu records: max %.2f, mean %.3f levels of 255 from the CPU transform\n",
              gpu.hardware() ? "hardware" : "default", files.size(), worst, mean);
  return gpu.cpu_fallbacks();
}

test::JpegOptions Chroma444() {
  test::JpegOptions o;
  o.h_samp = o.v_samp = 1;
  return o;
}

TEST(NvjpegBatchDecoderTest, CropMirrorMeanScaleMatchesCpuFloat) {
  std::string why;
  if (!NvjpegBatchDecoder::Available(&why)) GTEST_SKIP() << why;
  EXPECT_EQ(CompareWithCpu<float>(CropMirrorMeanScale(48), TRAIN, Photos(6, Chroma444()), {4, 1}), 0);
}

TEST(NvjpegBatchDecoderTest, CropMirrorMeanScaleMatchesCpuFloat16) {
  std::string why;
  if (!NvjpegBatchDecoder::Available(&why)) GTEST_SKIP() << why;
  EXPECT_EQ(CompareWithCpu<float16>(CropMirrorMeanScale(48), TRAIN, Photos(6, Chroma444()), {4, 1}), 0);
}

TEST(NvjpegBatchDecoderTest, CentreCropAtTestMatchesCpu) {
  std::string why;
  if (!NvjpegBatchDecoder::Available(&why)) GTEST_SKIP() << why;
  TransformationParameter p = CropMirrorMeanScale(64);
  p.set_mirror(false);
  EXPECT_EQ(CompareWithCpu<float>(p, TEST, Photos(4, Chroma444()), {4, 1}), 0);
}

// The windows stay under twice the crop (the photos are at most 112 rows),
// so the CPU decodes at full scale too (jpeg_scale_for).
TEST(NvjpegBatchDecoderTest, RandomResizedCropMatchesCpu) {
  std::string why;
  if (!NvjpegBatchDecoder::Available(&why)) GTEST_SKIP() << why;
  TransformationParameter p = CropMirrorMeanScale(64);
  p.set_rand_crop_area_lower(0.25f);
  const std::vector<std::string> files = Photos(8, Chroma444());
  EXPECT_EQ(CompareWithCpu<float>(p, TRAIN, files, {4, 1}), 0);
  EXPECT_EQ(CompareWithCpu<float16>(p, TRAIN, files, {4, 1}), 0);
  EXPECT_EQ(CompareWithCpu<bfloat16>(p, TRAIN, files, {4, 1}), 0);
}

TEST(NvjpegBatchDecoderTest, WholeImagesWithoutCrop) {
  std::string why;
  if (!NvjpegBatchDecoder::Available(&why)) GTEST_SKIP() << why;
  TransformationParameter p;
  p.set_mirror(true);
  p.add_mean_value(128);
  std::vector<std::string> files;
  for (uint32_t seed : {1u, 2u, 3u}) {
    files.push_back(test::EncodeJpeg(test::PhotoPixels(40, 56, seed), 40, 56, Chroma444()));
  }
  EXPECT_EQ(CompareWithCpu<float>(p, TRAIN, files, {4, 1}), 0);
}

TEST(NvjpegBatchDecoderTest, Chroma420WithinMeanTolerance) {
  std::string why;
  if (!NvjpegBatchDecoder::Available(&why)) GTEST_SKIP() << why;
  TransformationParameter p = CropMirrorMeanScale(64);
  p.set_rand_crop_area_lower(0.25f);
  EXPECT_EQ(CompareWithCpu<float>(p, TRAIN, Photos(8, test::JpegOptions{}), {-1, 2}), 0);
}

// Progressive files take nvJPEG's default backend; a gray file in a colour
// batch and a rotated one (EXIF) take the CPU, and give the CPU's values.
TEST(NvjpegBatchDecoderTest, FilesTheEngineOrTheGpuDoNotTake) {
  std::string why;
  if (!NvjpegBatchDecoder::Available(&why)) GTEST_SKIP() << why;
  TransformationParameter p = CropMirrorMeanScale(48);
  p.set_force_color(true);
  std::vector<std::string> files = Photos(2, Chroma444());
  test::JpegOptions progressive = Chroma444();
  progressive.progressive = true;
  files.push_back(test::EncodeJpeg(test::PhotoPixels(96, 128, 9), 96, 128, progressive));
  test::JpegOptions gray;
  gray.gray = true;
  files.push_back(test::EncodeJpeg(test::PhotoPixels(96, 128, 10), 96, 128, gray));
  int64_t expected_fallbacks = 1;
#ifdef CORTADO_USE_OPENCV  // the CPU path rotates with OpenCV
  test::JpegOptions rotated = Chroma444();
  rotated.app1 = test::ExifOrientation(6);
  files.push_back(test::EncodeJpeg(test::PhotoPixels(96, 128, 11), 96, 128, rotated));
  expected_fallbacks = 2;
#endif
  EXPECT_EQ(CompareWithCpu<float>(p, TRAIN, files, {4, 1}), expected_fallbacks);
}

// One batch decoded on the device into host memory, each record's generator
// seeded as CompareWithCpu seeds it.
template <typename T>
std::vector<T> DecodeToHost(NvjpegBatchDecoder* gpu, const std::vector<std::string>& files, int64_t per_image) {
  std::vector<std::mt19937> gens;
  std::vector<std::mt19937*> rngs;
  for (size_t i = 0; i < files.size(); ++i) {
    gens.emplace_back(static_cast<std::mt19937::result_type>(record_rng_seed(7, static_cast<int64_t>(i))));
  }
  for (auto& g : gens) rngs.push_back(&g);
  const std::vector<std::string_view> views(files.begin(), files.end());
  const int64_t count = per_image * static_cast<int64_t>(files.size());
  T* out = nullptr;
  EXPECT_EQ(cudaMalloc(&out, sizeof(T) * static_cast<size_t>(count)), cudaSuccess);
  gpu->Decode<T>(views, rngs, out, count, nullptr);
  std::vector<T> got(static_cast<size_t>(count));
  EXPECT_EQ(cudaMemcpy(got.data(), out, sizeof(T) * got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(out);
  return got;
}

// A Data layer's channels-last batch (set_channels_last): the values of the
// planar batch at (h, w, c), for the records the GPU transforms (crop and
// random-resized crop) and for one the CPU transforms (a gray file).
TEST(NvjpegBatchDecoderTest, ChannelsLastMovesTheValues) {
  std::string why;
  if (!NvjpegBatchDecoder::Available(&why)) GTEST_SKIP() << why;
  for (const bool resized : {false, true}) {
    TransformationParameter p = CropMirrorMeanScale(40);
    p.set_force_color(true);
    if (resized) p.set_rand_crop_area_lower(0.25f);
    std::vector<std::string> files = Photos(3, Chroma444());
    test::JpegOptions gray;
    gray.gray = true;
    files.push_back(test::EncodeJpeg(test::PhotoPixels(96, 128, 10), 96, 128, gray));
    const int64_t pixels = 40 * 40, per_image = 3 * pixels;
    NvjpegBatchDecoder planar(p, TRAIN, "data"), last(p, TRAIN, "data");
    last.set_channels_last(true);
    const std::vector<float16> a = DecodeToHost<float16>(&planar, files, per_image);
    const std::vector<float16> b = DecodeToHost<float16>(&last, files, per_image);
    EXPECT_EQ(planar.cpu_fallbacks(), 1);
    EXPECT_EQ(last.cpu_fallbacks(), 1);
    int failures = 0;
    for (size_t n = 0; n < files.size(); ++n) {
      for (int64_t c = 0; c < 3; ++c) {
        for (int64_t i = 0; i < pixels; ++i) {
          const float want = a[static_cast<size_t>(static_cast<int64_t>(n) * per_image + c * pixels + i)];
          const float got = b[static_cast<size_t>(static_cast<int64_t>(n) * per_image + i * 3 + c)];
          if (got != want && ++failures <= 5) {
            ADD_FAILURE() << "resized " << resized << ", record " << n << " channel " << c << " pixel " << i << ": "
                          << got << " against " << want;
          }
        }
      }
    }
  }
}

TEST(NvjpegBatchDecoderTest, TooSmallOutputIsAnError) {
  std::string why;
  if (!NvjpegBatchDecoder::Available(&why)) GTEST_SKIP() << why;
  NvjpegBatchDecoder gpu(CropMirrorMeanScale(32), TRAIN, "data");
  const std::vector<std::string> files = Photos(2, Chroma444());
  const std::vector<std::string_view> views(files.begin(), files.end());
  float* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, sizeof(float) * 3 * 32 * 32), cudaSuccess);
  try {
    gpu.Decode<float>(views, {}, out, 3 * 32 * 32, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs 6144"), std::string::npos) << e.what();
  }
  cudaFree(out);
}

#endif  // CORTADO_USE_LIBJPEG

}  // namespace
}  // namespace cortado
#endif  // CORTADO_USE_CUDA
