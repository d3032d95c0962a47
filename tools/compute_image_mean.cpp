// Computes the per-pixel mean image of an LMDB of Datum records, as BVLC
// Caffe's compute_image_mean does:
//
//   compute_image_mean [--backend=lmdb] INPUT_DB [OUTPUT_FILE]
//
// Records may be raw (uint8 data or float_data) or encoded (PNG/JPEG); encoded
// ones are decoded exactly as the Data layer decodes them (DataTransformer,
// IMREAD_ANYCOLOR unless --force_color / --force_gray), so the mean has the
// shape the layer's records have. Every record must have the same shape; the
// first that does not is an error naming its key. Sums accumulate in double.
//
// OUTPUT_FILE is a BlobProto (binaryproto) holding the mean as float `data`,
// shape (1, C, H, W) in both `shape` and the legacy num/channels/height/width
// (as Caffe writes it), the file transform_param.mean_file reads. It is
// written to OUTPUT_FILE.tmp and renamed. Without OUTPUT_FILE the tool only
// prints. It always prints the mean of each channel (the values to give as
// transform_param.mean_value instead of a mean file).

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <chrono>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "cortado/common.hpp"
#include "cortado/data/data_transformer.hpp"
#include "cortado/data/lmdb.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/util/tool_flags.hpp"
#include "cortado.pb.h"

DEFINE_string(backend, "lmdb", "The database format to read; Cortado reads lmdb only");
DEFINE_bool(force_color, false, "Decode encoded records as 3-channel BGR (as transform_param.force_color)");
DEFINE_bool(force_gray, false, "Decode encoded records as 1 channel (as transform_param.force_gray)");

namespace {

using cortado::fail;

std::string shape_text(const std::vector<int>& s) {
  return cortado::str_cat("(", s[0], ", ", s[1], ", ", s[2], ")");
}

struct Mean {
  std::vector<int> shape;  // (C, H, W)
  std::vector<double> values;
  int64_t records = 0;
};

Mean compute(const std::string& db) {
  cortado::TransformationParameter tp;
  tp.set_force_color(FLAGS_force_color);
  tp.set_force_gray(FLAGS_force_gray);
  const cortado::DataTransformer transformer(tp, cortado::TEST, "compute_image_mean", "tool");
  cortado::LmdbCursor cursor(db);
  if (cursor.entries() == 0 || !cursor.Valid()) fail("LMDB '", db, "': the database holds no records");
  Mean m;
  std::vector<double>& sum = m.values;
  cortado::Datum datum;
  for (; cursor.Valid(); cursor.Next()) {
    const std::string key(cursor.key());
    const std::string_view value = cursor.value();
    const std::string where = cortado::str_cat("LMDB '", db, "': record '", key, "'");
    std::vector<int> shape;
    try {
      if (!datum.ParseFromArray(value.data(), static_cast<int>(value.size()))) fail("is not a Datum");
      if (datum.encoded()) datum = transformer.Decode(datum);
      shape = transformer.InferShape(datum);
    } catch (const cortado::Error& e) {
      fail(where, ": ", e.what());
    }
    if (m.records == 0) {
      m.shape = shape;
      sum.assign(static_cast<size_t>(shape[0]) * shape[1] * shape[2], 0.0);
    } else if (shape != m.shape) {
      fail(where, " has shape ", shape_text(shape), " but the first record has ", shape_text(m.shape),
           "; a mean image needs records of one size (convert with --resize_width/--resize_height)");
    }
    if (!datum.data().empty()) {
      const auto* p = reinterpret_cast<const uint8_t*>(datum.data().data());
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += p[i];
    } else {
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += datum.float_data(static_cast<int>(i));
    }
    if (++m.records % 10000 == 0) LOG(INFO) << "Processed " << m.records << " records";
  }
  for (double& v : sum) v /= static_cast<double>(m.records);
  return m;
}

void write_mean(const Mean& m, const std::string& path) {
  cortado::BlobProto proto;
  proto.set_num(1);
  proto.set_channels(m.shape[0]);
  proto.set_height(m.shape[1]);
  proto.set_width(m.shape[2]);
  proto.mutable_shape()->add_dim(1);
  for (int d : m.shape) proto.mutable_shape()->add_dim(d);
  proto.mutable_data()->Reserve(static_cast<int>(m.values.size()));
  for (double v : m.values) proto.add_data(static_cast<float>(v));
  cortado::WriteBinaryProto(path, proto);
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_alsologtostderr = 1;
  gflags::SetUsageMessage(
      "Computes the per-pixel mean image of an LMDB of Datum records.\n"
      "Usage: compute_image_mean [--backend=lmdb] INPUT_DB [OUTPUT_FILE]");
  cortado::InitTool(&argc, &argv);  // util/tool_flags.hpp: flags, and glog with Caffe's prefix
  if (argc != 2 && argc != 3) {
    std::cerr << "compute_image_mean: error: expected INPUT_DB [OUTPUT_FILE], got " << (argc - 1)
              << " argument(s)\n";
    gflags::ShowUsageWithFlagsRestrict(argv[0], "compute_image_mean");
    return 1;
  }
  try {
    if (FLAGS_backend == "leveldb") {
      fail("--backend=leveldb is not supported; Cortado reads LMDB only (--backend=lmdb)");
    }
    if (FLAGS_backend != "lmdb") fail("--backend=", FLAGS_backend, " is not a known backend; use --backend=lmdb");
    if (FLAGS_force_color && FLAGS_force_gray) fail("--force_color and --force_gray cannot both be set");
    const auto start = std::chrono::steady_clock::now();
    const Mean m = compute(argv[1]);
    if (argc == 3) write_mean(m, argv[2]);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "compute_image_mean: " << m.records << " records of shape " << shape_text(m.shape) << " in "
              << std::fixed << std::setprecision(1) << secs << " s";
    if (argc == 3) std::cout << "; wrote " << argv[2];
    std::cout << "\n" << std::setprecision(4);
    const size_t plane = static_cast<size_t>(m.shape[1]) * m.shape[2];
    for (int c = 0; c < m.shape[0]; ++c) {
      double s = 0;
      for (size_t i = 0; i < plane; ++i) s += m.values[c * plane + i];
      std::cout << "mean_value channel [" << c << "]: " << s / static_cast<double>(plane) << "\n";
    }
    std::cout << std::flush;
  } catch (const cortado::Error& e) {
    std::cerr << "compute_image_mean: error: " << e.what() << std::endl;
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "compute_image_mean: error: out of memory" << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "compute_image_mean: error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
