#pragma once
// The data transform on the GPU (NVCaffe's use_gpu_transform): nvJPEG decodes
// a batch of JPEG records into device memory, then one kernel crops (or
// resamples the random-resized crop's window, bilinear), mirrors, subtracts
// the mean, scales and writes the batch in the net's type, (N, C, H, W), all
// on a stream the caller gives. CUDA builds only; nvJPEG is not a build
// dependency: it is opened at run time (NvjpegLibrary).
//
// How the Data layer uses it (data_layer.hpp, transform_param.
// use_gpu_transform, on a CUDA device where nvJPEG loads): each of the
// layer's workers owns a decoder and a non-blocking stream of the layer's
// device. A worker reads its batch's records without decoding them, takes
// their JPEG bytes and one generator per record (seeded from
// record_rng_seed, as the CPU path seeds them, so both paths choose the same
// crops and flips) and calls Decode on its stream into the device buffer of
// the batch, then records an event on that stream (a record that is not
// encoded is transformed on the worker's CPU and copied into its place).
// Forward makes the net's stream wait for that event (cudaStreamWaitEvent)
// and copies the buffer into the data top on the device, then records a
// second event, which the worker waits for before filling that batch again.
// Labels travel through the host. Nothing synchronizes the net's stream with
// the host. The layer destroys the decoders before their streams.
//
// What it computes. For each record, DataTransformer::Plan (the CPU path's
// code, data_transformer.hpp) draws the crop offsets, or the random-resized
// crop's window, and the mirror from the record's generator, given the size
// in the JPEG's header; the kernel then computes step 4, or the resampling
// pass, of data_transformer.hpp with the same formulas, in float, rounded
// once into T. The only difference from the CPU transform of the same record
// is the decoder's:
// - nvJPEG's inverse DCT and colour conversion differ from libjpeg's
//   (JDCT_ISLOW) by about one level of 255 on the Y, Cb, Cr samples, which
//   the YCbCr -> BGR conversion turns into at most about 1 + 1.772 levels
//   in B and 1 + 1.402 in R: the tests allow 4 levels (times |scale|), and a
//   mean error under 1 level, for 4:4:4 files.
// - Chroma upsampling of 4:2:0 and 4:2:2 files: the handle asks for
//   interpolated upsampling (libjpeg's "fancy" upsampling) where nvJPEG
//   offers it; the hardware engine's may still differ where chroma changes
//   fast. The tests allow a mean error of 2 levels there, and state no
//   maximum.
// - The random-resized crop: the CPU decodes large windows at a reduced DCT
//   scale (jpeg_scale_for); nvJPEG decodes the whole image at full scale and
//   the kernel resamples that (the CPU's scale-8 geometry). Where the CPU
//   picks a smaller scale the two differ as the CPU's scales differ from each
//   other (tests/data/data_transformer_test.cpp states those tolerances); the
//   output is not more or less accurate, only filtered differently.
// Bilinear blends are convex, so resampling adds no more than the float
// rounding of the blend (well under 0.01 levels).
//
// What it does not do (the constructor rejects them with FieldError, naming
// the field): mean_file, distort_param and NVCaffe's random resize; and the
// output is always 3 channels (B, G, R) unless force_gray (1: the luma). A
// record the GPU does not decode as the CPU would, is transformed by the CPU
// (DataTransformer::Transform, the same generator) and copied into its slot:
// a file that is not a JPEG or that nvJPEG cannot parse, a gray JPEG in a
// 3-channel batch, CMYK/YCCK, an EXIF orientation other than 1 (OpenCV
// rotates those on the CPU path). cpu_fallbacks() counts them; the first is
// logged. A corrupt JPEG then fails as on the CPU path.
//
// Backends: the handle prefers NVJPEG_BACKEND_HARDWARE (the JPEG engine of
// A100, H100 and later; baseline single-scan files, 4:4:4, 4:2:2, 4:2:0,
// 4:4:0 and gray) and creates a default-backend handle beside it for what
// the engine does not take (progressive files, 4:1:1); without an engine
// (or a library that lacks it) every file takes the default backend (CUDA
// decode, Huffman decoding on the host or GPU).
//
// Threads and streams: one decoder per thread. Decode enqueues on `stream`
// and returns once the host's part is done (header parsing, nvJPEG's host
// stage, the planning and any CPU fallback); it waits for nothing on the
// device but the upload of the previous batch's host-side tables. Use one
// stream per decoder (a call on another stream first waits for the last
// one). The JPEG bytes need to live only until Decode returns; `out` must
// not be read before `stream` reaches the end of the call's work.

