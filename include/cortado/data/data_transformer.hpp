#pragma once
// Turns one Caffe Datum into one (C, H', W') image of the layer's Ftype, as
// Caffe's and NVCaffe's TransformationParameter describe. The steps, in
// order (NVCaffe's order):
//
//   1. decode (encoded records), then ImageData's fixed resize (set_resize,
//      set_short_side)
//   2. distort_param: photometric distortions of the 8-bit BGR image
//   3. NVCaffe's random resize (img_rand_resize_*, rand_resize_ratio_*,
//      *_stretch_*), or the random-resized crop (rand_crop_*, below), which
//      does steps 3 and 4 in one resampling pass
//   4. crop (crop_size, or crop_h x crop_w), mirror, mean, scale:
//        out[c][h][w] = (x[c][h+h0][src_w] - mean[c][mh+h][msrc_w]) * scale
//        src_w = w + w0, or (W' - 1 - w) + w0 when the image is mirrored
//      computed in math_t<T> (float for the 16-bit types, double for double)
//      and rounded once into T.
//
// transform_param fields (defaults in brackets):
// - scale [1]: multiplies after the mean is subtracted.
// - mirror [false]: flips horizontally with probability 1/2 (in either phase,
//   as in Caffe; a TEST net normally leaves it off).
// - crop_size [0 = none]: crops crop_size x crop_size; a random offset at
//   TRAIN, the centre ((H - crop)/2, (W - crop)/2) at TEST.
// - crop_h, crop_w [0]: NVCaffe's crop of crop_h rows x crop_w columns, placed
//   as crop_size's. Both or neither, and not with crop_size (FieldError).
// - mean_value (repeated): one value for all channels or one per channel.
// - mean_file: a BlobProto (binaryproto) of shape (1, C, H, W). Without a
//   random resize it must match the record and cropping takes the mean at
//   the same source pixels (Caffe); with one (the images then vary in size)
//   its centre crop_h x crop_w window is subtracted (NVCaffe's rule).
//   mean_file and mean_value together are an error.
// - force_color / force_gray [false]: decode encoded images as 3-channel BGR
//   or as 1 channel (both together are an error). Raw records ignore them.
// - random_seed [-1]: NVCaffe's seed of the transformer. The transformer
//   draws from the generator its caller gives; the data layers seed it from
//   this value (>= 0) instead of the layer's seed (data_layer.hpp).
// - forward_packing [NCHW]: NHWC is a FieldError (Cortado's data layers
//   write NCHW).
//
// NVCaffe's random resize (step 3) is on when img_rand_resize_lower or
// _upper is non-zero or any of rand_resize_ratio_*, vertical_stretch_*,
// horizontal_stretch_* is set (NVCaffe's rule, also at TEST: NVCaffe's TEST
// layers use lower = upper as a fixed resize). For an H x W image:
//   s = min(H, W), or lower + Rand(upper - lower + 1) when both are > 0
//       (upper < lower, or only one of them > 0, is a FieldError)
//   f = s / H if W >= H, else s / W;  fh = f * H, fw = f * W   (float)
//   if ratio_lower >= 1 and ratio_upper > 1 (NVCaffe: smaller values are
//     ignored): r = Rand(ratio_lower, ratio_upper) and the longer side becomes
//     r times the shorter (fw = fh * r if fw > fh, fh = fw * r if fh > fw; a
//     square picks the side with Rand(2)). An aspect ratio, not an area.
//   if both vertical_stretch_* > 0: fh *= Rand(vertical_stretch_lower, _upper)
//   if both horizontal_stretch_* > 0: fw *= Rand(horizontal_stretch_lower, _upper)
//   new_h = max(crop_h, lround(fh)), new_w = max(crop_w, lround(fw))
//   allow_upscale [false]: false clamps new_h to H and new_w to W
// and the image is resized (cv::resize) to new_h x new_w unless that is its
// size, with interpolation_algo_down [INTER_NEAREST] when neither side
// grows, interpolation_algo_up [INTER_CUBIC] otherwise. Rand(n) is a draw
// modulo n; Rand(a, b) is a (a == b, without a draw) or
// lo + (hi - lo) * u / (2^32 - 1) for a 32-bit draw u. A random resize needs
// a crop (the resized images differ in size; FieldError without one).
//
// The random-resized crop (the Inception/ResNet recipe; torchvision's
// RandomResizedCrop) is on at TRAIN when rand_crop_area_lower > 0 (at TEST
// the fields are accepted and the crop is the centre crop). With
// a = [rand_crop_area_lower, rand_crop_area_upper] (default upper 1, both in
// (0, 1]) and r = [rand_crop_ratio_lower, rand_crop_ratio_upper] (default
// [3/4, 4/3], 0 < lower <= upper), for an H x W image, up to 10 tries of
//   area = H * W * U[a_lo, a_hi);  ratio = exp(U[log r_lo, log r_hi))
//   w = lround(sqrt(area * ratio)), h = lround(sqrt(area / ratio))
// until 0 < h <= H and 0 < w <= W; then h0 = Rand(H - h + 1) and
// w0 = Rand(W - w + 1). When no try fits, torchvision's fallback: the
// centred window of the whole image clipped to the ratio range (W / H < r_lo:
// w = W, h = lround(W / r_lo); W / H > r_hi: h = H, w = lround(H * r_hi);
// else the whole image). Without a generator: area and log-ratio at their
// midpoints, the window centred (or the fallback when that does not fit).
// The window is resampled to crop_h x crop_w (crop_size or crop_h/crop_w,
// required), mirrored, mean-subtracted and scaled in one pass, in
// math_t<T>, rounded once into T:
//   out[c][y][x] = (bilinear(img_c, sy(y), sx(x')) - mean[c][..]) * scale
//   x' = crop_w - 1 - x when mirrored, else x
//   sy(y) = (h0 + (y + 0.5) * h / crop_h) * s - 0.5,
//   sx(x') = (w0 + (x' + 0.5) * w / crop_w) * s - 0.5
// in the pixels of the image scaled by s (s = 1, or a JPEG's DCT scale
// below); bilinear: the two nearest pixels on each axis, linearly weighted,
// clamped at the image's border (OpenCV's INTER_LINEAR geometry). A
// mean_file's centre crop_h x crop_w window is subtracted (as with NVCaffe's
// random resize), at x'. Images smaller than the crop are enlarged.
// Bilinear sees every source pixel while it shrinks by at most 2; JPEG
// records shrink by less than 2 after the DCT scale, other records (raw, PNG)
// by whatever the window asks. Not with NVCaffe's random resize (FieldError);
// distort_param applies to the decoded pixels before the resampling.
//
// distort_param (step 2; NVCaffe/SSD's ApplyDistort, in either phase when
// set): with p = U[0,1), the order is brightness, contrast, saturation, hue
// when p > 0.5, else brightness, saturation, hue, contrast; then the channel
// reordering. Each step draws q = U[0,1) and acts when q < its probability:
// - brightness (brightness_prob, brightness_delta >= 0): adds
//   d = U[-delta, delta) to every value (saturating, rounded; skipped if d = 0)
// - contrast (contrast_prob, 0 <= contrast_lower <= contrast_upper):
//   multiplies every value by U[lower, upper) (skipped within 1e-3 of 1)
// - saturation (saturation_prob, saturation_lower/upper likewise): multiplies
//   the S channel of OpenCV's 8-bit HSV by U[lower, upper) (the HSV round
//   trip happens even for a factor of 1, as in NVCaffe)
// - hue (hue_prob, hue_delta >= 0): adds U[-delta, delta) to the H channel
//   of OpenCV's 8-bit HSV (units of 2 degrees, H in [0, 180); saturating at
//   0 and 255 as NVCaffe's convertTo does, not wrapping)
// - random_order_prob: permutes the three channels (a Fisher-Yates shuffle
//   from the record's generator; NVCaffe's std::random_shuffle order is not
//   reproducible anyway)
// U[a, b) = a + (b - a) * u / 2^32. Saturation, hue and reordering need
// 3-channel images; a 1-channel record is a FieldError when their
// probability is above 0.
// Distortion and random resize need 8-bit records (raw `data` or encoded);
// a float_data record is a FieldError naming the field.
//
// Records: `data` holds C*H*W raw uint8 in (C, H, W) order, or `float_data`
// holds C*H*W floats, or (encoded = true) `data` holds a PNG/JPEG file decoded
// with OpenCV (cv::imdecode, IMREAD_ANYCOLOR unless forced; the decoded
// channels are in OpenCV's BGR order). In a build without OpenCV an encoded
// record, distort_param and the random resize are errors.
//
// JPEG records, in a build with libjpeg-turbo (CMake says which decoder it
// found; data/jpeg_decode.hpp), are decoded by libjpeg directly, which
// without OpenCV is the only decoder, and with it gives the same pixels as
// cv::imdecode. Without a fixed resize (set_resize, set_short_side) or
// NVCaffe's random resize, only what the output needs is decoded:
// - a fixed crop: the crop's rows and columns, at full scale; the output is
//   bit-identical to decoding the whole image;
// - the random-resized crop: the rows and columns the bilinear taps read,
//   at the smallest DCT scale s/8 of 1/8, 1/4, 1/2, 1 at which the window
//   still covers the crop (h * s / 8 >= crop_h and w * s / 8 >= crop_w;
//   jpeg_scale_for). At s = 8 the output is bit-identical to decoding the
//   whole image; at smaller s the DCT makes the first reduction (it averages
//   like an area filter), so the output differs from bilinear on the full
//   decode by a few levels (tests/data/data_transformer_test.cpp states the
//   tolerances).
// CMYK JPEGs and JPEGs with an EXIF orientation are left to OpenCV (which
// rotates them), as are other formats.
//
// Randomness: every random choice is drawn by Plan, in NVCaffe's order
// (distortion, resize or the random-resized crop's window, crop offsets h0
// then w0, mirror), from the generator
// Transform is given; crop offsets are random only at TRAIN. With no
// generator: no distortion, each resize range takes its midpoint, the centre
// crop, never mirrored. Callers that need reproducible batches seed one
// generator per record from record_rng_seed(seed, record_index), so a
// resumed run sees identical images.
//
// Errors: bad parameters throw FieldError naming the layer and the field
// (transform_param.mean_file ...); a corrupt record (wrong size, undecodable
// image, a shape that differs from the first record) throws Error describing
// the record; the data layer adds the source path and the record's key.

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cortado/common.hpp"
#include "cortado.pb.h"

