// DataTransformer's parameters and its checks of each record
// (data_transformer.hpp): transform_param validated and the mean file read
// at construction; a record's shape, payload and crop checked before it is
// transformed. Plan is in transform_plan.cpp, the decoding and the pixels in
// transform_record.cpp.
#include "cortado/data/data_transformer.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <climits>
#include <fstream>
#include <tuple>
#include <utility>

#include "cortado/io/blob_io.hpp"
#include "cortado/layer.hpp"

namespace cortado {

namespace {

// Mean files of large images exceed protobuf's default 64 MiB message limit.
bool read_binary_proto(const std::string& path, google::protobuf::Message* message) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  google::protobuf::io::IstreamInputStream raw(&in);
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT_MAX);
  return message->ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
}

std::string shape_text(const std::vector<int>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

// The name of the crop's field, for messages.
std::string crop_field(const TransformationParameter& p) {
  return p.crop_h() > 0 ? "transform_param.crop_h" : "transform_param.crop_size";
}

std::string crop_text(int h, int w) { return h == w ? str_cat(h) : str_cat(h, "x", w); }

}  // namespace

template <typename... A>
void DataTransformer::field_error(const std::string& field, const A&... message) const {
  throw FieldError(layer_name_, layer_type_, field, str_cat(message...));
}

DataTransformer::DataTransformer(const TransformationParameter& param, Phase phase,
                                 const std::string& layer_name, const std::string& layer_type)
    : param_(param), phase_(phase), layer_name_(layer_name), layer_type_(layer_type) {
  if (param_.force_color() && param_.force_gray()) {
    field_error("transform_param.force_gray", "force_color and force_gray cannot both be set");
  }
  if (param_.has_mean_file() && param_.mean_value_size() > 0) {
    field_error("transform_param.mean_file", "mean_file and mean_value cannot both be given");
  }
  ValidateAugmentation();
  if (!param_.has_mean_file()) return;
  const std::string& path = param_.mean_file();
  BlobProto proto;
  if (!read_binary_proto(path, &proto)) {
    field_error("transform_param.mean_file", "cannot read '", path, "' as a BlobProto (binaryproto)");
  }
  if (proto.has_shape()) {
    for (int64_t d : proto.shape().dim()) mean_shape_.push_back(static_cast<int>(d));
  } else {
    mean_shape_ = {proto.num(), proto.channels(), proto.height(), proto.width()};
  }
  // Accept (1, C, H, W) and (C, H, W).
  if (mean_shape_.size() == 4 && mean_shape_[0] == 1) mean_shape_.erase(mean_shape_.begin());
  if (mean_shape_.size() != 3) {
    field_error("transform_param.mean_file", "'", path, "' has shape ", shape_text(mean_shape_),
                ", expected (1, C, H, W)");
  }
  const int64_t count = int64_t{mean_shape_[0]} * mean_shape_[1] * mean_shape_[2];
  std::vector<double> values;  // data, double_data or NVCaffe's raw_data
  try {
    values = BlobProtoData(proto, str_cat("'", path, "'"));
  } catch (const Error& e) {
    field_error("transform_param.mean_file", e.what());
  }
  if (static_cast<int64_t>(values.size()) != count) {
    field_error("transform_param.mean_file", "'", path, "' holds ", values.size(), " values for shape ",
                shape_text(mean_shape_));
  }
  mean_.assign(values.begin(), values.end());
}

