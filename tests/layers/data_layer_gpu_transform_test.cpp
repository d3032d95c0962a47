// DataLayer with transform_param.use_gpu_transform (data_layer.hpp): on a
// CUDA device with nvJPEG, the batches of a real LMDB of JPEG records (and
// one raw record among them) decoded on the GPU are the CPU path's batches:
// the same labels, and images within the decoder's tolerance
// (nvjpeg_batch.hpp: for 4:4:4 files at most 4 levels of 255 before the
// scale, a mean under 1 level; plus one unit in the last place for float16),
// over batches that wrap around the database, after a Seek, with two workers
// and for a shard. The same layer on the device without use_gpu_transform
// (the copy to the device on a worker's stream) gives exactly the CPU
// batches. Where use_gpu_transform cannot apply (a CPU context, raw records)
// the layer says why once and gives exactly the CPU batches.
//
// The GPU cases skip without CUDA, a device, nvJPEG or libjpeg (which writes
// the test's JPEGs); their names hold "Gpu".
#include "cortado/layers/data_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "cortado/context.hpp"
#include "cortado/data/lmdb.hpp"
#include "cortado/util/rng.hpp"
#include "log_lines.hpp"
#include "temp_dir.hpp"
#include "test_util.hpp"
#ifdef CORTADO_USE_CUDA
#include "cortado/data/nvjpeg_batch.hpp"
#endif
#ifdef CORTADO_USE_LIBJPEG
#include "jpeg_util.hpp"
#endif

namespace cortado {
namespace {

using test::TempDir;

constexpr uint32_t kSeed = 4321;
constexpr int kRecords = 13;  // batches of 5 wrap around at different records
constexpr int kRawRecord = 6;  // not encoded: the worker's CPU transforms it on the GPU path too

int Label(int i) { return 3001 + 2 * i; }

std::string Key(int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08d", i);
  return buf;
}

#ifdef CORTADO_USE_LIBJPEG
// Photo-like JPEG records (4:4:4) of sizes that vary, and one raw record of
// the same kind of pixels (C, H, W).
void WriteJpegDb(const std::string& path) {
  LmdbWriter w(path);
  test::JpegOptions o;
  o.h_samp = o.v_samp = 1;
  for (int i = 0; i < kRecords; ++i) {
    const int h = 56 + 8 * (i % 3), wd = 72 - 8 * (i % 2);
    const std::vector<uint8_t> bgr = test::PhotoPixels(h, wd, 500u + static_cast<uint32_t>(i));
    Datum d;
    if (i == kRawRecord) {
      d.set_channels(3);
      d.set_height(h);
      d.set_width(wd);
      std::string planes(bgr.size(), '\0');
      for (int c = 0; c < 3; ++c)
        for (int k = 0; k < h * wd; ++k) {
          planes[static_cast<size_t>(c * h * wd + k)] = static_cast<char>(bgr[static_cast<size_t>(k * 3 + c)]);
        }
      d.set_data(planes);
    } else {
      d.set_encoded(true);
      d.set_data(test::EncodeJpeg(bgr, h, wd, o));
    }
    d.set_label(Label(i));
    w.Put(Key(i), d.SerializeAsString());
  }
  w.Close();
}
#endif

// Raw records of 3 channels (no JPEG needed).
void WriteRawDb(const std::string& path) {
  LmdbWriter w(path);
  for (int i = 0; i < kRecords; ++i) {
    Datum d;
    d.set_channels(3);
    d.set_height(10);
    d.set_width(12);
    std::string data;
    for (int k = 0; k < 3 * 10 * 12; ++k) data.push_back(static_cast<char>((i * 31 + k * 7) % 256));
    d.set_data(data);
    d.set_label(Label(i));
    w.Put(Key(i), d.SerializeAsString());
  }
  w.Close();
}

std::string DataText(const std::string& source, bool gpu_transform, const std::string& phase,
                     const std::string& transform, const std::string& data_extra = "") {
  return str_cat("name: 'data' type: 'Data' top: 'data' top: 'label' phase: ", phase,
                 " data_param { source: '", source, "' batch_size: 5 prefetch: 2 threads: 2 ", data_extra,
                 " } transform_param { ", transform, gpu_transform ? " use_gpu_transform: true" : "", " }");
}

const char kTrainTransform[] =
    "crop_size: 48 mirror: true mean_value: 104 mean_value: 117 mean_value: 123 scale: 0.0174";
constexpr double kScale = 0.0174;

struct Batch {
  std::vector<double> data;
  std::vector<float> labels;
};

// A Data layer of pair P on `ctx`, set up with the process seed at kSeed.
template <typename P>
class Reader {
 public:
  using F = typename P::Ftype;
  using B = typename P::Btype;
  Reader(const std::string& text, std::shared_ptr<const Context> ctx) : ctx_(std::move(ctx)) {
    ctx_->Activate();
    set_random_seed(kSeed);
    layer_ = std::make_unique<DataLayer<F, B>>(test::MakeParam<P>(text));
    layer_->set_context(ctx_);
    top_.add(type_of<F>());
    top_.add(type_of<F>());
    layer_->SetUp({}, top_.vec);
  }
  ~Reader() {
    ctx_->Activate();
    layer_.reset();  // its batches wait for their device work
    top_.owned.clear();  // on the stream they were allocated on
    top_.vec.clear();
    Context::Cpu()->Activate();
  }
  Batch Next() {
    ctx_->Activate();
    layer_->Forward({}, top_.vec);
    ctx_->Synchronize();
    const float* labels = top_[1]->template cpu_data<float>();
    return {test::GetData(*top_[0]), std::vector<float>(labels, labels + top_[1]->count())};
  }
  std::vector<Batch> Next(int batches) {
    std::vector<Batch> out;
    for (int b = 0; b < batches; ++b) out.push_back(Next());
    return out;
  }
  void Seek(int64_t batches) {
    ctx_->Activate();
    layer_->Seek(batches);
  }

