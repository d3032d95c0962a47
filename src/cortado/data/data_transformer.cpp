#include "cortado/data/data_transformer.hpp"
#include "cortado/util/math.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <fstream>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cortado/bfloat16.hpp"
#include "cortado/data/jpeg_decode.hpp"
#include "cortado/io/blob_io.hpp"
#include "cortado/layer.hpp"
#include "transform_pixels.hpp"

#ifdef CORTADO_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace cortado {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

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

// The draws of Plan. All are built from the generator's raw 32-bit output
// (not std::*_distribution), so a plan is the same with every standard
// library; without a generator each takes the value documented in the header.
class Draws {
 public:
  explicit Draws(std::mt19937* rng) : rng_(rng) {}
  bool random() const { return rng_ != nullptr; }
  uint32_t raw() { return static_cast<uint32_t>((*rng_)()); }
  /// NVCaffe's Rand(n): a draw modulo n; the midpoint without a generator.
  int below(int n) { return rng_ ? static_cast<int>(raw() % static_cast<uint32_t>(n)) : (n - 1) / 2; }
  /// NVCaffe's Rand(a, b): a when a == b (no draw), else lo + (hi - lo) * u / UINT_MAX.
  float range(float a, float b) {
    if (a == b) return a;
    const double lo = std::min(a, b), hi = std::max(a, b);
    if (!rng_) return static_cast<float>((lo + hi) / 2);
    return static_cast<float>(lo + (hi - lo) * static_cast<double>(raw()) / static_cast<double>(UINT_MAX));
  }
  /// U[a, b) = a + (b - a) * u / 2^32 (NVCaffe's caffe_rng_uniform on [0, 1) and ranges).
  float uniform(float a, float b) {
    return static_cast<float>(a + (static_cast<double>(b) - a) * (static_cast<double>(raw()) / 4294967296.0));
  }

 private:
  std::mt19937* rng_;
};

#ifdef CORTADO_USE_OPENCV
int cv_interpolation(TransformationParameter::InterpolationAlgo a) {
  switch (a) {
    case TransformationParameter::INTER_NEAREST: return cv::INTER_NEAREST;
    case TransformationParameter::INTER_LINEAR: return cv::INTER_LINEAR;
    case TransformationParameter::INTER_CUBIC: return cv::INTER_CUBIC;
    case TransformationParameter::INTER_AREA: return cv::INTER_AREA;
  }
  return cv::INTER_LINEAR;
}

// Runs `adjust` on one channel of the image's 8-bit HSV form (NVCaffe's
// AdjustSaturation / AdjustHue: BGR -> HSV, change, HSV -> BGR).
template <typename F>
void adjust_hsv_channel(cv::Mat* img, int channel, F adjust) {
  cv::Mat hsv;
  cv::cvtColor(*img, hsv, cv::COLOR_BGR2HSV);
  std::vector<cv::Mat> planes;
  cv::split(hsv, planes);
  adjust(&planes[static_cast<size_t>(channel)]);
  cv::merge(planes, hsv);
  cv::cvtColor(hsv, *img, cv::COLOR_HSV2BGR);
}
#endif

}  // namespace

uint64_t record_rng_seed(uint64_t seed, int64_t index) {
  return splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(index));
}

// One record's pixels: planar (C, H, W) in the Datum's storage (raw bytes or
// float_data), or an interleaved (H, W, C) 8-bit OpenCV image.
struct DataTransformer::Image {
  int C = 0, H = 0, W = 0;
  bool interleaved = false;
  const uint8_t* bytes = nullptr;
  const float* floats = nullptr;
  std::vector<uint8_t> storage;  // owns the pixels of a libjpeg decode (interleaved)
  void SetInterleaved(int c, int h, int w, const uint8_t* pixels) {
    C = c;
    H = h;
    W = w;
    interleaved = true;
    bytes = pixels;
    floats = nullptr;
  }
#ifdef CORTADO_USE_OPENCV
  cv::Mat mat;  // owns the pixels when interleaved
  void SetMat(cv::Mat m) {
    if (!m.isContinuous()) m = m.clone();
    mat = std::move(m);
    C = mat.channels();
    H = mat.rows;
    W = mat.cols;
    interleaved = true;
    bytes = mat.ptr<uint8_t>(0);
    floats = nullptr;
  }
#endif
};

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

