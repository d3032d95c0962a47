// The transform kernel of NvjpegBatchDecoder: decoded 8-bit planes in,
// the net's (N, C, H, W) input out.
//
// Mapping: blockIdx.y is the image, and the threads of the x dimension walk
// its H x W output pixels in a grid-stride loop, consecutive threads on
// consecutive columns (coalesced stores; the loads of one row are close).
// A thread writes the C channels of its pixel (next to each other with
// o.nhwc: the channels-last batch of net_layout.hpp).
//
// Values are those of the CPU transform (transform_pixels.hpp) computed the
// same way: the bilinear taps of the random-resized crop in double, as
// ResampleAxis computes them (x = (w0 + (j + 0.5) * w / out) - 0.5, the
// DCT scale being 8 here: nvJPEG decodes the whole image), the blend, the
// mean and the scale in float, in the CPU's order, with the _rn intrinsics
// so that the compiler contracts nothing into an FMA (the CPU build does
// not); one rounding into T. From the same pixels the output is then the
// CPU's; the differences left are the decoders' (nvjpeg_batch.hpp).
#include "cortado/util/cuda.hpp"
#include "../util/device_types.cuh"
#include "nvjpeg_transform.hpp"

namespace cortado {

namespace {

using kernels::dev;
using kernels::dev_t;
using kernels::store;

// One output position's two source taps and weight on one axis (ResampleAxis).
struct Tap {
  int i0, i1;
  float w;
};

__device__ __forceinline__ Tap resample_tap(int i, int out_n, int window0, int window_n, int size, bool reverse) {
  const int j = reverse ? out_n - 1 - i : i;
  const double step = __ddiv_rn(static_cast<double>(window_n), static_cast<double>(out_n));
  const double x = __dadd_rn(__dadd_rn(static_cast<double>(window0), __dmul_rn(j + 0.5, step)), -0.5);
  const double f = floor(x);
  const int k = static_cast<int>(f);
  return {min(max(k, 0), size - 1), min(max(k + 1, 0), size - 1), __double2float_rn(__dsub_rn(x, f))};
}

__device__ __forceinline__ float lerp_rn(float a, float b, float w) {
  return __fadd_rn(a, __fmul_rn(__fsub_rn(b, a), w));
}

template <typename D>
__global__ void nvjpeg_transform_kernel(const NvjpegJob* jobs, NvjpegOutput o, D* out) {
  const NvjpegJob job = jobs[blockIdx.y];
  if (job.skip) return;
  const int64_t plane = int64_t{o.height} * o.width;
  const int64_t src_plane = int64_t{job.height} * job.width;
  D* dst = out + int64_t{blockIdx.y} * o.channels * plane;
  // Value (c, pixel i) of the image: at c * plane + i, or at i * C + c channels last.
  const int64_t channel_step = o.nhwc ? 1 : plane, pixel_step = o.nhwc ? o.channels : 1;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < plane; i += int64_t{blockDim.x} * gridDim.x) {
    const int y = static_cast<int>(i / o.width), x = static_cast<int>(i % o.width);
    if (job.window_h == 0) {  // step 4: out = (x[h0 + y][w0 + x'] - mean) * scale
      const int sx = job.crop_w0 + (job.mirror ? o.width - 1 - x : x);
      const uint8_t* p = job.src + int64_t{job.crop_h0 + y} * job.width + sx;
      for (int c = 0; c < o.channels; ++c) {
        store(dst, c * channel_step + i * pixel_step,
              __fmul_rn(__fsub_rn(static_cast<float>(p[c * src_plane]), o.mean[c]), o.scale));
      }
    } else {  // the random-resized crop: bilinear over the window, mirrored by reversing the columns' taps
      const Tap ty = resample_tap(y, o.height, job.window_h0, job.window_h, job.height, false);
      const Tap tx = resample_tap(x, o.width, job.window_w0, job.window_w, job.width, job.mirror != 0);
      for (int c = 0; c < o.channels; ++c) {
        const uint8_t* r0 = job.src + c * src_plane + int64_t{ty.i0} * job.width;
        const uint8_t* r1 = job.src + c * src_plane + int64_t{ty.i1} * job.width;
        const float top = lerp_rn(r0[tx.i0], r0[tx.i1], tx.w);
        const float bottom = lerp_rn(r1[tx.i0], r1[tx.i1], tx.w);
        store(dst, c * channel_step + i * pixel_step,
              __fmul_rn(__fsub_rn(lerp_rn(top, bottom, ty.w), o.mean[c]), o.scale));
      }
    }
  }
}

}  // namespace

namespace gpu {

template <typename T>
void nvjpeg_transform(int n, const NvjpegJob* jobs, const NvjpegOutput& o, T* out, CUstream_st* stream) {
  if (n == 0) return;
  CORTADO_CHECK(n <= 65535 && o.channels >= 1 && o.channels <= 3);
  const int64_t plane = int64_t{o.height} * o.width;
  const int64_t per_image = (plane + cuda::kThreads - 1) / cuda::kThreads;
  const dim3 grid(static_cast<unsigned>(per_image < 1 ? 1 : per_image > 4096 ? 4096 : per_image),
                  static_cast<unsigned>(n));
  nvjpeg_transform_kernel<<<grid, cuda::kThreads, 0, stream>>>(jobs, o, dev(out));
  CORTADO_KERNEL_CHECK();
}

template void nvjpeg_transform<float>(int, const NvjpegJob*, const NvjpegOutput&, float*, CUstream_st*);
template void nvjpeg_transform<float16>(int, const NvjpegJob*, const NvjpegOutput&, float16*, CUstream_st*);
template void nvjpeg_transform<bfloat16>(int, const NvjpegJob*, const NvjpegOutput&, bfloat16*, CUstream_st*);

}  // namespace gpu
}  // namespace cortado