 private:
  std::shared_ptr<const Context> ctx_;
  test::Blobs top_;
  std::unique_ptr<DataLayer<F, B>> layer_;
};

// One unit in the last place of v in T (0 for float: its rounding is far below a level).
template <typename T>
double ulp(double v) {
  if (std::is_same_v<T, float>) return 0;
  const int bits = std::is_same_v<T, float16> ? 10 : 7;
  return std::ldexp(1.0, std::ilogb(std::max(std::fabs(v), 1e-3)) - bits);
}

// Same labels; values within 4 levels of 255 (times the scale), a mean under 1.
template <typename T>
void ExpectWithinTolerance(const std::vector<Batch>& gpu, const std::vector<Batch>& cpu, double scale,
                           const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  double worst = 0, sum = 0;
  size_t count = 0;
  for (size_t b = 0; b < gpu.size(); ++b) {
    EXPECT_EQ(gpu[b].labels, cpu[b].labels) << what << ", batch " << b;
    ASSERT_EQ(gpu[b].data.size(), cpu[b].data.size()) << what << ", batch " << b;
    int reported = 0;
    for (size_t k = 0; k < gpu[b].data.size(); ++k) {
      const double a = gpu[b].data[k], c = cpu[b].data[k];
      const double levels = std::max(0.0, std::fabs(a - c) - ulp<T>(c)) / scale;
      if (levels > 4 && reported++ < 5) {
        ADD_FAILURE() << what << ", batch " << b << ", value " << k << ": GPU " << a << ", CPU " << c << ", "
                      << levels << " levels apart (at most 4; a wrong crop or flip is tens)";
      }
      worst = std::max(worst, levels);
      sum += levels;
      ++count;
    }
  }
  const double mean = count ? sum / static_cast<double>(count) : 0;
  EXPECT_LE(mean, 1.0) << what << ": the mean difference in levels of 255 (the largest: " << worst << ")";
  std::printf("[ gpu data ] %s: max %.2f, mean %.3f levels of 255 from the CPU path\n", what.c_str(), worst, mean);
}

// Why a GPU case cannot run here ("" when it can).
std::string GpuCaseMissing(bool needs_nvjpeg) {
#ifndef CORTADO_USE_CUDA
  return "no CUDA backend in this build";
#else
  if (!cuda::available()) return "no CUDA device available";
  std::string why;
  if (needs_nvjpeg && !NvjpegBatchDecoder::Available(&why)) return "nvJPEG is not available: " + why;
#ifndef CORTADO_USE_LIBJPEG
  if (needs_nvjpeg) return "no libjpeg to write the test's JPEG records";
#endif
  return "";
#endif
}

template <typename P>
class DataLayerGpuTransformTest : public ::testing::Test {};

using GpuTransformPairs = ::testing::Types<test::TypePair<float, float>, test::TypePair<float16, float>>;
struct GpuPairNames {  // "GPU_f32_f32", ...
  template <typename P>
  static std::string GetName(int) {
    return std::string("GPU_") + type_short(type_of<typename P::Ftype>()) + "_" +
           type_short(type_of<typename P::Btype>());
  }
};
TYPED_TEST_SUITE(DataLayerGpuTransformTest, GpuTransformPairs, GpuPairNames);

// Six batches (the database wraps around twice), Seek(3) on a new layer and
// Seek(1) in the middle of a run with batches prefetched: the GPU path gives
// the CPU path's batches; the device without use_gpu_transform gives them
// exactly.
TYPED_TEST(DataLayerGpuTransformTest, GpuMatchesCpuOverBatchesAndSeek) {
#ifndef CORTADO_USE_LIBJPEG
  GTEST_SKIP() << GpuCaseMissing(true);
#else
  using F = typename TypeParam::Ftype;
  const std::string missing = GpuCaseMissing(true);
  if (!missing.empty()) GTEST_SKIP() << missing;
  TempDir dir;
  WriteJpegDb(dir / "db");
  const std::string cpu_text = DataText(dir / "db", false, "TRAIN", kTrainTransform);
  const std::string gpu_text = DataText(dir / "db", true, "TRAIN", kTrainTransform);
  const std::shared_ptr<const Context> gpu = Context::Create(0);
  const std::vector<Batch> cpu = Reader<TypeParam>(cpu_text, Context::Cpu()).Next(6);

  const std::vector<Batch> device_copy = Reader<TypeParam>(cpu_text, gpu).Next(6);
  for (size_t b = 0; b < cpu.size(); ++b) {
    EXPECT_EQ(device_copy[b].labels, cpu[b].labels) << "batch " << b;
    EXPECT_EQ(device_copy[b].data, cpu[b].data) << "batch " << b << ": the CPU transform copied to the device";
  }

  {
    test::LogLines log;
    Reader<TypeParam> reader(gpu_text, gpu);
    EXPECT_FALSE(log.with("transformed on the GPU").empty()) << "the layer does not say it uses the GPU transform";
    ExpectWithinTolerance<F>(reader.Next(6), cpu, kScale, "six batches");
  }
  {
    Reader<TypeParam> reader(gpu_text, gpu);
    reader.Seek(3);
    ExpectWithinTolerance<F>(reader.Next(2), {cpu[3], cpu[4]}, kScale, "Seek(3)");
  }
  {
    Reader<TypeParam> reader(gpu_text, gpu);
    reader.Next(2);
    reader.Seek(1);
    ExpectWithinTolerance<F>(reader.Next(2), {cpu[1], cpu[2]}, kScale, "Seek(1) after two batches");
  }
#endif
}

// Shard 1 of 2 at TEST (the centre crop, no mirror) with rand_skip.
TYPED_TEST(DataLayerGpuTransformTest, GpuShardAtTestMatchesCpuShard) {
#ifndef CORTADO_USE_LIBJPEG
  GTEST_SKIP() << GpuCaseMissing(true);
#else
  using F = typename TypeParam::Ftype;
  const std::string missing = GpuCaseMissing(true);
  if (!missing.empty()) GTEST_SKIP() << missing;
  TempDir dir;
  WriteJpegDb(dir / "db");
  const std::string transform = "crop_size: 40 mean_value: 120 scale: 0.5";
  const std::string shard = "shard_id: 1 num_shards: 2 rand_skip: 4";
  const std::shared_ptr<const Context> gpu = Context::Create(0);
  const std::vector<Batch> cpu =
      Reader<TypeParam>(DataText(dir / "db", false, "TEST", transform, shard), Context::Cpu()).Next(4);
  Reader<TypeParam> reader(DataText(dir / "db", true, "TEST", transform, shard), gpu);
  ExpectWithinTolerance<F>(reader.Next(4), cpu, 0.5, "shard 1 of 2");
#endif
}

// A field the GPU transform lacks is the layer's FieldError at SetUp.
TEST(DataLayerGpuTransformErrorTest, GpuRejectsDistortParam) {
#ifndef CORTADO_USE_LIBJPEG
  GTEST_SKIP() << GpuCaseMissing(true);
#else
  const std::string missing = GpuCaseMissing(true);
  if (!missing.empty()) GTEST_SKIP() << missing;
  TempDir dir;
  WriteJpegDb(dir / "db");
  const std::shared_ptr<const Context> gpu = Context::Create(0);
  const std::string text =
      DataText(dir / "db", true, "TRAIN", "crop_size: 32 distort_param { brightness_prob: 0.5 brightness_delta: 20 }");
  try {
    Reader<test::TypePair<float, float>> reader(text, gpu);
    FAIL() << "SetUp accepted distort_param with use_gpu_transform";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.layer(), "data");
    EXPECT_EQ(e.field(), "transform_param.distort_param") << e.what();
  }
  Context::Cpu()->Activate();
#endif
}

// Raw records on a device: the layer says why and transforms on the CPU
// threads, exactly as without use_gpu_transform.
TEST(DataLayerGpuTransformFallbackTest, GpuContextWithRawRecordsFallsBack) {
  const std::string missing = GpuCaseMissing(false);
  if (!missing.empty()) GTEST_SKIP() << missing;
  using P = test::TypePair<float, float>;
  TempDir dir;
  WriteRawDb(dir / "db");
  const std::string transform = "crop_size: 8 mirror: true";
  const std::shared_ptr<const Context> gpu = Context::Create(0);
  const std::vector<Batch> plain = Reader<P>(DataText(dir / "db", false, "TRAIN", transform), gpu).Next(4);
  test::LogLines log;
  const std::vector<Batch> asked = Reader<P>(DataText(dir / "db", true, "TRAIN", transform), gpu).Next(4);
  const auto lines = log.with("use_gpu_transform");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].second.find("not encoded"), std::string::npos) << lines[0].second;
  for (size_t b = 0; b < plain.size(); ++b) {
    EXPECT_EQ(asked[b].data, plain[b].data) << "batch " << b;
    EXPECT_EQ(asked[b].labels, plain[b].labels) << "batch " << b;
  }
}

