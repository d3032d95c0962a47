#include "cortado/util/data_transformer.hpp"
#include "cortado/util/math.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <climits>
#include <type_traits>
#include <fstream>

#include "cortado/bfloat16.hpp"
#include "cortado/layer.hpp"
#include "cortado/util/blob_io.hpp"

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

}  // namespace

uint64_t record_rng_seed(uint64_t seed, int64_t index) {
  return splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(index));
}

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

Datum DataTransformer::Decode(const Datum& datum) const {
  if (!datum.encoded()) return datum;
#ifdef CORTADO_USE_OPENCV
  const std::string& bytes = datum.data();
  int flags = cv::IMREAD_ANYCOLOR;
  if (param_.force_color()) flags = cv::IMREAD_COLOR;
  if (param_.force_gray()) flags = cv::IMREAD_GRAYSCALE;
  cv::Mat img;
  if (!bytes.empty()) {
    const cv::Mat buf(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
    try {
      img = cv::imdecode(buf, flags);
    } catch (const cv::Exception& e) {
      fail("cannot decode the encoded image (", bytes.size(), " bytes): ", e.what());
    }
  }
  if (img.empty()) fail("cannot decode the encoded image (", bytes.size(), " bytes)");
  if (img.depth() != CV_8U) fail("decoded image is not 8-bit");
  if (resize_height_ > 0 && resize_width_ > 0 && (img.rows != resize_height_ || img.cols != resize_width_)) {
    cv::Mat out;
    cv::resize(img, out, cv::Size(resize_width_, resize_height_), 0, 0, cv::INTER_LINEAR);
    img = out;
  }
  if (!img.isContinuous()) img = img.clone();
  const int C = img.channels(), H = img.rows, W = img.cols;
  Datum out;
  out.set_channels(C);
  out.set_height(H);
  out.set_width(W);
  out.set_label(datum.label());
  std::string planar(static_cast<size_t>(C) * H * W, '\0');
  const uint8_t* src = img.ptr<uint8_t>(0);
  // (H, W, C) interleaved -> (C, H, W) planar.
  for (int h = 0; h < H; ++h)
    for (int w = 0; w < W; ++w)
      for (int c = 0; c < C; ++c)
        planar[(static_cast<size_t>(c) * H + h) * W + w] = static_cast<char>(src[(h * W + w) * C + c]);
  out.set_data(std::move(planar));
  return out;
#else
  fail("the record is an encoded image, but this build has no OpenCV (configure with USE_OPENCV=ON)");
#endif
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

void DataTransformer::CheckAgainst(const std::vector<int>& s) const {
  const int crop = static_cast<int>(param_.crop_size());
  if (crop > 0 && (crop > s[1] || crop > s[2])) {
    field_error("transform_param.crop_size", crop, " is larger than the ", s[1], "x", s[2],
                " image");
  }
  const int nmean = param_.mean_value_size();
  if (nmean > 1 && nmean != s[0]) {
    field_error("transform_param.mean_value", "has ", nmean,
                " values; give one, or one per channel (", s[0], ")");
  }
  if (!mean_shape_.empty() && mean_shape_ != s) {
    field_error("transform_param.mean_file", "'", param_.mean_file(), "' has shape ",
                shape_text(mean_shape_), " but the records are ", shape_text(s));
  }
}

std::vector<int> DataTransformer::InferShape(const Datum& datum) const {
  const std::vector<int> s = RawShape(datum.encoded() ? Decode(datum) : datum);
  CheckAgainst(s);
  const int crop = static_cast<int>(param_.crop_size());
  return crop > 0 ? std::vector<int>{s[0], crop, crop} : s;
}

namespace {

// The inner loop, on the source type S (uint8_t or float).
template <typename S, typename T>
void transform_pixels(const S* src, const std::vector<int>& raw, int out_h, int out_w, int h0, int w0,
                      bool mirror, math_t<T> scale, const float* mean_file,
                      const std::vector<math_t<T>>& mean_values, T* out) {
  using M = math_t<T>;
  const int H = raw[1], W = raw[2];
  // For float16 and bfloat16 the image is computed in float, then converted in bulk (F16C
  // where the CPU has it): the per-value conversion was the reader's
  // bottleneck for FP16 nets.
  const size_t count = static_cast<size_t>(raw[0]) * out_h * out_w;
  thread_local std::vector<M> staging;
  if constexpr (!std::is_same_v<T, M>) staging.resize(count);
  M* base = std::is_same_v<T, M> ? reinterpret_cast<M*>(out) : staging.data();
  for (int c = 0; c < raw[0]; ++c) {
    const M mv = mean_values.empty() ? M(0) : mean_values[c];
    for (int h = 0; h < out_h; ++h) {
      const size_t row = (static_cast<size_t>(c) * H + h + h0) * W + w0;
      M* dst = base + (static_cast<size_t>(c) * out_h + h) * out_w;
      for (int w = 0; w < out_w; ++w) {
        const size_t i = row + (mirror ? out_w - 1 - w : w);
        const M m = mean_file ? static_cast<M>(mean_file[i]) : mv;
        dst[w] = (static_cast<M>(src[i]) - m) * scale;
      }
    }
  }
  if constexpr (!std::is_same_v<T, M>) convert_array<M, T>(static_cast<int64_t>(count), base, out);
}

}  // namespace

template <typename T>
void DataTransformer::TransformRaw(const Datum& d, const std::vector<int>& raw, T* out,
                                   std::mt19937* rng) const {
  using M = math_t<T>;
  const int crop = static_cast<int>(param_.crop_size());
  const int out_h = crop > 0 ? crop : raw[1], out_w = crop > 0 ? crop : raw[2];
  int h0 = 0, w0 = 0;
  if (crop > 0) {
    if (phase_ == TRAIN && rng) {
      // Modulo, not std::uniform_int_distribution: the draw is then the same
      // with every standard library, so batches are reproducible anywhere.
      h0 = static_cast<int>((*rng)() % static_cast<uint32_t>(raw[1] - crop + 1));
      w0 = static_cast<int>((*rng)() % static_cast<uint32_t>(raw[2] - crop + 1));
    } else {
      h0 = (raw[1] - crop) / 2;
      w0 = (raw[2] - crop) / 2;
    }
  }
  const bool mirror = param_.mirror() && rng && ((*rng)() & 1u);
  std::vector<M> mean_values;
  if (param_.mean_value_size() > 0) {
    for (int c = 0; c < raw[0]; ++c) {
      mean_values.push_back(static_cast<M>(param_.mean_value(param_.mean_value_size() == 1 ? 0 : c)));
    }
  }
  const float* mean_file = mean_.empty() ? nullptr : mean_.data();
  const M scale = static_cast<M>(param_.scale());
  if (!d.data().empty()) {
    const auto* src = reinterpret_cast<const uint8_t*>(d.data().data());
    transform_pixels<uint8_t, T>(src, raw, out_h, out_w, h0, w0, mirror, scale, mean_file, mean_values, out);
  } else {
    transform_pixels<float, T>(d.float_data().data(), raw, out_h, out_w, h0, w0, mirror, scale,
                               mean_file, mean_values, out);
  }
}

template <typename T>
void DataTransformer::Transform(const Datum& datum, T* out, std::mt19937* rng,
                                const std::vector<int>& expected) const {
  Datum decoded;
  const Datum* d = &datum;
  if (datum.encoded()) {
    decoded = Decode(datum);
    d = &decoded;
  }
  const std::vector<int> raw = RawShape(*d);
  CheckAgainst(raw);
  const int crop = static_cast<int>(param_.crop_size());
  const std::vector<int> shape = crop > 0 ? std::vector<int>{raw[0], crop, crop} : raw;
  if (!expected.empty() && shape != expected) {
    fail("record gives an image of shape ", shape_text(shape), ", but the first record gave ",
         shape_text(expected), " (all records must have the same size, or use crop_size)");
  }
  TransformRaw(*d, raw, out, rng);
}

template void DataTransformer::Transform<double>(const Datum&, double*, std::mt19937*,
                                                 const std::vector<int>&) const;
template void DataTransformer::Transform<float>(const Datum&, float*, std::mt19937*,
                                                const std::vector<int>&) const;
template void DataTransformer::Transform<float16>(const Datum&, float16*, std::mt19937*,
                                                  const std::vector<int>&) const;
template void DataTransformer::Transform<bfloat16>(const Datum&, bfloat16*, std::mt19937*,
                                                   const std::vector<int>&) const;

}  // namespace cortado