namespace cortado {

/// A seed for the generator of the record at `index` of a stream seeded with `seed`.
uint64_t record_rng_seed(uint64_t seed, int64_t index);

/// The random choices of one record (DataTransformer::Plan), in the order
/// they are drawn and applied.
struct TransformPlan {
  /// distort_param; `on` is false without one.
  struct Distortion {
    bool on = false;
    bool contrast_last = false;  // p <= 0.5: brightness, saturation, hue, contrast
    bool brightness = false, contrast = false, saturation = false, hue = false, reorder = false;
    float brightness_delta = 0, contrast_factor = 1, saturation_factor = 1, hue_delta = 0;
    std::array<int, 3> order{0, 1, 2};  // reorder: output channel k is input channel order[k]
  } distort;
  int resize_h = 0, resize_w = 0;  // the random resize's size; 0: none (the image keeps its size)
  int crop_h0 = 0, crop_w0 = 0;    // in the (resized) image
  // The random-resized crop's window, in the image; window_h = 0: none
  // (then crop_h0, crop_w0 place the crop).
  int window_h0 = 0, window_w0 = 0, window_h = 0, window_w = 0;
  bool mirror = false;
};

class DataTransformer {
 public:
  /// Validates the parameters and loads the mean file. layer_name/layer_type
  /// name the owner in FieldError messages.
  DataTransformer(const TransformationParameter& param, Phase phase,
                  const std::string& layer_name = "", const std::string& layer_type = "DataTransformer");

