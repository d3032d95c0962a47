#pragma once
// JPEG files for the tests, encoded here with libjpeg from synthetic pixels
// (no data files): photo-like content and the encoder settings real files
// use (chroma subsampling, progressive, restart markers, an EXIF segment).
#include <jpeglib.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace cortado {
namespace test {

/// (height, width, 3) BGR: smooth colour fields, edges and fine texture, so
/// that every DCT frequency carries energy, as in photos.
inline std::vector<uint8_t> PhotoPixels(int height, int width, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double fx = 2 + 6 * u(gen), fy = 2 + 6 * u(gen), phase = 6.3 * u(gen);
  const double cx = width * u(gen), cy = height * u(gen), r = 0.25 * std::min(height, width) * (1 + u(gen));
  std::normal_distribution<double> noise(0.0, 9.0);
  std::vector<uint8_t> out(static_cast<size_t>(height) * width * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const double sx = static_cast<double>(x) / width, sy = static_cast<double>(y) / height;
      const bool inside = (x - cx) * (x - cx) + (y - cy) * (y - cy) < r * r;  // a hard edge
      for (int c = 0; c < 3; ++c) {
        double v = 128 + 60 * std::sin(fx * sx * (c + 1) + phase) * std::cos(fy * sy + c) +
                   25 * std::sin(0.9 * x + 0.4 * y * (c + 1)) + (inside ? 40.0 - 30 * c : 0.0) + noise(gen);
        out[(static_cast<size_t>(y) * width + x) * 3 + static_cast<size_t>(c)] =
            static_cast<uint8_t>(std::lround(std::min(255.0, std::max(0.0, v))));
      }
    }
  }
  return out;
}

struct JpegOptions {
  int quality = 90;
  int h_samp = 2, v_samp = 2;  // luma sampling factors: 2x2 is 4:2:0, 2x1 4:2:2, 1x1 4:4:4
  bool progressive = false;
  int restart_rows = 0;
  bool gray = false;   // encode the first channel as a gray JPEG
  bool cmyk = false;   // encode (B, G, R, 255 - G) as an Adobe CMYK JPEG
  std::string app1;    // an APP1 segment's payload (EXIF), none when empty
};

/// Encodes (height, width, 3) BGR pixels.
inline std::string EncodeJpeg(const std::vector<uint8_t>& bgr, int height, int width, const JpegOptions& o = {}) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = o.gray ? 1 : o.cmyk ? 4 : 3;
  cinfo.in_color_space = o.gray ? JCS_GRAYSCALE : o.cmyk ? JCS_CMYK : JCS_EXT_BGR;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, o.quality, TRUE);
  if (!o.gray && !o.cmyk) {
    cinfo.comp_info[0].h_samp_factor = o.h_samp;
    cinfo.comp_info[0].v_samp_factor = o.v_samp;
  }
  if (o.progressive) jpeg_simple_progression(&cinfo);
  cinfo.restart_in_rows = o.restart_rows;
  jpeg_start_compress(&cinfo, TRUE);
  if (!o.app1.empty()) {
    jpeg_write_marker(&cinfo, JPEG_APP0 + 1, reinterpret_cast<const JOCTET*>(o.app1.data()),
                      static_cast<unsigned>(o.app1.size()));
  }
  std::vector<uint8_t> row(static_cast<size_t>(width) * cinfo.input_components);
  while (cinfo.next_scanline < cinfo.image_height) {
    const uint8_t* src = bgr.data() + static_cast<size_t>(cinfo.next_scanline) * width * 3;
    for (int x = 0; x < width; ++x) {
      if (o.gray) {
        row[static_cast<size_t>(x)] = src[x * 3];
      } else if (o.cmyk) {
        for (int c = 0; c < 3; ++c) row[static_cast<size_t>(x) * 4 + c] = src[x * 3 + c];
        row[static_cast<size_t>(x) * 4 + 3] = static_cast<uint8_t>(255 - src[x * 3 + 1]);
      } else {
        for (int c = 0; c < 3; ++c) row[static_cast<size_t>(x) * 3 + c] = src[x * 3 + c];
      }
    }
    JSAMPROW p = row.data();
    jpeg_write_scanlines(&cinfo, &p, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string out(reinterpret_cast<const char*>(buffer), size);
  std::free(buffer);
  return out;
}

/// An EXIF APP1 payload (little-endian TIFF) whose IFD0 holds only the
/// orientation tag.
inline std::string ExifOrientation(int orientation) {
  const unsigned char bytes[] = {'E', 'x', 'i', 'f', 0, 0,              // header
                                 'I', 'I', 42, 0, 8, 0, 0, 0,           // TIFF, IFD0 at 8
                                 1, 0,                                  // one entry
                                 0x12, 0x01, 3, 0, 1, 0, 0, 0,          // orientation, SHORT, count 1
                                 static_cast<unsigned char>(orientation), 0, 0, 0,
                                 0, 0, 0, 0};                           // no next IFD
  return std::string(reinterpret_cast<const char*>(bytes), sizeof(bytes));
}

}  // namespace test
}  // namespace cortado
