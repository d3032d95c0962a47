// Converts a folder of images and a list file to an LMDB of Datum records, as
// BVLC Caffe's convert_imageset does:
//
//   convert_imageset [flags] ROOTFOLDER/ LISTFILE DB_NAME
//
// LISTFILE holds one image a line, "relative/path.JPEG label": the label is
// the integer after the last space, so paths may contain spaces. Blank lines
// are skipped. The image is ROOTFOLDER/relative/path.JPEG.
//
// Records: by default raw pixels, (C, H, W) uint8 planar, BGR (C = 3) or gray
// with --gray (C = 1), optionally resized. With --encoded the file's own bytes
// are stored (encoded = true) after checking that they decode; an image that
// must change (resized, re-encoded with --encode_type, or a file whose
// channels differ from those asked for: a gray or RGBA PNG in a color
// database) is decoded, changed and encoded again; encoded records carry the
// decoded channels, height and width too. Keys are "%08d_<path>",
// the number being the position in the (shuffled) list, so the database's
// key order is the list's order. Puts are committed 1000 per transaction.
//
// Where Cortado differs from Caffe, on purpose:
// - An unreadable or undecodable image is an error naming the image and the
//   list line (Caffe logs it and goes on); --skip_bad skips such images with
//   a warning and counts them in the summary.
// - A label must be a non-negative integer (Caffe's atoi reads "abc" as 0).
// - The database is written to "DB_NAME.<pid>.tmp" and renamed into place
//   when complete, so an interrupted run never leaves a half database under
//   DB_NAME; an existing DB_NAME is refused.
// - --shuffle is a Fisher-Yates shuffle driven by std::mt19937(--seed), so
//   the order is the same on every platform and standard library.
// - --resize_width and --resize_height go together (Caffe ignores one alone).
// - --min_dim / --max_dim scale an image keeping its aspect ratio: up until
//   its shorter side is min_dim, down until its longer side is max_dim.

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "cortado/common.hpp"
#include "cortado/data/image_list.hpp"
#include "cortado/data/lmdb.hpp"
#include "cortado/util/tool_flags.hpp"
#include "cortado.pb.h"

DEFINE_bool(gray, false, "Read the images as grayscale (1 channel); default: color (3 channels, BGR)");
DEFINE_bool(shuffle, false, "Shuffle the list before converting (reproducible: the order depends on --seed only)");
DEFINE_int64(seed, 1, "Seed of the --shuffle order");
DEFINE_string(backend, "lmdb", "The database format to write; Cortado writes lmdb only");
DEFINE_int32(resize_width, 0, "Resize every image to this width (with --resize_height; 0: keep)");
DEFINE_int32(resize_height, 0, "Resize every image to this height (with --resize_width; 0: keep)");
DEFINE_int32(min_dim, 0, "Scale up, keeping the aspect ratio, images whose shorter side is below this (0: off)");
DEFINE_int32(max_dim, 0, "Scale down, keeping the aspect ratio, images whose longer side is above this (0: off)");
DEFINE_bool(check_size, false, "Require every image to have the same size (after any resizing)");
DEFINE_bool(encoded, false, "Store the encoded image (the file's PNG/JPEG bytes) instead of raw pixels");
DEFINE_string(encode_type, "", "Re-encode every image as png or jpg (implies --encoded)");
DEFINE_bool(skip_bad, false, "Skip unreadable or undecodable images with a warning instead of failing");