namespace {

// The name of the crop's field, for messages.
std::string crop_field(const TransformationParameter& p) {
  return p.crop_h() > 0 ? "transform_param.crop_h" : "transform_param.crop_size";
}

std::string crop_text(int h, int w) { return h == w ? str_cat(h) : str_cat(h, "x", w); }

}  // namespace

DataTransformer::Image DataTransformer::Load(const Datum& datum) const {
  Image image;
  if (!datum.encoded()) {
    const std::vector<int> s = RawShape(datum);
    image.C = s[0];
    image.H = s[1];
    image.W = s[2];
    if (!datum.data().empty()) {
      image.bytes = reinterpret_cast<const uint8_t*>(datum.data().data());
    } else {
      image.floats = datum.float_data().data();
    }
    return image;
  }
  const std::string& bytes = datum.data();
#ifdef CORTADO_USE_LIBJPEG
  // The whole image; bit-identical to cv::imdecode (jpeg_decode.hpp).
  const bool fixed_resize = short_side_ > 0 || (resize_height_ > 0 && resize_width_ > 0);
  if (is_jpeg(bytes)) {
    JpegInfo info;
    const int channels = param_.force_color() ? 3 : param_.force_gray() ? 1 : 0;
    if (decode_jpeg(bytes, channels, [&](const JpegInfo& i, JpegRegion*) { info = i; }, &image.storage)) {
      const int C = static_cast<int>(image.storage.size() / (size_t{1} * info.height * info.width));
      image.SetInterleaved(C, info.height, info.width, image.storage.data());
      if (!fixed_resize) return image;
#ifndef CORTADO_USE_OPENCV
      fail("ImageData's resize (new_height/new_width/short_side) needs OpenCV (configure with USE_OPENCV=ON)");
#endif
    }
  }
#endif
#ifdef CORTADO_USE_OPENCV
  int flags = cv::IMREAD_ANYCOLOR;
  if (param_.force_color()) flags = cv::IMREAD_COLOR;
  if (param_.force_gray()) flags = cv::IMREAD_GRAYSCALE;
  cv::Mat img;
  if (image.interleaved) {
    img = cv::Mat(image.H, image.W, CV_8UC(image.C), image.storage.data());
  } else if (!bytes.empty()) {
    const cv::Mat buf(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
    try {
      img = cv::imdecode(buf, flags);
    } catch (const cv::Exception& e) {
      fail("cannot decode the encoded image (", bytes.size(), " bytes): ", e.what());
    }
  }
  if (img.empty()) fail("cannot decode the encoded image (", bytes.size(), " bytes)");
  if (img.depth() != CV_8U) fail("decoded image is not 8-bit");
  int height = resize_height_, width = resize_width_;
  if (short_side_ > 0) {  // NVCaffe's integer rule: longer * side / shorter
    if (img.rows > img.cols) {
      width = short_side_;
      height = static_cast<int>(int64_t{img.rows} * short_side_ / img.cols);
    } else {
      height = short_side_;
      width = static_cast<int>(int64_t{img.cols} * short_side_ / img.rows);
    }
  }
  if (height > 0 && width > 0 && (img.rows != height || img.cols != width)) {
    cv::Mat out;
    cv::resize(img, out, cv::Size(width, height), 0, 0, cv::INTER_LINEAR);
    img = out;
  }
  if (img.data == image.storage.data()) return image;  // a libjpeg decode of the requested size
  image.SetMat(std::move(img));
  image.storage.clear();
  return image;
#else
  fail("the record is an encoded image other than a JPEG that libjpeg decodes, but this build has no OpenCV "
       "(configure with USE_OPENCV=ON)");
#endif
}

Datum DataTransformer::Decode(const Datum& datum) const {
  if (!datum.encoded()) return datum;
  const Image image = Load(datum);
  const int C = image.C, H = image.H, W = image.W;
  Datum out;
  out.set_channels(C);
  out.set_height(H);
  out.set_width(W);
  out.set_label(datum.label());
  std::string planar(static_cast<size_t>(C) * H * W, '\0');
  // (H, W, C) interleaved -> (C, H, W) planar.
  for (int h = 0; h < H; ++h)
    for (int w = 0; w < W; ++w)
      for (int c = 0; c < C; ++c)
        planar[(static_cast<size_t>(c) * H + h) * W + w] =
            static_cast<char>(image.bytes[(static_cast<size_t>(h) * W + w) * C + c]);
  out.set_data(std::move(planar));
  return out;
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
  if (crop_h_ > 0 && !(random_resize_ && param_.allow_upscale()) && !rand_crop_ &&
      (crop_h_ > s[1] || crop_w_ > s[2])) {
    field_error(crop_field(param_), crop_text(crop_h_, crop_w_), " is larger than the ", s[1], "x", s[2], " image");
  }
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

std::vector<int> DataTransformer::InferShape(const Datum& datum) const {
  const Image image = Load(datum);
  const std::vector<int> s{image.C, image.H, image.W};
  CheckAgainst(s, image.floats != nullptr);
  return OutputShape(s);
}

namespace {

// distort_param's draws, in the order NVCaffe's ApplyDistort makes them.
void plan_distortion(const DistortionParameter& d, Draws* draw, TransformPlan::Distortion* out) {
  out->on = true;
  out->contrast_last = !(draw->uniform(0.f, 1.f) > 0.5f);
  auto chosen = [&](float prob) { return draw->uniform(0.f, 1.f) < prob; };
  if (chosen(d.brightness_prob())) {
    out->brightness = true;
    out->brightness_delta = draw->uniform(-d.brightness_delta(), d.brightness_delta());
  }
  auto contrast = [&] {
    if (chosen(d.contrast_prob())) {
      out->contrast = true;
      out->contrast_factor = draw->uniform(d.contrast_lower(), d.contrast_upper());
    }
  };
  if (!out->contrast_last) contrast();
  if (chosen(d.saturation_prob())) {
    out->saturation = true;
    out->saturation_factor = draw->uniform(d.saturation_lower(), d.saturation_upper());
  }
  if (chosen(d.hue_prob())) {
    out->hue = true;
    out->hue_delta = draw->uniform(-d.hue_delta(), d.hue_delta());
  }
  if (out->contrast_last) contrast();
  if (chosen(d.random_order_prob())) {
    out->reorder = true;
    for (int k = 2; k > 0; --k)
      std::swap(out->order[static_cast<size_t>(k)], out->order[static_cast<size_t>(draw->below(k + 1))]);
  }
}

// The random-resized crop's window (data_transformer.hpp; torchvision's
// RandomResizedCrop.get_params, with Plan's draws).
void plan_window(const TransformationParameter& p, int height, int width, Draws* draw, TransformPlan* plan) {
  const double area = static_cast<double>(height) * width;
  const float log_r0 = std::log(p.rand_crop_ratio_lower()), log_r1 = std::log(p.rand_crop_ratio_upper());
  auto fits = [&](double target, double ratio) {
    const long w = std::lround(std::sqrt(target * ratio)), h = std::lround(std::sqrt(target / ratio));
    if (w <= 0 || w > width || h <= 0 || h > height) return false;
    plan->window_h = static_cast<int>(h);
    plan->window_w = static_cast<int>(w);
    return true;
  };
  bool found = false;
  if (draw->random()) {
    for (int attempt = 0; attempt < 10 && !found; ++attempt) {
      const double target = area * draw->uniform(p.rand_crop_area_lower(), p.rand_crop_area_upper());
      found = fits(target, std::exp(static_cast<double>(draw->uniform(log_r0, log_r1))));
    }
    if (found) {
      plan->window_h0 = static_cast<int>(draw->raw() % static_cast<uint32_t>(height - plan->window_h + 1));
      plan->window_w0 = static_cast<int>(draw->raw() % static_cast<uint32_t>(width - plan->window_w + 1));
      return;
    }
  } else {
    found = fits(area * (0.5 * p.rand_crop_area_lower() + 0.5 * p.rand_crop_area_upper()),
                 std::exp(0.5 * log_r0 + 0.5 * log_r1));
  }
  if (!found) {  // torchvision's fallback: the whole image, clipped to the ratio range
    const double in_ratio = static_cast<double>(width) / height;
    plan->window_h = height;
    plan->window_w = width;
    if (in_ratio < p.rand_crop_ratio_lower()) {
      plan->window_h = std::clamp(static_cast<int>(std::lround(width / static_cast<double>(p.rand_crop_ratio_lower()))), 1, height);
    } else if (in_ratio > p.rand_crop_ratio_upper()) {
      plan->window_w = std::clamp(static_cast<int>(std::lround(height * static_cast<double>(p.rand_crop_ratio_upper()))), 1, width);
    }
  }
  plan->window_h0 = (height - plan->window_h) / 2;
  plan->window_w0 = (width - plan->window_w) / 2;
}

}  // namespace

TransformPlan DataTransformer::Plan(int height, int width, std::mt19937* rng) const {
  TransformPlan plan;
  Draws draw(rng);
  if (param_.has_distort_param() && draw.random()) plan_distortion(param_.distort_param(), &draw, &plan.distort);
  if (random_resize_) {  // NVCaffe's formula (data_transformer.hpp)
    const TransformationParameter& p = param_;
    int size = std::min(height, width);
    const int lower = static_cast<int>(p.img_rand_resize_lower()), upper = static_cast<int>(p.img_rand_resize_upper());
    if (lower > 0 && upper > 0) size = lower + draw.below(upper - lower + 1);
    const float f = width >= height ? static_cast<float>(size) / static_cast<float>(height)
                                    : static_cast<float>(size) / static_cast<float>(width);
    float fh = f * static_cast<float>(height), fw = f * static_cast<float>(width);
    if (p.rand_resize_ratio_lower() >= 1.f && p.rand_resize_ratio_upper() > 1.f) {
      const float r = draw.range(p.rand_resize_ratio_lower(), p.rand_resize_ratio_upper());
      if (fw > fh) {
        fw = fh * r;
      } else if (fw < fh) {
        fh = fw * r;
      } else if (!draw.random() || draw.below(2) > 0) {
        fw = fh * r;
      } else {
        fh = fw * r;
      }
    }
    if (p.vertical_stretch_lower() > 0.f && p.vertical_stretch_upper() > 0.f) {
      fh *= draw.range(p.vertical_stretch_lower(), p.vertical_stretch_upper());
    }
    if (p.horizontal_stretch_lower() > 0.f && p.horizontal_stretch_upper() > 0.f) {
      fw *= draw.range(p.horizontal_stretch_lower(), p.horizontal_stretch_upper());
    }
    int new_h = std::max(crop_h_, static_cast<int>(std::lround(fh)));
    int new_w = std::max(crop_w_, static_cast<int>(std::lround(fw)));
    if (!p.allow_upscale()) {
      new_h = std::min(new_h, height);
      new_w = std::min(new_w, width);
    }
    if (new_h != height || new_w != width) {
      plan.resize_h = height = new_h;
      plan.resize_w = width = new_w;
    }
  }
  if (rand_crop_) {
    plan_window(param_, height, width, &draw, &plan);
  } else if (crop_h_ > 0) {
    if (crop_h_ > height || crop_w_ > width) {
      field_error(crop_field(param_), crop_text(crop_h_, crop_w_), " is larger than the ", height, "x", width,
                  " image");
    }
    if (phase_ == TRAIN && rng) {
      // Modulo, not std::uniform_int_distribution: the draw is then the same
      // with every standard library, so batches are reproducible anywhere.
      plan.crop_h0 = static_cast<int>(draw.raw() % static_cast<uint32_t>(height - crop_h_ + 1));
      plan.crop_w0 = static_cast<int>(draw.raw() % static_cast<uint32_t>(width - crop_w_ + 1));
    } else {
      plan.crop_h0 = (height - crop_h_) / 2;
      plan.crop_w0 = (width - crop_w_) / 2;
    }
  }
  plan.mirror = param_.mirror() && rng && (draw.raw() & 1u);
  return plan;
}

void DataTransformer::Augment(const TransformPlan& plan, Image* image) const {
  if (!plan.distort.on && plan.resize_h == 0) return;
#ifdef CORTADO_USE_OPENCV
  CORTADO_CHECK(image->bytes != nullptr) << "CheckAgainst lets no float_data record reach Augment";
  cv::Mat img;
  if (image->interleaved) {
    // A libjpeg decode has no Mat: wrap its pixels (the distortions below
    // write new images or change these pixels in place).
    img = image->mat.empty() ? cv::Mat(image->H, image->W, CV_8UC(image->C), const_cast<uint8_t*>(image->bytes))
                             : image->mat;
  } else {
    std::vector<cv::Mat> planes;
    for (int c = 0; c < image->C; ++c) {
      planes.emplace_back(image->H, image->W, CV_8UC1,
                          const_cast<uint8_t*>(image->bytes + static_cast<size_t>(c) * image->H * image->W));
    }
    cv::merge(planes, img);
  }
  // NVCaffe's (SSD's) im_transforms: the same OpenCV calls on the 8-bit image.
  const TransformPlan::Distortion& d = plan.distort;
  if (d.on) {
    if (d.brightness && std::fabs(d.brightness_delta) > 0) img.convertTo(img, -1, 1, d.brightness_delta);
    auto contrast = [&] {
      if (d.contrast && std::fabs(d.contrast_factor - 1.f) > 1e-3f) img.convertTo(img, -1, d.contrast_factor, 0);
    };
    if (!d.contrast_last) contrast();
    if (d.saturation) adjust_hsv_channel(&img, 1, [&](cv::Mat* s) { s->convertTo(*s, -1, d.saturation_factor, 0); });
    if (d.hue && std::fabs(d.hue_delta) > 0) {
      adjust_hsv_channel(&img, 0, [&](cv::Mat* h) { h->convertTo(*h, -1, 1, d.hue_delta); });
    }
    if (d.contrast_last) contrast();
    if (d.reorder) {
      std::vector<cv::Mat> planes, reordered;
      cv::split(img, planes);
      for (int k : d.order) reordered.push_back(planes[static_cast<size_t>(k)]);
      cv::merge(reordered, img);
    }
  }
  if (plan.resize_h > 0) {
    const bool down = plan.resize_h <= img.rows && plan.resize_w <= img.cols;
    cv::Mat resized;
    cv::resize(img, resized, cv::Size(plan.resize_w, plan.resize_h), 0, 0,
               cv_interpolation(down ? param_.interpolation_algo_down() : param_.interpolation_algo_up()));
    img = resized;
  }
  image->SetMat(std::move(img));
#endif
}

namespace {

using transform_detail::MeanWindow;
using transform_detail::ResampleAxis;

// mean_value as one value per channel (empty without mean_value).
template <typename M>
std::vector<M> channel_means(const TransformationParameter& p, int C) {
  std::vector<M> values;
  if (p.mean_value_size() > 0) {
    for (int c = 0; c < C; ++c) values.push_back(static_cast<M>(p.mean_value(p.mean_value_size() == 1 ? 0 : c)));
  }
  return values;
}

}  // namespace

template <typename T>
void DataTransformer::WritePixels(const Image& im, const TransformPlan& plan, T* out, int region_h0,
                                  int region_w0) const {
  using M = math_t<T>;
  using transform_detail::transform_pixels;
  const int out_h = crop_h_ > 0 ? crop_h_ : im.H, out_w = crop_w_ > 0 ? crop_w_ : im.W;
  const std::vector<M> mean_values = channel_means<M>(param_, im.C);
  MeanWindow mean;
  if (!mean_.empty()) {
    mean.data = mean_.data();
    mean.H = mean_shape_[1];
    mean.W = mean_shape_[2];
    // Randomly resized images vary in size: NVCaffe subtracts the mean's centre.
    mean.h0 = random_resize_ ? (mean.H - out_h) / 2 : plan.crop_h0;
    mean.w0 = random_resize_ ? (mean.W - out_w) / 2 : plan.crop_w0;
  }
  const M scale = static_cast<M>(param_.scale());
  const int h0 = plan.crop_h0 - region_h0, w0 = plan.crop_w0 - region_w0;
  if (im.floats) {
    transform_pixels<float, false, T>(im.floats, im.C, im.H, im.W, out_h, out_w, h0, w0, plan.mirror, scale, mean,
                                      mean_values, out);
  } else if (im.interleaved) {
    transform_pixels<uint8_t, true, T>(im.bytes, im.C, im.H, im.W, out_h, out_w, h0, w0, plan.mirror, scale, mean,
                                       mean_values, out);
  } else {
    transform_pixels<uint8_t, false, T>(im.bytes, im.C, im.H, im.W, out_h, out_w, h0, w0, plan.mirror, scale, mean,
                                        mean_values, out);
  }
}

template <typename T>
void DataTransformer::WriteResampled(const Image& im, const TransformPlan& plan, int scale, int height, int width,
                                     T* out, int region_h0, int region_w0) const {
  using M = math_t<T>;
  using transform_detail::resample_pixels;
  ResampleAxis ys(crop_h_, plan.window_h0, plan.window_h, scale, jpeg_scaled_size(height, scale), false);
  ResampleAxis xs(crop_w_, plan.window_w0, plan.window_w, scale, jpeg_scaled_size(width, scale), plan.mirror);
  ys.Shift(region_h0);
  xs.Shift(region_w0);
  CORTADO_CHECK(ys.hi - region_h0 < im.H && xs.hi - region_w0 < im.W && ys.lo >= region_h0 && xs.lo >= region_w0);
  const std::vector<M> mean_values = channel_means<M>(param_, im.C);
  MeanWindow mean;
  if (!mean_.empty()) {  // the centre window, as for NVCaffe's random resize
    mean.data = mean_.data();
    mean.H = mean_shape_[1];
    mean.W = mean_shape_[2];
    mean.h0 = (mean.H - crop_h_) / 2;
    mean.w0 = (mean.W - crop_w_) / 2;
  }
  const M s = static_cast<M>(param_.scale());
  if (im.floats) {
    resample_pixels<float, false, T>(im.floats, im.C, im.H, im.W, ys, xs, plan.mirror, s, mean, mean_values, out);
  } else if (im.interleaved) {
    resample_pixels<uint8_t, true, T>(im.bytes, im.C, im.H, im.W, ys, xs, plan.mirror, s, mean, mean_values, out);
  } else {
    resample_pixels<uint8_t, false, T>(im.bytes, im.C, im.H, im.W, ys, xs, plan.mirror, s, mean, mean_values, out);
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

template <typename T>
bool DataTransformer::TransformJpeg(const Datum& datum, T* out, std::mt19937* rng,
                                    const std::vector<int>& expected) const {
#ifdef CORTADO_USE_LIBJPEG
  const std::string& bytes = datum.data();
  if (resize_height_ > 0 || short_side_ > 0 || random_resize_ || !is_jpeg(bytes)) return false;
  const int channels = param_.force_color() ? 3 : param_.force_gray() ? 1 : 0;
  thread_local std::vector<uint8_t> pixels;
  TransformPlan plan;
  JpegInfo info;
  JpegRegion region;
  int C = 0;
  auto choose = [&](const JpegInfo& i, JpegRegion* r) {
    info = i;
    C = channels != 0 ? channels : (i.components == 1 ? 1 : 3);
    CheckRecord({C, i.height, i.width}, false, expected);
    plan = Plan(i.height, i.width, rng);
    if (plan.window_h > 0) {  // the rows and columns the taps read, at the smallest scale that serves
      r->scale = jpeg_scale_for(plan.window_h, plan.window_w, crop_h_, crop_w_);
      const ResampleAxis ys(crop_h_, plan.window_h0, plan.window_h, r->scale, jpeg_scaled_size(i.height, r->scale),
                            false);
      const ResampleAxis xs(crop_w_, plan.window_w0, plan.window_w, r->scale, jpeg_scaled_size(i.width, r->scale),
                            false);
      r->y0 = ys.lo;
      r->height = ys.hi - ys.lo + 1;
      r->x0 = xs.lo;
      r->width = xs.hi - xs.lo + 1;
    } else if (crop_h_ > 0) {  // the crop's rows and columns
      r->y0 = plan.crop_h0;
      r->height = crop_h_;
      r->x0 = plan.crop_w0;
      r->width = crop_w_;
    }
    region = *r;
  };
  if (!decode_jpeg(bytes, channels, choose, &pixels)) return false;
  const int rh = region.height > 0 ? region.height : info.height, rw = region.width > 0 ? region.width : info.width;
  Image image;
  image.SetInterleaved(C, rh, rw, pixels.data());
  Augment(plan, &image);  // distort_param only: NVCaffe's random resize takes the Load path
  if (plan.window_h > 0) {
    WriteResampled(image, plan, region.scale, info.height, info.width, out, region.y0, region.x0);
  } else {
    WritePixels(image, plan, out, region.y0, region.x0);
  }
  return true;
#else
  return false;
#endif
}

template <typename T>
void DataTransformer::Transform(const Datum& datum, T* out, std::mt19937* rng,
                                const std::vector<int>& expected) const {
  if (datum.encoded() && TransformJpeg(datum, out, rng, expected)) return;
  Image image = Load(datum);
  CheckRecord({image.C, image.H, image.W}, image.floats != nullptr, expected);
  const TransformPlan plan = Plan(image.H, image.W, rng);
  Augment(plan, &image);
  if (plan.window_h > 0) {
    WriteResampled(image, plan, 8, image.H, image.W, out);
  } else {
    WritePixels(image, plan, out);
  }
}

template <typename T>
void DataTransformer::Transform(const Datum& datum, T* out, std::mt19937* rng, const std::vector<int>& expected,
                                bool channels_last) const {
  if (!channels_last) return Transform(datum, out, rng, expected);
  CORTADO_CHECK_EQ(expected.size(), 3u) << "a channels-last Transform needs the record's (C, H, W)";
  const int channels = expected[0];
  const size_t pixels = static_cast<size_t>(expected[1]) * expected[2];
  thread_local std::vector<T> planes;
  planes.resize(pixels * static_cast<size_t>(channels));
  Transform(datum, planes.data(), rng, expected);
  for (int c = 0; c < channels; ++c) {
    const T* plane = planes.data() + static_cast<size_t>(c) * pixels;
    T* dst = out + c;
    for (size_t i = 0; i < pixels; ++i) dst[i * static_cast<size_t>(channels)] = plane[i];
  }
}

#define CORTADO_TRANSFORM_TYPE(T)                                                                            \
  template void DataTransformer::Transform<T>(const Datum&, T*, std::mt19937*, const std::vector<int>&) const; \
  template void DataTransformer::Transform<T>(const Datum&, T*, std::mt19937*, const std::vector<int>&, bool)  \
      const;
CORTADO_TRANSFORM_TYPE(double)
CORTADO_TRANSFORM_TYPE(float)
CORTADO_TRANSFORM_TYPE(float16)
CORTADO_TRANSFORM_TYPE(bfloat16)
#undef CORTADO_TRANSFORM_TYPE

}  // namespace cortado
