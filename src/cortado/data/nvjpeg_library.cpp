// Opening nvJPEG at run time (NvjpegLibrary, data/nvjpeg_batch.hpp; the
// declarations in nvjpeg_api.hpp).
#include <dlfcn.h>

#include "cortado/data/nvjpeg_batch.hpp"
#include "cortado/util/cuda.hpp"
#include "nvjpeg_api.hpp"

namespace cortado {

namespace nvjpeg {

const char* status_name(int status) {
  switch (status) {
    case kSuccess: return "NVJPEG_STATUS_SUCCESS";
    case kNotInitialized: return "NVJPEG_STATUS_NOT_INITIALIZED";
    case kInvalidParameter: return "NVJPEG_STATUS_INVALID_PARAMETER";
    case kBadJpeg: return "NVJPEG_STATUS_BAD_JPEG";
    case kJpegNotSupported: return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case kAllocatorFailure: return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case kExecutionFailed: return "NVJPEG_STATUS_EXECUTION_FAILED";
    case kArchMismatch: return "NVJPEG_STATUS_ARCH_MISMATCH";
    case kInternalError: return "NVJPEG_STATUS_INTERNAL_ERROR";
    case kImplementationNotSupported: return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case kIncompleteBitstream: return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
  }
  return "an unknown nvJPEG status";
}

}  // namespace nvjpeg

namespace {

// Resolves one entry point into `fn`; a missing required one is an Error.
// (Not named bind: with a std::string argument, an unqualified bind(...)
// finds std::bind by argument-dependent lookup, a better match, which builds
// a call wrapper and discards it, leaving every entry point null.)
template <typename F>
void resolve_symbol(void* handle, const std::string& library, const char* symbol, bool required, F** fn) {
  *fn = reinterpret_cast<F*>(dlsym(handle, symbol));
  if (!*fn && required) {
    fail(library, " has no ", symbol, ": Cortado's GPU JPEG decoding needs the nvJPEG of CUDA 12 or later");
  }
}

}  // namespace

std::vector<std::string> NvjpegLibrary::DefaultNames() {
  return {"libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"};
}

NvjpegLibrary::NvjpegLibrary(const std::vector<std::string>& names) : api_(std::make_unique<nvjpeg::Api>()) {
  std::string tried;
  for (const std::string& name : names) {
    handle_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_) {
      name_ = name;
      break;
    }
    const char* why = dlerror();
    tried += str_cat("\n  ", name, ": ", why ? why : "not found");
  }
  if (!handle_) {
    fail("cannot load nvJPEG, the GPU JPEG decoder (CUDA's libnvjpeg, or the Python package nvidia-nvjpeg); "
         "tried:", tried.empty() ? std::string(" no names") : tried,
         "\nput its folder on LD_LIBRARY_PATH, or decode on the CPU (leave use_gpu_transform off)");
  }
  nvjpeg::Api& a = *api_;
  try {
    resolve_symbol(handle_, name_, "nvjpegCreateEx", true, &a.CreateEx);
    resolve_symbol(handle_, name_, "nvjpegDestroy", true, &a.Destroy);
    resolve_symbol(handle_, name_, "nvjpegJpegStateCreate", true, &a.JpegStateCreate);
    resolve_symbol(handle_, name_, "nvjpegJpegStateDestroy", true, &a.JpegStateDestroy);
    resolve_symbol(handle_, name_, "nvjpegJpegStreamCreate", true, &a.JpegStreamCreate);
    resolve_symbol(handle_, name_, "nvjpegJpegStreamDestroy", true, &a.JpegStreamDestroy);
    resolve_symbol(handle_, name_, "nvjpegJpegStreamParseHeader", true, &a.JpegStreamParseHeader);
    resolve_symbol(handle_, name_, "nvjpegJpegStreamGetFrameDimensions", true, &a.JpegStreamGetFrameDimensions);
    resolve_symbol(handle_, name_, "nvjpegJpegStreamGetComponentsNum", true, &a.JpegStreamGetComponentsNum);
    resolve_symbol(handle_, name_, "nvjpegJpegStreamGetExifOrientation", false, &a.JpegStreamGetExifOrientation);
    resolve_symbol(handle_, name_, "nvjpegDecodeBatchedSupported", true, &a.DecodeBatchedSupported);
    resolve_symbol(handle_, name_, "nvjpegDecodeBatchedInitialize", true, &a.DecodeBatchedInitialize);
    resolve_symbol(handle_, name_, "nvjpegDecodeBatched", true, &a.DecodeBatched);
  } catch (...) {
    dlclose(handle_);
    throw;
  }
}

NvjpegLibrary::~NvjpegLibrary() {
  if (handle_) dlclose(handle_);
}

bool NvjpegBatchDecoder::Available(std::string* why) {
  if (!cuda::available()) {
    if (why) *why = "no CUDA device";
    return false;
  }
  static const std::string load_error = []() -> std::string {
    try {
      NvjpegLibrary library;
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  }();
  if (why) *why = load_error;
  return load_error.empty();
}

}  // namespace cortado
