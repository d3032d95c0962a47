#pragma once
// Blob values in the files of Caffe and NVCaffe (.caffemodel, .solverstate,
// binaryproto means): the three ways a BlobProto carries them, read in one
// place and written in the two formats.
//
// Reading: the first part present of
//   double_data (double_diff)  Caffe<double>;
//   data (diff)                float, Caffe's format;
//   raw_data (raw_diff)        NVCaffe: the values as little-endian bytes of
//                              raw_data_type (raw_diff_type): FLOAT16, FLOAT or
//                              DOUBLE (and Cortado's BFLOAT16);
// NVCaffe's order. A part whose value count (raw: byte count) does not match
// the blob's shape is an Error naming the blob; raw bytes without their type
// are one too.
//
// Writing (BlobFormat):
// - kCaffe: data/diff as float, double_data/double_diff for DOUBLE blobs:
//   what BVLC Caffe reads. Cortado's default.
// - kRaw: NVCaffe's format (NVCaffe's own default, store_blobs_in_old_format:
//   false): raw_data in the type that holds the blob's values now, as NVCaffe
//   writes its blobs: FLOAT16 values (FP16 weights, FP16 history) as FLOAT16,
//   FLOAT and DOUBLE as themselves. An FP16 net trained with FLOAT solver data
//   holds FP32 master weights: they are written as FLOAT, so that a resumed
//   run continues from the same bits. BFLOAT16 values, which NVCaffe has no
//   type for, are written as FLOAT (exact).

#include <string>
#include <vector>

#include "cortado/blob.hpp"

namespace cortado {

enum class BlobFormat {
  kCaffe,  // float `data` (double_data for DOUBLE blobs)
  kRaw,    // NVCaffe's raw_data
};

/// The format a solver writes its snapshots (weights and state) in: kRaw
/// exactly when the solver sets store_blobs_in_old_format: false; unset or
/// true, kCaffe. (NVCaffe's default is raw; Cortado's stays what BVLC Caffe
/// reads.)
BlobFormat SnapshotBlobFormat(const SolverParameter& param);

/// Writes blob's shape and values (and its diff with write_diff) into proto,
/// replacing what it held.
void BlobToProto(const Blob& blob, BlobProto* proto, bool write_diff, BlobFormat format);

/// Reads the data (diff: the diff) of proto into blob, whose shape is already
/// set; the values land in the type the file holds them in, which becomes the
/// tensor's current type (readers in another type convert from it: FP32
/// master weights stay FP32 under FP16 layers). Returns false when proto has
/// no such part. `what` names the blob in errors.
bool ReadBlobProtoValues(const BlobProto& proto, bool diff, Blob* blob, const std::string& what);

/// proto's shape: `shape`, else the legacy (num, channels, height, width)
/// where any of them is set, else empty.
std::vector<int> BlobProtoShape(const BlobProto& proto);

/// The data values of proto as double (every stored type converts exactly),
/// for files that are not a blob of a net: mean files, infogain matrices.
/// Their count must match proto's own shape (or legacy 4D dimensions) where
/// it has one; an empty vector when proto has no data. `what` names the file
/// in errors.
std::vector<double> BlobProtoData(const BlobProto& proto, const std::string& what);

}  // namespace cortado
