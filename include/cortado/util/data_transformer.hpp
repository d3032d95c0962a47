#pragma once
// Turns one Caffe Datum into one (C, H', W') image of the layer's Ftype, as
// Caffe's TransformationParameter describes:
//
//   out[c][h][w] = (x[c][h+h0][src_w] - mean[c][h+h0][src_w]) * scale
//   src_w = w + w0, or (W' - 1 - w) + w0 when the image is mirrored
//
// computed in math_t<T> (float for the 16-bit types, double for double) and rounded
// once into T.
//
// transform_param fields (defaults in brackets):
// - scale [1]: multiplies after the mean is subtracted.
// - mirror [false]: flips horizontally with probability 1/2 (in either phase,
//   as in Caffe; a TEST net normally leaves it off).
// - crop_size [0 = none]: crops crop_size x crop_size; a random offset at
//   TRAIN, the centre ((H - crop)/2, (W - crop)/2) at TEST.
// - mean_value (repeated): one value for all channels or one per channel.
// - mean_file: a BlobProto (binaryproto) of shape (1, C, H, W) matching the
//   uncropped record; cropping takes the mean at the same source pixels.
//   mean_file and mean_value together are an error.
// - force_color / force_gray [false]: decode encoded images as 3-channel BGR
//   or as 1 channel (both together are an error). Raw records ignore them.
//
// Records: `data` holds C*H*W raw uint8 in (C, H, W) order, or `float_data`
// holds C*H*W floats, or (encoded = true) `data` holds a PNG/JPEG file decoded
// with OpenCV (cv::imdecode, IMREAD_ANYCOLOR unless forced; the decoded
// channels are in OpenCV's BGR order). In a build without OpenCV an encoded
// record is an Error.
//
// Randomness: Transform draws from the generator it is given (crop offsets
// only at TRAIN); with no generator it takes the centre crop and never
// mirrors. Callers
// that need reproducible batches seed one generator per record from
// record_rng_seed(seed, record_index), so a resumed run sees identical images.
//
// Errors: bad parameters throw FieldError naming the layer and the field
// (transform_param.mean_file ...); a corrupt record (wrong size, undecodable
// image, a shape that differs from the first record) throws Error describing
// the record; the data layer adds the source path and the record's key.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cortado/common.hpp"
#include "cortado.pb.h"

namespace cortado {

/// A seed for the generator of the record at `index` of a stream seeded with `seed`.
uint64_t record_rng_seed(uint64_t seed, int64_t index);

class DataTransformer {
 public:
  /// Validates the parameters and loads the mean file. layer_name/layer_type
  /// name the owner in FieldError messages.
  DataTransformer(const TransformationParameter& param, Phase phase,
                  const std::string& layer_name = "", const std::string& layer_type = "DataTransformer");

  /// Decodes an encoded record (if needed) into raw (C, H, W) uint8 form.
  /// Raw and float records are returned as they are.
  Datum Decode(const Datum& datum) const;

  /// Output shape (C, H', W') of a record; checks crop_size, mean_value and
  /// mean_file against it (FieldError). Decodes encoded records to learn it.
  std::vector<int> InferShape(const Datum& datum) const;

  /// Writes the transformed record to out (count = product of InferShape).
  /// `expected` (C, H', W'): when not empty, a record of another shape is an Error.
  template <typename T>
  void Transform(const Datum& datum, T* out, std::mt19937* rng_or_null,
                 const std::vector<int>& expected = {}) const;

  /// Resizes every encoded record, once decoded, to height x width
  /// (bilinear, as Caffe's ImageData and convert_imageset do); 0, 0: never.
  void set_resize(int height, int width) {
    resize_height_ = height;
    resize_width_ = width;
  }

  const TransformationParameter& param() const { return param_; }
  Phase phase() const { return phase_; }

 private:
  template <typename... A>
  [[noreturn]] void field_error(const std::string& field, const A&... message) const;
  std::vector<int> RawShape(const Datum& datum) const;  // (C, H, W), checks the payload size
  void CheckAgainst(const std::vector<int>& raw_shape) const;
  template <typename T>
  void TransformRaw(const Datum& datum, const std::vector<int>& raw_shape, T* out,
                    std::mt19937* rng) const;

  TransformationParameter param_;
  Phase phase_;
  std::string layer_name_, layer_type_;
  std::vector<float> mean_;  // from mean_file, (C, H, W)
  std::vector<int> mean_shape_;
  int resize_height_ = 0, resize_width_ = 0;
};

}  // namespace cortado