  /// Decodes an encoded record (if needed) into raw (C, H, W) uint8 form,
  /// after the fixed resize of set_resize/set_short_side. Raw and float
  /// records are returned as they are.
  Datum Decode(const Datum& datum) const;

  /// Output shape (C, H', W') of a record; checks the crop, mean_value,
  /// mean_file and distort_param against it (FieldError). Decodes encoded
  /// records to learn it.
  std::vector<int> InferShape(const Datum& datum) const;

  /// Writes the transformed record to out (count = product of InferShape).
  /// `expected` (C, H', W'): when not empty, a record of another shape is an Error.
  template <typename T>
  void Transform(const Datum& datum, T* out, std::mt19937* rng_or_null,
                 const std::vector<int>& expected = {}) const;
  /// Transform, written channels last where `channels_last`: out (H', W', C),
  /// the order of a Data layer's NHWC batch (net_layout.hpp), the values
  /// moved; `expected` (C, H', W') is then required.
  template <typename T>
  void Transform(const Datum& datum, T* out, std::mt19937* rng_or_null, const std::vector<int>& expected,
                 bool channels_last) const;

  /// The random choices Transform makes for an image of height x width
  /// (after decoding and the fixed resize), drawn from `rng_or_null` as
  /// Transform draws them: Transform(d, out, g) equals applying
  /// Plan(H, W, g') for g' a copy of g.
  TransformPlan Plan(int height, int width, std::mt19937* rng_or_null) const;