// The crop, the random resize and distort_param: the combinations NVCaffe
// CHECKs (or leaves undefined) are FieldErrors here.
void DataTransformer::ValidateAugmentation() {
  const TransformationParameter& p = param_;
  const std::string t = "transform_param.";
  if (p.forward_packing() == NHWC) {
    field_error(t + "forward_packing", "NHWC is not supported: Cortado's data layers write NCHW "
                "(leave forward_packing unset or NCHW)");
  }
  if (p.has_crop_h() != p.has_crop_w() || (p.crop_h() > 0) != (p.crop_w() > 0)) {
    field_error(t + (p.crop_h() > 0 || p.has_crop_h() ? "crop_w" : "crop_h"),
                "crop_h and crop_w go together (got crop_h = ", p.crop_h(), ", crop_w = ", p.crop_w(), ")");
  }
  if (p.crop_h() > 0 && p.crop_size() > 0) {
    field_error(t + "crop_size", "= ", p.crop_size(), " is also given with crop_h = ", p.crop_h(),
                " and crop_w = ", p.crop_w(), "; give crop_size (square) or crop_h and crop_w");
  }
  for (uint32_t v : {p.crop_size(), p.crop_h(), p.crop_w()}) {
    if (v > (1u << 16)) field_error(t + "crop_size", "the crop ", v, " is too large");
  }
  crop_h_ = static_cast<int>(p.crop_h() > 0 ? p.crop_h() : p.crop_size());
  crop_w_ = static_cast<int>(p.crop_w() > 0 ? p.crop_w() : p.crop_size());

  const uint32_t lower = p.img_rand_resize_lower(), upper = p.img_rand_resize_upper();
  if ((lower > 0) != (upper > 0)) {
    field_error(t + (lower > 0 ? "img_rand_resize_upper" : "img_rand_resize_lower"),
                "img_rand_resize_lower and img_rand_resize_upper go together (got ", lower, " and ", upper, ")");
  }
  if (upper < lower) {
    field_error(t + "img_rand_resize_upper", "= ", upper, " is less than img_rand_resize_lower = ", lower);
  }
  if (upper > (1u << 16)) field_error(t + "img_rand_resize_upper", "is too large: ", upper);
  const char* enabled_by = lower > 0                        ? "img_rand_resize_lower"
                           : p.has_rand_resize_ratio_lower()  ? "rand_resize_ratio_lower"
                           : p.has_rand_resize_ratio_upper()  ? "rand_resize_ratio_upper"
                           : p.has_vertical_stretch_lower()   ? "vertical_stretch_lower"
                           : p.has_vertical_stretch_upper()   ? "vertical_stretch_upper"
                           : p.has_horizontal_stretch_lower() ? "horizontal_stretch_lower"
                           : p.has_horizontal_stretch_upper() ? "horizontal_stretch_upper"
                                                              : nullptr;
  random_resize_ = enabled_by != nullptr;
  for (const auto& [name, v] : {std::pair<const char*, float>{"rand_resize_ratio_upper", p.rand_resize_ratio_upper()},
                                {"vertical_stretch_upper", p.vertical_stretch_upper()},
                                {"horizontal_stretch_upper", p.horizontal_stretch_upper()}}) {
    if (!(v <= 64.f)) field_error(t + name, "is too large: ", v, " (at most 64)");
  }
  ValidateRandomResizedCrop(enabled_by);
  if (random_resize_ && crop_h_ == 0) {
    field_error(t + enabled_by, "NVCaffe's random resize needs a crop (crop_size, or crop_h and crop_w): "
                "the resized images differ in size");
  }
  if (p.has_distort_param()) {
    const DistortionParameter& d = p.distort_param();
    const std::string f = t + "distort_param.";
    if (d.brightness_prob() > 0 && !(d.brightness_delta() >= 0)) {
      field_error(f + "brightness_delta", "= ", d.brightness_delta(), " must be non-negative");
    }
    if (d.hue_prob() > 0 && !(d.hue_delta() >= 0)) {
      field_error(f + "hue_delta", "= ", d.hue_delta(), " must be non-negative");
    }
    for (const auto& [name, prob, lo, hi] :
         {std::tuple<const char*, float, float, float>{"contrast", d.contrast_prob(), d.contrast_lower(),
                                                       d.contrast_upper()},
          {"saturation", d.saturation_prob(), d.saturation_lower(), d.saturation_upper()}}) {
      if (!(prob > 0)) continue;
      if (!(lo >= 0)) field_error(f + name + "_lower", "= ", lo, " must be non-negative");
      if (!(hi >= lo)) field_error(f + name + "_upper", "= ", hi, " is less than ", name, "_lower = ", lo);
    }
  }
#ifndef CORTADO_USE_OPENCV
  if (random_resize_)
    field_error(t + enabled_by, "NVCaffe's random resize needs OpenCV (configure with USE_OPENCV=ON)");
  if (p.has_distort_param()) field_error(t + "distort_param", "needs OpenCV (configure with USE_OPENCV=ON)");
#endif
}

// rand_crop_*: torchvision's ranges, a crop to resize to, and not with
// NVCaffe's random resize.
void DataTransformer::ValidateRandomResizedCrop(const char* random_resize_field) {
  const TransformationParameter& p = param_;
  const std::string t = "transform_param.";
  const float a0 = p.rand_crop_area_lower(), a1 = p.rand_crop_area_upper();
  const float r0 = p.rand_crop_ratio_lower(), r1 = p.rand_crop_ratio_upper();
  if (!(a0 >= 0.f && a0 <= 1.f)) field_error(t + "rand_crop_area_lower", "= ", a0, " must be in [0, 1] (0: off)");
  if (a0 == 0.f) {
    for (const auto& [name, set] : {std::pair<const char*, bool>{"rand_crop_area_upper", p.has_rand_crop_area_upper()},
                                    {"rand_crop_ratio_lower", p.has_rand_crop_ratio_lower()},
                                    {"rand_crop_ratio_upper", p.has_rand_crop_ratio_upper()}}) {
      if (set) {
        field_error(t + name, "is set, but the random-resized crop is off (rand_crop_area_lower is 0; "
                    "torchvision's default is 0.08)");
      }
    }
    return;
  }
  if (!(a1 >= a0 && a1 <= 1.f)) {
    field_error(t + "rand_crop_area_upper", "= ", a1, " must be in [rand_crop_area_lower = ", a0, ", 1]");
  }
  if (!(r0 > 0.f && r0 <= 64.f)) field_error(t + "rand_crop_ratio_lower", "= ", r0, " must be in (0, 64]");
  if (!(r1 >= r0 && r1 <= 64.f)) {
    field_error(t + "rand_crop_ratio_upper", "= ", r1, " must be in [rand_crop_ratio_lower = ", r0, ", 64]");
  }
  if (crop_h_ == 0) {
    field_error(t + "rand_crop_area_lower", "the random-resized crop needs crop_size (or crop_h and crop_w): "
                "the size it resizes its window to");
  }
  if (random_resize_field) {
    field_error(t + "rand_crop_area_lower", "the random-resized crop and NVCaffe's random resize (",
                random_resize_field, ") cannot both be on");
  }
  rand_crop_ = phase_ == TRAIN;
}

