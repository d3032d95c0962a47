#pragma once
// The transform kernel of NvjpegBatchDecoder (nvjpeg_batch.cu): one launch
// per batch turns the decoded 8-bit planes into the net's (N, C, H, W)
// input, with the per-image choices (crop or window, mirror) made on the host
// by DataTransformer::Plan. Shared by nvjpeg_batch.cpp (host compiler) and
// nvjpeg_batch.cu.

#include <cstdint>

struct CUstream_st;

namespace cortado {

/// One image of the batch, as the kernel reads it (copied to the device).
struct NvjpegJob {
  const uint8_t* src = nullptr;  // C planes of height x width bytes, pitch width (B, G, R or Y)
  int height = 0, width = 0;
  int crop_h0 = 0, crop_w0 = 0;  // the fixed crop (window_h == 0)
  int window_h0 = 0, window_w0 = 0, window_h = 0, window_w = 0;  // the random-resized crop's window
  int mirror = 0;
  int skip = 0;  // 1: written by the CPU transform already
};

/// What every image of the batch becomes.
struct NvjpegOutput {
  int channels = 3, height = 0, width = 0;
  float mean[3] = {0, 0, 0};  // per channel (mean_value)
  float scale = 1;
  int nhwc = 0;  // 1: images written (H, W, C), channels last (net_layout.hpp)
};

namespace gpu {

/// out (n, C, H, W) in T (float, float16, bfloat16; (n, H, W, C) with
/// o.nhwc) from the n jobs (a
/// device array), as DataTransformer's step 4 and resampling pass
/// (data_transformer.hpp) compute them, enqueued on `stream`.
template <typename T>
void nvjpeg_transform(int n, const NvjpegJob* jobs, const NvjpegOutput& o, T* out, CUstream_st* stream);

}  // namespace gpu
}  // namespace cortado