  /// Resizes every encoded record, once decoded, to height x width
  /// (bilinear, as Caffe's ImageData and convert_imageset do); 0, 0: never.
  void set_resize(int height, int width) {
    resize_height_ = height;
    resize_width_ = width;
  }
  /// NVCaffe's ImageData short_side: resizes every encoded record, once
  /// decoded, so that its shorter side is `side` (bilinear; the longer side
  /// becomes longer * side / shorter, rounded down); takes precedence over
  /// set_resize. 0: never.
  void set_short_side(int side) { short_side_ = side; }

  /// Whether NVCaffe's random resize (step 3) is on.
  bool random_resize() const { return random_resize_; }
  /// Whether the random-resized crop is on (rand_crop_area_lower > 0 at TRAIN).
  bool random_resized_crop() const { return rand_crop_; }
  /// The crop (rows, columns); (0, 0) without one.
  int crop_h() const { return crop_h_; }
  int crop_w() const { return crop_w_; }

  const TransformationParameter& param() const { return param_; }
  Phase phase() const { return phase_; }

 private:
  struct Image;  // one record's pixels, planar or an OpenCV image
  template <typename... A>
  [[noreturn]] void field_error(const std::string& field, const A&... message) const;
  void ValidateAugmentation();
  void ValidateRandomResizedCrop(const char* random_resize_field);  // null: NVCaffe's resize is off
  std::vector<int> RawShape(const Datum& datum) const;  // (C, H, W), checks the payload size
  /// Checks the crop, the mean, distort_param against a record's (C, H, W);
  /// `floats`: the record holds float_data.
  void CheckAgainst(const std::vector<int>& raw_shape, bool floats) const;
  /// A FieldError naming the crop field when the crop is larger than a
  /// height x width image.
  void CheckCropFits(int height, int width) const;
  std::vector<int> OutputShape(const std::vector<int>& raw_shape) const;  // after the crop
  /// CheckAgainst, then the output shape against `expected` (Error).
  void CheckRecord(const std::vector<int>& raw_shape, bool floats, const std::vector<int>& expected) const;
  Image Load(const Datum& datum) const;  // decoded and fixed-resized
  void Augment(const TransformPlan& plan, Image* image) const;  // steps 2 and 3
  /// Step 4 from an image that holds the rows and columns from (h0, w0) on
  /// of the planned one (a decoded region: the crop only).
  template <typename T>
  void WritePixels(const Image& image, const TransformPlan& plan, T* out, int h0 = 0, int w0 = 0) const;
  /// The random-resized crop's resampling pass (plan.window_h > 0) from an
  /// image that is the scaled image's rows and columns from (h0, w0) on;
  /// scale: the DCT scale in eighths (8: none); height, width: the image's
  /// size before any scaling.
  template <typename T>
  void WriteResampled(const Image& image, const TransformPlan& plan, int scale, int height, int width, T* out,
                      int h0 = 0, int w0 = 0) const;
  /// Transform for a JPEG record decoded by libjpeg, only the part the plan
  /// needs; false, having drawn nothing, when the record is left to Load.
  template <typename T>
  bool TransformJpeg(const Datum& datum, T* out, std::mt19937* rng, const std::vector<int>& expected) const;

  TransformationParameter param_;
  Phase phase_;
  std::string layer_name_, layer_type_;
  std::vector<float> mean_;  // from mean_file, (C, H, W)
  std::vector<int> mean_shape_;
  int resize_height_ = 0, resize_width_ = 0, short_side_ = 0;
  int crop_h_ = 0, crop_w_ = 0;
  bool random_resize_ = false;
  bool rand_crop_ = false;  // the random-resized crop (TRAIN)
};

}  // namespace cortado
