// Converts MNIST-format IDX files (MNIST, Fashion-MNIST), gzipped or not, to
// an LMDB of Caffe Datum records: channels 1, 28x28 (or the file's size) raw
// bytes, the label, keys "%08d" in file order.
//
//   convert_mnist <images-idx3[.gz]> <labels-idx1[.gz]> <out_lmdb> [--limit=N]
//
// The IDX format: a big-endian magic number (0x00000803 for images,
// 0x00000801 for labels), the count, for images the rows and columns, then
// one unsigned byte per pixel / label. zlib's gzread reads plain files too.

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <zlib.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cortado/common.hpp"
#include "cortado/data/lmdb.hpp"
#include "cortado/util/tool_flags.hpp"
#include "cortado.pb.h"

DEFINE_int64(limit, 0, "Convert at most this many records (0: all)");
DEFINE_int32(commit_every, 1000, "Puts per LMDB transaction");

namespace {

using cortado::fail;

constexpr uint32_t kImageMagic = 0x00000803;
constexpr uint32_t kLabelMagic = 0x00000801;

class IdxFile {
 public:
  explicit IdxFile(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (!file_) fail(path_, ": cannot open: ", std::strerror(errno));
  }
  ~IdxFile() {
    if (file_) gzclose(file_);
  }
  IdxFile(const IdxFile&) = delete;
  IdxFile& operator=(const IdxFile&) = delete;

  void Read(void* dst, size_t n, const char* what) {
    const int got = gzread(file_, dst, static_cast<unsigned>(n));
    if (got < 0) {
      int err = 0;
      fail(path_, ": read error in ", what, ": ", gzerror(file_, &err));
    }
    if (static_cast<size_t>(got) != n) {
      fail(path_, ": file ends early while reading ", what, " (", got, " of ", n, " bytes)");
    }
  }
  uint32_t ReadBigEndian(const char* what) {
    unsigned char b[4];
    Read(b, 4, what);
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  gzFile file_;
};

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

int64_t Convert(const std::string& images_path, const std::string& labels_path, const std::string& out) {
  IdxFile images(images_path), labels(labels_path);
  const uint32_t im_magic = images.ReadBigEndian("the magic number");
  if (im_magic != kImageMagic) {
    fail(images_path, ": magic number ", hex(im_magic), " is not an IDX image file's (", hex(kImageMagic), ")");
  }
  const uint32_t lb_magic = labels.ReadBigEndian("the magic number");
  if (lb_magic != kLabelMagic) {
    fail(labels_path, ": magic number ", hex(lb_magic), " is not an IDX label file's (", hex(kLabelMagic), ")");
  }
  const uint32_t num_images = images.ReadBigEndian("the image count");
  const uint32_t num_labels = labels.ReadBigEndian("the label count");
  const uint32_t rows = images.ReadBigEndian("the row count");
  const uint32_t cols = images.ReadBigEndian("the column count");
  if (num_images != num_labels) {
    fail(images_path, " holds ", num_images, " images but ", labels_path, " holds ", num_labels, " labels");
  }
  if (rows == 0 || cols == 0 || rows > 65536 || cols > 65536) {
    fail(images_path, ": implausible image size ", rows, "x", cols);
  }
  if (std::filesystem::exists(out)) fail(out, ": already exists; remove it first");

  int64_t n = num_images;
  if (FLAGS_limit > 0 && FLAGS_limit < n) n = FLAGS_limit;
  cortado::LmdbWriter writer(out, FLAGS_commit_every);
  cortado::Datum datum;
  datum.set_channels(1);
  datum.set_height(static_cast<int>(rows));
  datum.set_width(static_cast<int>(cols));
  std::string pixels(static_cast<size_t>(rows) * cols, '\0');
  std::string value;
  char key[32];
  for (int64_t i = 0; i < n; ++i) {
    images.Read(pixels.data(), pixels.size(), "the pixels");
    unsigned char label = 0;
    labels.Read(&label, 1, "the labels");
    datum.set_data(pixels);
    datum.set_label(label);
    datum.SerializeToString(&value);
    std::snprintf(key, sizeof(key), "%08lld", static_cast<long long>(i));
    writer.Put(key, value);
    if ((i + 1) % 10000 == 0) LOG(INFO) << "Processed " << (i + 1) << " records";
  }
  writer.Close();
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_alsologtostderr = 1;
  gflags::SetUsageMessage(
      "Converts MNIST-format IDX files to an LMDB of Datum records.\n"
      "Usage: convert_mnist <images-idx3[.gz]> <labels-idx1[.gz]> <out_lmdb> [--limit=N]");
  cortado::InitTool(&argc, &argv);  // util/tool_flags.hpp: flags, and glog with Caffe's prefix
  if (argc != 4) {
    gflags::ShowUsageWithFlagsRestrict(argv[0], "convert_mnist");
    return 1;
  }
  if (FLAGS_limit < 0) {
    LOG(ERROR) << "--limit must be >= 0, got " << FLAGS_limit;
    return 1;
  }
  try {
    const int64_t n = Convert(argv[1], argv[2], argv[3]);
    LOG(INFO) << "Wrote " << n << " records to " << argv[3];
  } catch (const cortado::Error& e) {
    LOG(ERROR) << e.what();
    return 1;
  }
  return 0;
}