namespace {

namespace fs = std::filesystem;
using cortado::fail;
using cortado::str_cat;

constexpr int kCommitEvery = 1000;
constexpr size_t kMaxKeyBytes = 511;  // LMDB's default mdb_env_get_maxkeysize()

// An image that cannot be read or decoded: the one failure --skip_bad skips.
class BadImage : public cortado::Error {
 public:
  using cortado::Error::Error;
};

using Entry = cortado::ImageListEntry;

struct Options {
  bool gray = false;
  int resize_width = 0, resize_height = 0, min_dim = 0, max_dim = 0;
  bool check_size = false;
  bool encoded = false;
  std::string encode_type;  // "", "png" or "jpg"
  bool skip_bad = false;
};

std::vector<Entry> read_list(const std::string& list_path) { return cortado::ReadImageList(list_path); }

// Fisher-Yates with a plain modulo draw: the same order with every standard
// library (std::shuffle's use of the generator is unspecified).
void shuffle_entries(std::vector<Entry>* entries, int64_t seed) {
  std::mt19937 gen(static_cast<std::mt19937::result_type>(seed));
  for (size_t i = entries->size(); i > 1; --i) {
    const size_t j = gen() % i;
    std::swap((*entries)[i - 1], (*entries)[j]);
  }
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw BadImage("is a directory");
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw BadImage(str_cat("cannot open: ", std::strerror(errno)));
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) bytes.append(buf, n);
  if (std::ferror(f.get())) throw BadImage(str_cat("read error: ", std::strerror(errno)));
  return bytes;
}

cv::Mat decode(const std::string& bytes, int flags) {
  if (bytes.empty()) throw BadImage("cannot decode: the file is empty");
  cv::Mat img;
  try {
    img = cv::imdecode(cv::Mat(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data())), flags);
  } catch (const cv::Exception& e) {
    throw BadImage(str_cat("cannot decode (", bytes.size(), " bytes): ", e.what()));
  }
  if (img.empty()) throw BadImage(str_cat("cannot decode (", bytes.size(), " bytes; not an image OpenCV reads)"));
  if (img.depth() != CV_8U) throw BadImage("decodes to a non-8-bit image");
  return img;
}

// "png", "jpg", or "" for other formats, from the file's first bytes (some
// ImageNet .JPEG files are PNGs).
std::string sniff_format(const std::string& bytes) {
  if (bytes.size() >= 8 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0) return "png";
  if (bytes.size() >= 3 && bytes.compare(0, 3, "\xFF\xD8\xFF") == 0) return "jpg";
  return "";
}

// The size `img` is to have under the options (its own size when unchanged).
cv::Size target_size(const cv::Mat& img, const Options& o) {
  if (o.resize_width > 0) return cv::Size(o.resize_width, o.resize_height);
  const int shorter = std::min(img.rows, img.cols), longer = std::max(img.rows, img.cols);
  double scale = 1;
  if (o.min_dim > 0 && shorter < o.min_dim) scale = static_cast<double>(o.min_dim) / shorter;
  if (o.max_dim > 0 && longer * scale > o.max_dim) scale = static_cast<double>(o.max_dim) / longer;
  if (scale == 1) return img.size();
  return cv::Size(std::max(1, static_cast<int>(std::lround(img.cols * scale))),
                  std::max(1, static_cast<int>(std::lround(img.rows * scale))));
}

cv::Mat resized(const cv::Mat& img, const Options& o) {
  const cv::Size size = target_size(img, o);
  if (size == img.size()) return img;
  cv::Mat out;
  cv::resize(img, out, size, 0, 0, cv::INTER_LINEAR);  // Caffe's interpolation
  return out;
}

// (H, W, C) interleaved -> (C, H, W) planar.
void set_raw(const cv::Mat& img, cortado::Datum* datum) {
  const cv::Mat m = img.isContinuous() ? img : img.clone();
  const int C = m.channels(), H = m.rows, W = m.cols;
  std::string planar(static_cast<size_t>(C) * H * W, '\0');
  const uint8_t* src = m.ptr<uint8_t>(0);
  for (int h = 0; h < H; ++h)
    for (int w = 0; w < W; ++w)
      for (int c = 0; c < C; ++c)
        planar[(static_cast<size_t>(c) * H + h) * W + w] =
            static_cast<char>(src[(static_cast<size_t>(h) * W + w) * C + c]);
  datum->set_data(std::move(planar));
  datum->set_encoded(false);
}

