#pragma once
// The part of nvJPEG's C API that NvjpegBatchDecoder calls, declared here
// from the published API (nvjpeg.h of CUDA 12 and 13) so that the build
// needs no nvJPEG: the library is opened at run time (NvjpegLibrary,
// data/nvjpeg_batch.hpp). Only what is used is declared; the ABI is the
// header's:
// - nvjpegStatus_t, nvjpegBackend_t, nvjpegOutputFormat_t and
//   nvjpegExifOrientation_t are C enums of int size: they travel as int.
// - nvjpegHandle_t, nvjpegJpegState_t and nvjpegJpegStream_t are pointers to
//   opaque structs: pointers to our own opaque structs here.
// - nvjpegImage_t is four channel pointers, then four size_t pitches.
// - The allocator arguments of nvjpegCreateEx are passed as null (nvJPEG's
//   own cudaMalloc / cudaHostAlloc), so their struct types are not needed.

#include <cstddef>

struct CUstream_st;

namespace cortado {
namespace nvjpeg {

// nvjpegStatus_t
enum : int {
  kSuccess = 0,
  kNotInitialized = 1,
  kInvalidParameter = 2,
  kBadJpeg = 3,
  kJpegNotSupported = 4,
  kAllocatorFailure = 5,
  kExecutionFailed = 6,
  kArchMismatch = 7,
  kInternalError = 8,
  kImplementationNotSupported = 9,
  kIncompleteBitstream = 10,
};
// nvjpegBackend_t
enum : int { kBackendDefault = 0, kBackendHardware = 3 };
// nvjpegOutputFormat_t: planar Y only (luma), planar B, G, R.
enum : int { kOutputY = 2, kOutputBGR = 4 };
// nvjpegExifOrientation_t: 0 unknown (no EXIF), 1 normal, 2..8 flips and rotations.
enum : int { kOrientationUnknown = 0, kOrientationNormal = 1 };
// NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION: chroma upsampled by
// interpolation (libjpeg's "fancy" upsampling) rather than replication.
constexpr unsigned kFlagUpsamplingWithInterpolation = 1u << 5;
constexpr int kMaxComponents = 4;

struct HandleImpl;
struct StateImpl;
struct StreamImpl;
using Handle = HandleImpl*;
using State = StateImpl*;
using Stream = StreamImpl*;

// nvjpegImage_t
struct Image {
  unsigned char* channel[kMaxComponents];
  size_t pitch[kMaxComponents];
};

/// The entry points, resolved by NvjpegLibrary. Every one returns an
/// nvjpegStatus_t. GetExifOrientation may be null (an nvJPEG without it).
struct Api {
  int (*CreateEx)(int backend, void* dev_allocator, void* pinned_allocator, unsigned flags, Handle* handle);
  int (*Destroy)(Handle handle);
  int (*JpegStateCreate)(Handle handle, State* state);
  int (*JpegStateDestroy)(State state);
  int (*JpegStreamCreate)(Handle handle, Stream* stream);
  int (*JpegStreamDestroy)(Stream stream);
  int (*JpegStreamParseHeader)(Handle handle, const unsigned char* data, size_t length, Stream stream);
  int (*JpegStreamGetFrameDimensions)(Stream stream, unsigned* width, unsigned* height);
  int (*JpegStreamGetComponentsNum)(Stream stream, unsigned* components);
  int (*JpegStreamGetExifOrientation)(Stream stream, int* orientation);
  int (*DecodeBatchedSupported)(Handle handle, Stream stream, int* is_supported);  // 0: supported
  int (*DecodeBatchedInitialize)(Handle handle, State state, int batch_size, int max_cpu_threads, int output_format);
  int (*DecodeBatched)(Handle handle, State state, const unsigned char* const* data, const size_t* lengths,
                       Image* destinations, CUstream_st* stream);
};

/// NVJPEG_STATUS_* spelled out, for messages.
const char* status_name(int status);

}  // namespace nvjpeg
}  // namespace cortado