std::vector<int> DataTransformer::RawShape(const Datum& d) const {
  const int64_t C = d.channels(), H = d.height(), W = d.width();
  if (C <= 0 || H <= 0 || W <= 0) {
    fail("record has shape (", C, ", ", H, ", ", W, "): every dimension must be positive");
  }
  const int64_t count = C * H * W;
  if (!d.data().empty()) {
    if (static_cast<int64_t>(d.data().size()) != count) {
      fail("record holds ", d.data().size(), " bytes of data, expected C*H*W = ", C, "*", H, "*", W,
           " = ", count);
    }
  } else if (d.float_data_size() > 0) {
    if (d.float_data_size() != count) {
      fail("record holds ", d.float_data_size(), " float_data values, expected C*H*W = ", C, "*", H,
           "*", W, " = ", count);
    }
  } else {
    fail("record holds neither data nor float_data");
  }
  return {static_cast<int>(C), static_cast<int>(H), static_cast<int>(W)};
}

void DataTransformer::CheckAgainst(const std::vector<int>& s, bool floats) const {
  // With allow_upscale a random resize makes every image at least the crop.
  // The random-resized crop enlarges windows smaller than the crop.
  if (crop_h_ > 0 && !(random_resize_ && param_.allow_upscale()) && !rand_crop_) CheckCropFits(s[1], s[2]);
  const int nmean = param_.mean_value_size();
  if (nmean > 1 && nmean != s[0]) {
    field_error("transform_param.mean_value", "has ", nmean,
                " values; give one, or one per channel (", s[0], ")");
  }
  if (!mean_shape_.empty()) {
    if (random_resize_ || rand_crop_) {
      if (mean_shape_[0] != s[0] || mean_shape_[1] < crop_h_ || mean_shape_[2] < crop_w_) {
        field_error("transform_param.mean_file", "'", param_.mean_file(), "' has shape ", shape_text(mean_shape_),
                    "; with a random resize its centre ", crop_text(crop_h_, crop_w_),
                    " window is subtracted, so it needs ", s[0], " channels and at least that size");
      }
    } else if (mean_shape_ != s) {
      field_error("transform_param.mean_file", "'", param_.mean_file(), "' has shape ",
                  shape_text(mean_shape_), " but the records are ", shape_text(s));
    }
  }
  if (floats && (random_resize_ || param_.has_distort_param())) {
    field_error(random_resize_ ? "transform_param.img_rand_resize_lower" : "transform_param.distort_param",
                "NVCaffe's random resize and distort_param work on 8-bit images; this record holds float_data");
  }
  if (param_.has_distort_param() && s[0] != 3) {
    const DistortionParameter& d = param_.distort_param();
    for (const auto& [name, prob] : {std::pair<const char*, float>{"saturation_prob", d.saturation_prob()},
                                     {"hue_prob", d.hue_prob()},
                                     {"random_order_prob", d.random_order_prob()}}) {
      if (prob > 0) {
        field_error(std::string("transform_param.distort_param.") + name, "= ", prob,
                    " needs 3-channel (BGR) images; the records have ", s[0]);
      }
    }
  }
}

std::vector<int> DataTransformer::OutputShape(const std::vector<int>& s) const {
  return crop_h_ > 0 ? std::vector<int>{s[0], crop_h_, crop_w_} : s;
}

void DataTransformer::CheckCropFits(int height, int width) const {
  if (crop_h_ > height || crop_w_ > width) {
    field_error(crop_field(param_), crop_text(crop_h_, crop_w_), " is larger than the ", height, "x", width,
                " image");
  }
}

void DataTransformer::CheckRecord(const std::vector<int>& raw, bool floats, const std::vector<int>& expected) const {
  CheckAgainst(raw, floats);
  const std::vector<int> shape = OutputShape(raw);
  if (!expected.empty() && shape != expected) {
    fail("record gives an image of shape ", shape_text(shape), ", but the first record gave ",
         shape_text(expected), " (all records must have the same size, or use a crop)");
  }
}

}  // namespace cortado
