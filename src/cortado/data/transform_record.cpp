// DataTransformer's work on one record (data_transformer.hpp): decoding
// (libjpeg-turbo, OpenCV) and the fixed resize, the 8-bit augmentations,
// and the pass that writes the pixels in the layer's type.
#include "cortado/data/data_transformer.hpp"

#include <cmath>
#include <utility>

#include "cortado/bfloat16.hpp"
#include "cortado/data/jpeg_decode.hpp"
#include "cortado/util/math.hpp"
#include "transform_pixels.hpp"

#ifdef CORTADO_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace cortado {

namespace {

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

std::vector<int> DataTransformer::InferShape(const Datum& datum) const {
  const Image image = Load(datum);
  const std::vector<int> s{image.C, image.H, image.W};
  CheckAgainst(s, image.floats != nullptr);
  return OutputShape(s);
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
