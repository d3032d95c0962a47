#include "cortado/data/jpeg_decode.hpp"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include <jpeglib.h>

#include "cortado/common.hpp"

namespace cortado {

namespace {

// libjpeg reports fatal errors through error_exit, which must not return:
// it longjmps back to decode_jpeg's frame, which throws from there. No C++
// object lives in the libjpeg frames the jump crosses, and decode_jpeg
// constructs none after its setjmp.
struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_error(j_common_ptr cinfo) {
  ErrorManager* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings (corrupt or truncated entropy-coded data) are accepted silently
// (jpeg_decode.hpp).
void on_message(j_common_ptr) {}

// Owns one decompressor; destroys it on every way out (a return, the throw
// after a libjpeg error, an exception from `choose`).
struct Decompressor {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  volatile bool created = false;
  // Rows wider than the region (the widened crop); here, not in
  // decode_jpeg's frame, so that no object is constructed after setjmp.
  std::vector<uint8_t> row;
  Decompressor() {
    std::memset(&cinfo, 0, sizeof(cinfo));
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    err.pub.output_message = on_message;
    err.message[0] = '\0';
  }
  ~Decompressor() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

uint32_t read_u16(const uint8_t* p, bool big_endian) {
  return big_endian ? (uint32_t{p[0]} << 8) | p[1] : (uint32_t{p[1]} << 8) | p[0];
}
uint32_t read_u32(const uint8_t* p, bool big_endian) {
  return big_endian ? (read_u16(p, true) << 16) | read_u16(p + 2, true) : (read_u16(p + 2, false) << 16) | read_u16(p, false);
}

// The orientation tag (0x0112) of IFD0 of an APP1 "Exif" segment; 1 when the
// segment is not EXIF, has no such tag or is malformed.
int exif_orientation(const uint8_t* data, size_t size) {
  if (size < 14 || std::memcmp(data, "Exif\0\0", 6) != 0) return 1;
  const uint8_t* tiff = data + 6;
  const size_t n = size - 6;
  const bool big = tiff[0] == 'M' && tiff[1] == 'M';
  if (!big && !(tiff[0] == 'I' && tiff[1] == 'I')) return 1;
  if (read_u16(tiff + 2, big) != 42) return 1;
  const uint32_t ifd = read_u32(tiff + 4, big);
  if (ifd > n || n - ifd < 2) return 1;
  const uint32_t entries = read_u16(tiff + ifd, big);
  for (uint32_t e = 0; e < entries; ++e) {
    const size_t at = ifd + 2 + size_t{e} * 12;
    if (at + 12 > n) return 1;
    if (read_u16(tiff + at, big) == 0x0112) {
      const uint32_t v = read_u16(tiff + at + 8, big);  // a SHORT, left-aligned in the value field
      return v >= 1 && v <= 8 ? static_cast<int>(v) : 1;
    }
  }
  return 1;
}

}  // namespace

int jpeg_scale_for(int window_h, int window_w, int out_h, int out_w) {
  for (int s : {1, 2, 4}) {
    if (int64_t{window_h} * s >= int64_t{out_h} * 8 && int64_t{window_w} * s >= int64_t{out_w} * 8) return s;
  }
  return 8;
}

bool is_jpeg(const std::string& bytes) {
  return bytes.size() >= 3 && static_cast<uint8_t>(bytes[0]) == 0xFF && static_cast<uint8_t>(bytes[1]) == 0xD8 &&
         static_cast<uint8_t>(bytes[2]) == 0xFF;
}

bool decode_jpeg(const std::string& bytes, int channels,
                 const std::function<void(const JpegInfo&, JpegRegion*)>& choose, std::vector<uint8_t>* pixels) {
  CORTADO_CHECK(channels == 0 || channels == 1 || channels == 3) << channels;
  Decompressor d;
  jpeg_decompress_struct* cinfo = &d.cinfo;
  if (setjmp(d.err.jump)) {
    fail("cannot decode the JPEG image (", bytes.size(), " bytes): ", d.err.message);
  }
  jpeg_create_decompress(cinfo);
  d.created = true;
  jpeg_mem_src(cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_save_markers(cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(cinfo, TRUE);

  JpegInfo info;
  info.width = static_cast<int>(cinfo->image_width);
  info.height = static_cast<int>(cinfo->image_height);
  info.components = cinfo->num_components;
  for (jpeg_saved_marker_ptr m = cinfo->marker_list; m; m = m->next) {
    if (m->marker == JPEG_APP0 + 1) {
      info.orientation = exif_orientation(m->data, m->data_length);
      if (info.orientation != 1) break;
    }
  }
  const J_COLOR_SPACE in = cinfo->jpeg_color_space;
  if (in == JCS_CMYK || in == JCS_YCCK || info.orientation != 1) return false;
  const int out_channels = channels != 0 ? channels : (in == JCS_GRAYSCALE ? 1 : 3);
  cinfo->out_color_space = out_channels == 1 ? JCS_GRAYSCALE : JCS_EXT_BGR;

  JpegRegion r;
  choose(info, &r);
  CORTADO_CHECK(r.scale >= 1 && r.scale <= 16) << r.scale;
  cinfo->scale_num = static_cast<unsigned>(r.scale);
  cinfo->scale_denom = 8;
  jpeg_start_decompress(cinfo);
  const int sw = static_cast<int>(cinfo->output_width), sh = static_cast<int>(cinfo->output_height);
  CORTADO_CHECK(sw == jpeg_scaled_size(info.width, r.scale) && sh == jpeg_scaled_size(info.height, r.scale));
  if (r.width == 0 && r.height == 0) {
    r.width = sw;
    r.height = sh;
  }
  CORTADO_CHECK(r.x0 >= 0 && r.y0 >= 0 && r.width > 0 && r.height > 0 && r.x0 + r.width <= sw &&
                r.y0 + r.height <= sh)
      << "region (" << r.x0 << ", " << r.y0 << ", " << r.width << ", " << r.height << ") of " << sw << "x" << sh;

  // One pixel more on each side where the image goes on (jpeg_decode.hpp);
  // libjpeg widens the columns further to whole iMCUs.
  JDIMENSION cx = static_cast<JDIMENSION>(r.x0 > 0 ? r.x0 - 1 : 0);
  JDIMENSION cw = static_cast<JDIMENSION>(std::min(sw, r.x0 + r.width + 1)) - cx;
  if (cx != 0 || cw != static_cast<JDIMENSION>(sw)) jpeg_crop_scanline(cinfo, &cx, &cw);
  const size_t row_bytes = static_cast<size_t>(r.width) * out_channels;
  pixels->resize(row_bytes * r.height);
  const bool direct = cx == static_cast<JDIMENSION>(r.x0) && cw == static_cast<JDIMENSION>(r.width);
  if (!direct) d.row.resize(size_t{cw} * out_channels);
  const size_t skip = (static_cast<size_t>(r.x0) - cx) * out_channels;
  if (r.y0 > 0) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(r.y0));
  for (int y = 0; y < r.height; ++y) {
    uint8_t* dst = pixels->data() + row_bytes * y;
    JSAMPROW row = direct ? dst : d.row.data();
    if (jpeg_read_scanlines(cinfo, &row, 1) != 1) fail("cannot decode the JPEG image (", bytes.size(), " bytes): no row ", r.y0 + y);
    if (!direct) std::memcpy(dst, d.row.data() + skip, row_bytes);
  }
  // The rows below the region are never decoded.
  jpeg_abort_decompress(cinfo);
  return true;
}

}  // namespace cortado
