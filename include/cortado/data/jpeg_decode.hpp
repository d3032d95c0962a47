#pragma once
// JPEG decoding with libjpeg-turbo's libjpeg API, for the data layers'
// encoded records (data/data_transformer.hpp): decodes only the part of the
// image a crop needs, at the smallest DCT scale that still serves it.
//
// decode_jpeg(bytes, channels, choose, &pixels) reads the header, passes the
// image's size to `choose`, which picks a JpegRegion (a scale s/8 and a
// rectangle of the image scaled by s/8), and decodes that rectangle into
// `pixels`, (height, width, channels) interleaved 8-bit, BGR for 3 channels:
//   - DCT scaling (libjpeg's scale_num/scale_denom = s/8): the scaled image
//     is jpeg_scaled_size(W, s) x jpeg_scaled_size(H, s), ceil(size * s / 8),
//     each 8x8 block inverse-transformed straight to s x s pixels.
//   - rows: the rows above the rectangle are skipped (jpeg_skip_scanlines:
//     entropy-decoded, not inverse-transformed), the rows below it never
//     decoded;
//   - columns: jpeg_crop_scanline, widened by one pixel on each side where
//     the image continues, so that chroma upsampling sees the same
//     neighbours as in a full decode.
// The rectangle's pixels are bit-identical to the same rectangle of a full
// decode at the same scale (tests/data/jpeg_decode_test.cpp), and a full decode at
// scale 8 is bit-identical to OpenCV's cv::imdecode of the same file (which
// uses the same library with the same defaults: JDCT_ISLOW, fancy
// upsampling).
//
// channels: 3 decodes as BGR (gray files replicated), 1 as gray (the luma of
// colour files, as OpenCV's IMREAD_GRAYSCALE), 0 as the file is (1 for gray
// files, else 3; OpenCV's IMREAD_ANYCOLOR).
//
// Returns false, without calling `choose`, for the files whose OpenCV decode
// this one would not reproduce: CMYK/YCCK files and files with an EXIF
// orientation other than 1 (OpenCV rotates those); the caller decodes them
// with OpenCV. A file libjpeg cannot decode (not a JPEG, a corrupt header or
// corrupt tables) throws Error("cannot decode the JPEG image (N bytes): "
// <libjpeg's message>). Corrupt entropy-coded data and a truncated file are
// warnings in libjpeg (the missing blocks are decoded gray), accepted
// silently as OpenCV accepts them: whether a crop reaches the damaged rows
// would otherwise decide whether a record fails. An exception thrown by
// `choose` propagates after libjpeg's state is released.
//
// Scales: libjpeg-turbo has SIMD inverse transforms for s = 1, 2, 4 and 8
// only; 3, 5, 6 and 7 use its C code and, on photo-like ImageNet-sized files,
// decode no faster than the next power of two (5/8 to 7/8 are slower than
// 8/8), so the data transformer picks among 1, 2, 4, 8
// (jpeg_scale_for(...)). Any s in 1..16 is valid here.
//
// Thread safety: every call has its own libjpeg state; calls on different
// threads are independent.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cortado {

/// What the header says.
struct JpegInfo {
  int width = 0, height = 0;  // full size
  int components = 0;         // in the file: 1 (gray), 3 (YCbCr or RGB), 4 (CMYK/YCCK)
  int orientation = 1;        // EXIF orientation (1 without EXIF)
};

/// What to decode: the image scaled by scale/8, and the rectangle of it
/// (x0, y0, width, height) in scaled pixels. width = height = 0: all of it.
struct JpegRegion {
  int scale = 8;
  int x0 = 0, y0 = 0, width = 0, height = 0;
};

/// libjpeg's scaled size: ceil(size * scale / 8).
inline int jpeg_scaled_size(int size, int scale) { return static_cast<int>((int64_t{size} * scale + 7) / 8); }

/// The smallest of the scales 1, 2, 4, 8 (eighths) at which a window of
/// window_h x window_w source pixels still covers out_h x out_w pixels
/// (window * scale / 8 >= out on both axes); 8 when none smaller does.
int jpeg_scale_for(int window_h, int window_w, int out_h, int out_w);

/// Whether `bytes` starts with a JPEG's start-of-image marker (FF D8 FF).
bool is_jpeg(const std::string& bytes);

/// Decodes the region `choose` picks (above). `choose` is called once, after
/// the header is read, and must leave a region inside the scaled image
/// (CORTADO_CHECK). Returns false for files left to OpenCV (above).
bool decode_jpeg(const std::string& bytes, int channels,
                 const std::function<void(const JpegInfo&, JpegRegion*)>& choose, std::vector<uint8_t>* pixels);

}  // namespace cortado