#include "cortado/config.hpp"

#ifdef CORTADO_USE_CUDA
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "cortado/data/data_transformer.hpp"

struct CUstream_st;

namespace cortado {

namespace nvjpeg {
struct Api;
}

/// nvJPEG opened with dlopen, its entry points resolved.
class NvjpegLibrary {
 public:
  /// "libnvjpeg.so.13" (CUDA 13), "libnvjpeg.so.12" (CUDA 12), "libnvjpeg.so".
  static std::vector<std::string> DefaultNames();
  /// Opens the first of `names` that loads. Error when none does, naming
  /// every name tried with the loader's reason, or when the library lacks an
  /// entry point (naming it).
  explicit NvjpegLibrary(const std::vector<std::string>& names = DefaultNames());
  ~NvjpegLibrary();
  NvjpegLibrary(const NvjpegLibrary&) = delete;
  NvjpegLibrary& operator=(const NvjpegLibrary&) = delete;

  /// The name that loaded.
  const std::string& name() const { return name_; }
  const nvjpeg::Api& api() const { return *api_; }

 private:
  void* handle_ = nullptr;
  std::string name_;
  std::unique_ptr<nvjpeg::Api> api_;
};

class NvjpegBatchDecoder {
 public:
  /// Whether this process has a CUDA device and nvJPEG loads (DefaultNames);
  /// when not, `why` (if given) says which is missing.
  static bool Available(std::string* why = nullptr);

  /// Validates `param` (DataTransformer's checks, then the fields above that
  /// the GPU path lacks: FieldError naming layer_name), loads nvJPEG from
  /// `library_names` (Error, before any CUDA call) and creates its handles on
  /// the current device.
  NvjpegBatchDecoder(const TransformationParameter& param, Phase phase, const std::string& layer_name = "",
                     const std::vector<std::string>& library_names = NvjpegLibrary::DefaultNames());
  ~NvjpegBatchDecoder();
  NvjpegBatchDecoder(const NvjpegBatchDecoder&) = delete;
  NvjpegBatchDecoder& operator=(const NvjpegBatchDecoder&) = delete;

  /// Decodes and transforms jpegs[i] into image i of `out`, a device array
  /// of out_count values of T (float, float16, bfloat16), on `stream`;
  /// rngs[i] (or all of them: an empty vector) may be null (no randomness:
  /// the centre crop, no mirror), as for DataTransformer::Transform. Returns
  /// the shape written, (N, C, H, W): H, W are the crop's, or without a crop
  /// the first image's (then every image must have that size: Error). Error
  /// when out_count is too small, or when a record fails (as on the CPU
  /// path; nvJPEG's failure on a batch names the batch, not the record).
  template <typename T>
  std::vector<int> Decode(const std::vector<std::string_view>& jpegs, const std::vector<std::mt19937*>& rngs, T* out,
                          int64_t out_count, CUstream_st* stream);

  /// Writes every later batch channels last: image i at out + i * C*H*W as
  /// (H, W, C), for a Data layer's NHWC batch (net_layout.hpp). Off by default.
  void set_channels_last(bool on);

  /// Whether the hardware JPEG engine is in use.
  bool hardware() const;
  /// The nvJPEG library that loaded.
  const std::string& library() const;
  /// Records transformed by the CPU so far (above).
  int64_t cpu_fallbacks() const;
  const DataTransformer& transformer() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace cortado
#endif  // CORTADO_USE_CUDA
