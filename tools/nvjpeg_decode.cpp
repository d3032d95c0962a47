// Times the GPU JPEG decoding and transform (data/nvjpeg_batch.hpp) on JPEG
// files: batches of --batch records, decoded by nvJPEG and transformed as the
// ResNet recipe's training input (random-resized crop, mirror, mean_value,
// scale), written in --type on the device. Prints images/s.
//
//   nvjpeg_decode [--batch=256] [--iters=20] [--warmup=3] [--type=FLOAT16] [--crop=224] LIST
//
// LIST: a file of "NAME LABEL" lines, NAME relative to LIST's folder (the
// image list convert_imageset reads). The files are read into memory first.
// Record i of the stream is record i % count, with the generator
// record_rng_seed(1, i), as the Data layer draws. The time is from the first
// timed batch's call to the end of the last one's work on the stream:
// images/s = iters * batch / time. Without a CUDA device or nvJPEG it prints
// "nvjpeg_decode: skipped: <why>" and exits 0.

#include <cuda_runtime.h>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cortado/bfloat16.hpp"
#include "cortado/common.hpp"
#include "cortado/data/data_transformer.hpp"
#include "cortado/data/nvjpeg_batch.hpp"
#include "cortado/util/cuda.hpp"
#include "cortado/util/tool_flags.hpp"

DEFINE_int32(batch, 256, "Records per batch");
DEFINE_int32(iters, 20, "Timed batches");
DEFINE_int32(warmup, 3, "Batches before the timed ones (buffers grow, nvJPEG warms up)");
DEFINE_string(type, "FLOAT16", "The output type: FLOAT, FLOAT16 or BFLOAT16");
DEFINE_int32(crop, 224, "The crop (crop_size)");
DEFINE_double(rand_crop_area_lower, 0.08, "The random-resized crop's smallest area (0: a random fixed crop)");

namespace {

using cortado::fail;

std::vector<std::string> read_files(const std::string& list) {
  std::ifstream in(list);
  if (!in) fail("cannot read the list '", list, "'");
  const size_t slash = list.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : list.substr(0, slash + 1);
  std::vector<std::string> files;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    if (!(fields >> name)) continue;
    std::ifstream f(dir + name, std::ios::binary);
    if (!f) fail("cannot read '", dir + name, "' (named in '", list, "')");
    files.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  if (files.empty()) fail("'", list, "' names no files");
  return files;
}

template <typename T>
void run(const std::vector<std::string>& files) {
  cortado::TransformationParameter p;
  p.set_crop_size(static_cast<uint32_t>(FLAGS_crop));
  p.set_rand_crop_area_lower(static_cast<float>(FLAGS_rand_crop_area_lower));
  p.set_mirror(true);
  for (float v : {104.f, 117.f, 123.f}) p.add_mean_value(v);
  p.set_scale(0.0174f);
  cortado::NvjpegBatchDecoder decoder(p, cortado::TRAIN, "data");
  const int64_t count = int64_t{FLAGS_batch} * 3 * FLAGS_crop * FLAGS_crop;
  T* out = nullptr;
  cudaStream_t stream = nullptr;
  CORTADO_CUDA_CHECK(cudaMalloc(&out, sizeof(T) * static_cast<size_t>(count)));
  CORTADO_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<std::mt19937> gens(static_cast<size_t>(FLAGS_batch));
  std::vector<std::mt19937*> rngs;
  for (auto& g : gens) rngs.push_back(&g);
  std::vector<std::string_view> views(static_cast<size_t>(FLAGS_batch));
  int64_t record = 0;
  auto batch = [&] {
    for (size_t i = 0; i < views.size(); ++i, ++record) {
      views[i] = files[static_cast<size_t>(record) % files.size()];
      gens[i].seed(static_cast<std::mt19937::result_type>(cortado::record_rng_seed(1, record)));
    }
    decoder.Decode<T>(views, rngs, out, count, stream);
  };
  for (int i = 0; i < FLAGS_warmup; ++i) batch();
  CORTADO_CUDA_CHECK(cudaStreamSynchronize(stream));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < FLAGS_iters; ++i) batch();
  CORTADO_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int device = 0;
  cudaDeviceProp prop{};
  CORTADO_CUDA_CHECK(cudaGetDevice(&device));
  CORTADO_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("nvjpeg_decode: device=\"%s\" library=%s backend=%s files=%zu batch=%d iters=%d type=%s crop=%d "
              "rand_crop_area_lower=%g images_per_s=%.1f ms_per_batch=%.2f cpu_fallbacks=%lld\n",
              prop.name, decoder.library().c_str(), decoder.hardware() ? "hardware" : "default", files.size(),
              FLAGS_batch, FLAGS_iters, FLAGS_type.c_str(), FLAGS_crop, FLAGS_rand_crop_area_lower,
              FLAGS_iters * FLAGS_batch / s, 1000 * s / FLAGS_iters, static_cast<long long>(decoder.cpu_fallbacks()));
  cudaFree(out);
  cudaStreamDestroy(stream);
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_logtostderr = 1;
  gflags::SetUsageMessage("Times GPU JPEG decoding and transform (nvJPEG).\nUsage: nvjpeg_decode [flags] LIST");
  cortado::InitTool(&argc, &argv);  // util/tool_flags.hpp: flags, and glog with Caffe's prefix
  if (argc != 2) {
    std::cerr << "nvjpeg_decode: error: expected one image list\n";
    return 1;
  }
  std::string why;
  if (!cortado::NvjpegBatchDecoder::Available(&why)) {
    std::printf("nvjpeg_decode: skipped: %s\n", why.c_str());
    return 0;
  }
  try {
    if (FLAGS_batch <= 0 || FLAGS_iters <= 0 || FLAGS_warmup < 0 || FLAGS_crop <= 0) {
      fail("--batch, --iters and --crop must be positive, --warmup not negative");
    }
    const std::vector<std::string> files = read_files(argv[1]);
    if (FLAGS_type == "FLOAT") {
      run<float>(files);
    } else if (FLAGS_type == "FLOAT16") {
      run<cortado::float16>(files);
    } else if (FLAGS_type == "BFLOAT16") {
      run<cortado::bfloat16>(files);
    } else {
      fail("--type=", FLAGS_type, ": expected FLOAT, FLOAT16 or BFLOAT16");
    }
  } catch (const cortado::Error& e) {
    std::cerr << "nvjpeg_decode: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
