// DataTransformer::Plan (data_transformer.hpp): every random choice of one
// record, drawn in NVCaffe's order from the record's generator.
#include "cortado/data/data_transformer.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <utility>

namespace cortado {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
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

uint64_t record_rng_seed(uint64_t seed, int64_t index) {
  return splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(index));
}

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
    CheckCropFits(height, width);
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

}  // namespace cortado