// A prototxt written for the GPU still trains on a CPU context: one line says
// why use_gpu_transform does not apply, and the batches are exactly those of
// the layer without it (Seek included).
TEST(DataLayerGpuTransformFallbackTest, CpuContextGivesTheCpuBatches) {
  using P = test::TypePair<float, float>;
  TempDir dir;
#ifdef CORTADO_USE_LIBJPEG
  WriteJpegDb(dir / "db");
#else
  WriteRawDb(dir / "db");
#endif
  const std::string transform = "crop_size: 8 mirror: true mean_value: 100 scale: 0.5";
  const std::vector<Batch> plain = Reader<P>(DataText(dir / "db", false, "TRAIN", transform), Context::Cpu()).Next(5);
  test::LogLines log;
  Reader<P> reader(DataText(dir / "db", true, "TRAIN", transform), Context::Cpu());
  const auto lines = log.with("use_gpu_transform");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].second.find("the net runs on the CPU"), std::string::npos) << lines[0].second;
  const std::vector<Batch> asked = reader.Next(3);
  reader.Seek(3);
  const std::vector<Batch> after_seek = reader.Next(2);
  for (size_t b = 0; b < 5; ++b) {
    const Batch& got = b < 3 ? asked[b] : after_seek[b - 3];
    EXPECT_EQ(got.data, plain[b].data) << "batch " << b;
    EXPECT_EQ(got.labels, plain[b].labels) << "batch " << b;
  }
}

}  // namespace
}  // namespace cortado