// Fills `datum` (data, shape, encoded) from the image file `file`; throws
// BadImage when the file cannot be read or decoded.
void convert_image(const std::string& file, const Options& o, cortado::Datum* datum) {
  const std::string bytes = read_file(file);
  const int channels = o.gray ? 1 : 3;
  const int flags = o.gray ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR;
  cv::Mat img;
  if (o.encoded) {
    // The Data layer decodes with the file's own channels: keep the bytes
    // only when they decode to what a raw record would hold.
    const cv::Mat native = decode(bytes, cv::IMREAD_ANYCOLOR);
    const std::string format = sniff_format(bytes);
    const bool same_format = o.encode_type.empty() || o.encode_type == format;
    if (same_format && native.channels() == channels && target_size(native, o) == native.size()) {
      datum->set_data(bytes);
      datum->set_encoded(true);
      datum->set_channels(channels);
      datum->set_height(native.rows);
      datum->set_width(native.cols);
      return;
    }
    img = resized(decode(bytes, flags), o);
    const std::string ext = !o.encode_type.empty() ? o.encode_type : (format.empty() ? "png" : format);
    std::vector<uint8_t> buf;
    bool ok = false;
    try {
      ok = cv::imencode("." + ext, img, buf);
    } catch (const cv::Exception& e) {
      fail("OpenCV cannot encode the image as ", ext, ": ", e.what());
    }
    if (!ok) fail("OpenCV cannot encode the image as ", ext);
    datum->set_data(buf.data(), buf.size());
    datum->set_encoded(true);
  } else {
    img = resized(decode(bytes, flags), o);
    set_raw(img, datum);
  }
  datum->set_channels(img.channels());
  datum->set_height(img.rows);
  datum->set_width(img.cols);
}

// Removes the temporary database unless it was renamed into place.
class TempDirGuard {
 public:
  explicit TempDirGuard(std::string path) : path_(std::move(path)) {}
  ~TempDirGuard() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

void refuse_existing(const std::string& out) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out, ec))) {
    fail(out, ": already exists; remove it or choose another DB_NAME (convert_imageset never overwrites a database)");
  }
}

struct Summary {
  int64_t written = 0, skipped = 0;
};

Summary convert(std::string root, const std::string& list_path, const std::string& out, const Options& o) {
  std::vector<Entry> entries = read_list(list_path);
  if (FLAGS_shuffle) shuffle_entries(&entries, FLAGS_seed);
  if (!root.empty() && root.back() != '/') root += '/';
  refuse_existing(out);

  const std::string tmp = str_cat(out, ".", ::getpid(), ".tmp");
  std::error_code ec;
  fs::remove_all(tmp, ec);  // a leftover of an interrupted run with the same name
  TempDirGuard guard(tmp);
  Summary s;
  {
    cortado::LmdbWriter writer(tmp, kCommitEvery);
    cortado::Datum datum;
    std::string value;
    std::vector<int> first_shape;  // (C, H, W) of the first image, for --check_size
    std::string first_where;
    char index[32];
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      const std::string file = root + e.path;
      const std::string where = str_cat(list_path, ":", e.line, ": image '", file, "'");
      datum.Clear();
      try {
        convert_image(file, o, &datum);
      } catch (const BadImage& bad) {
        if (!o.skip_bad) fail(where, ": ", bad.what(), " (--skip_bad skips such images)");
        LOG(WARNING) << "skipping " << where << ": " << bad.what();
        ++s.skipped;
        continue;
      } catch (const cortado::Error& err) {
        fail(where, ": ", err.what());
      }
      datum.set_label(e.label);
      if (o.check_size) {
        const std::vector<int> shape = {datum.channels(), datum.height(), datum.width()};
        if (first_shape.empty()) {
          first_shape = shape;
          first_where = where;
        } else if (shape != first_shape) {
          fail(where, " is ", shape[1], "x", shape[2], " with ", shape[0], " channels, but the first image, ",
               first_where, ", is ", first_shape[1], "x", first_shape[2], " with ", first_shape[0],
               " channels (--check_size: every image must have one size; --resize_width/--resize_height make it so)");
        }
      }
      std::snprintf(index, sizeof(index), "%08lld_", static_cast<long long>(i));
      const std::string key = index + e.path;
      if (key.size() > kMaxKeyBytes) {
        fail(where, ": the key '", key, "' is longer than LMDB's limit of ", kMaxKeyBytes, " bytes; shorten the path");
      }
      datum.SerializeToString(&value);
      writer.Put(key, value);
      ++s.written;
      if ((i + 1) % kCommitEvery == 0) LOG(INFO) << "Processed " << (i + 1) << " of " << entries.size() << " images";
    }
    writer.Close();
  }
  if (s.written == 0) fail(list_path, ": no image was converted (all ", s.skipped, " were skipped)");
  refuse_existing(out);  // it may have appeared while we converted
  fs::rename(tmp, out, ec);
  if (ec) fail(out, ": cannot rename the finished database ", tmp, " to it: ", ec.message());
  guard.release();
  return s;
}

Options options_from_flags() {
  if (FLAGS_backend == "leveldb") fail("--backend=leveldb is not supported; Cortado writes LMDB only (--backend=lmdb)");
  if (FLAGS_backend != "lmdb") fail("--backend=", FLAGS_backend, " is not a known backend; use --backend=lmdb");
  Options o;
  o.gray = FLAGS_gray;
  o.resize_width = FLAGS_resize_width;
  o.resize_height = FLAGS_resize_height;
  o.min_dim = FLAGS_min_dim;
  o.max_dim = FLAGS_max_dim;
  o.check_size = FLAGS_check_size;
  o.skip_bad = FLAGS_skip_bad;
  for (const auto& [name, v] : {std::pair<const char*, int>{"resize_width", o.resize_width},
                                {"resize_height", o.resize_height}, {"min_dim", o.min_dim}, {"max_dim", o.max_dim}}) {
    if (v < 0) fail("--", name, " must be >= 0, got ", v);
  }
  if ((o.resize_width > 0) != (o.resize_height > 0)) {
    fail("--resize_width and --resize_height go together (got ", o.resize_width, " and ", o.resize_height, ")");
  }
  if (o.resize_width > 0 && (o.min_dim > 0 || o.max_dim > 0)) {
    fail("--resize_width/--resize_height and --min_dim/--max_dim cannot be combined");
  }
  if (o.min_dim > 0 && o.max_dim > 0 && o.min_dim > o.max_dim) {
    fail("--min_dim (", o.min_dim, ") must not exceed --max_dim (", o.max_dim, ")");
  }
  std::string enc = FLAGS_encode_type;
  std::transform(enc.begin(), enc.end(), enc.begin(), [](unsigned char c) { return std::tolower(c); });
  if (enc == "jpeg") enc = "jpg";
  if (!enc.empty() && enc != "png" && enc != "jpg") fail("--encode_type=", FLAGS_encode_type, ": use png or jpg");
  o.encode_type = enc;
  o.encoded = FLAGS_encoded || !enc.empty();
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_alsologtostderr = 1;
  gflags::SetUsageMessage(
      "Converts images listed in a file to an LMDB of Datum records.\n"
      "Usage: convert_imageset [flags] ROOTFOLDER/ LISTFILE DB_NAME\n"
      "LISTFILE lines are 'relative/path.JPEG label' (the label after the last space).");
  cortado::InitTool(&argc, &argv);  // util/tool_flags.hpp: flags, and glog with Caffe's prefix
  if (argc != 4) {
    std::cerr << "convert_imageset: error: expected ROOTFOLDER/ LISTFILE DB_NAME, got " << (argc - 1)
              << " argument(s)\n";
    gflags::ShowUsageWithFlagsRestrict(argv[0], "convert_imageset");
    return 1;
  }
  try {
    const Options o = options_from_flags();
    const auto start = std::chrono::steady_clock::now();
    const Summary s = convert(argv[1], argv[2], argv[3], o);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "convert_imageset: wrote " << s.written << " records to " << argv[3] << " (" << s.skipped
              << " skipped) in " << std::fixed << std::setprecision(1) << secs << " s" << std::endl;
  } catch (const cortado::Error& e) {
    std::cerr << "convert_imageset: error: " << e.what() << std::endl;
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "convert_imageset: error: out of memory" << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "convert_imageset: error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
