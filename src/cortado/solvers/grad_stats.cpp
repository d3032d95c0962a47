#include "cortado/solvers/grad_stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <sstream>

#include "cortado/bfloat16.hpp"
#include "cortado/types.hpp"

namespace cortado {

namespace {

// FP16's largest finite value and its smallest normal.
constexpr double kHalfMax = 65504.0;
const double kHalfMinNormal = std::ldexp(1.0, -14);
// A nonzero value x rounds to zero in FP16 iff |x| <= 2^kHalfZeroExp (the
// tie at 2^-25 goes to the even neighbour, zero).
constexpr int kHalfZeroExp = -25;

template <typename T>
double to_double(T v) {
  return static_cast<double>(static_cast<math_t<T>>(v));
}

// The smallest and largest floor(log2|x|) seen, from the exact counts;
// false when there is no nonzero finite value.
bool exponent_range(const GradHistogram& h, int* lo, int* hi) {
  const auto& b = h.full_bins;
  auto first = std::find_if(b.begin(), b.end(), [](uint64_t c) { return c != 0; });
  if (first == b.end()) return false;
  auto last = std::find_if(b.rbegin(), b.rend(), [](uint64_t c) { return c != 0; });
  *lo = static_cast<int>(first - b.begin()) + GradHistogram::kFullMinExp;
  *hi = static_cast<int>(b.rend() - last - 1) + GradHistogram::kFullMinExp;
  return true;
}

void add_blob_diff(const Blob& blob, GradHistogram* h) {
  if (blob.count() == 0) return;
  dispatch_type(blob.diff().type(), [&](auto tag) {
    using T = decltype(tag);
    h->Add(blob.cpu_diff<T>(), blob.count());
  });
}

std::string percent(double share) {
  char buf[32];
  if (share == 0)
    std::snprintf(buf, sizeof(buf), "0%%");
  else if (share >= 0.9995 && share < 1)
    std::snprintf(buf, sizeof(buf), ">99.9%%");  // never print 100% for "not quite all"
  else if (share < 0.001)  // small shares are the interesting ones: two significant digits
    std::snprintf(buf, sizeof(buf), "%.2g%%", 100 * share);
  else
    std::snprintf(buf, sizeof(buf), "%.1f%%", 100 * share);
  return buf;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

std::string scale_text(int k) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "2^%d = %.10g", k, std::ldexp(1.0, k));
  return buf;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void csv_rows(std::ostream& out, const std::string& scope, const std::string& layer, const std::string& type,
              GradKind kind, const GradHistogram& h) {
  const std::string prefix =
      str_cat(scope, ",", csv_field(layer), ",", csv_field(type), ",", grad_kind_name(kind), ",");
  out << prefix << "zero,," << h.zeros << "\n";
  for (int i = 0; i < GradHistogram::kNumBins; ++i)
    out << prefix << "exp," << GradHistogram::kMinExp + i << "," << h.bins[i] << "\n";
  out << prefix << "nonfinite,," << h.nonfinite << "\n";
}

}  // namespace

// ---- GradHistogram ----------------------------------------------------------------

template <typename T>
void GradHistogram::Add(const T* x, size_t n) {
  count += n;
  for (size_t j = 0; j < n; ++j) {
    const double v = to_double(x[j]);
    if (v == 0) {
      ++zeros;
      continue;
    }
    if (!std::isfinite(v)) {
      ++nonfinite;
      continue;
    }
    const double a = std::fabs(v);
    max_abs = std::max(max_abs, a);
    const int e = std::ilogb(a);  // exact floor(log2 a), subnormal doubles included
    ++full_bins[e - kFullMinExp];
    if (a == std::ldexp(1.0, e)) ++full_pow2[e - kFullMinExp];
    ++bins[std::min(std::max(e, kMinExp), kMaxExp) - kMinExp];
    // What FP16 makes of it: the conversion itself decides the boundaries.
    const float16 h(static_cast<float>(a));
    const float back = h;
    if (back == 0)
      ++fp16_zero;
    else if (isinf(h))
      ++fp16_overflow;
    else if (back < kHalfMinNormal)
      ++fp16_subnormal;
  }
}

template void GradHistogram::Add<float>(const float*, size_t);
template void GradHistogram::Add<double>(const double*, size_t);
template void GradHistogram::Add<float16>(const float16*, size_t);
template void GradHistogram::Add<bfloat16>(const bfloat16*, size_t);

void GradHistogram::Merge(const GradHistogram& o) {
  for (int i = 0; i < kNumBins; ++i) bins[i] += o.bins[i];
  for (size_t i = 0; i < full_bins.size(); ++i) {
    full_bins[i] += o.full_bins[i];
    full_pow2[i] += o.full_pow2[i];
  }
  count += o.count;
  zeros += o.zeros;
  nonfinite += o.nonfinite;
  fp16_zero += o.fp16_zero;
  fp16_subnormal += o.fp16_subnormal;
  fp16_overflow += o.fp16_overflow;
  fp16_zero_at_scale += o.fp16_zero_at_scale;
  max_abs = std::max(max_abs, o.max_abs);
}

uint64_t GradHistogram::ZeroAtScale(int scale_log2) const {
  // |x| * 2^k rounds to zero iff |x| < 2^(-25-k), or |x| == 2^(-25-k).
  // Scaling by a power of two only moves the exponent (the products that
  // would be float subnormals are far below 2^-25 anyway), so the exact
  // exponent counts answer it for any k.
  const long limit = static_cast<long>(kHalfZeroExp) - scale_log2;  // exponent of the threshold
  uint64_t n = 0;
  for (long e = kFullMinExp; e < limit && e <= kFullMaxExp; ++e) n += full_bins[e - kFullMinExp];
  if (limit >= kFullMinExp && limit <= kFullMaxExp) n += full_pow2[limit - kFullMinExp];
  return n;
}

const char* grad_kind_name(GradKind kind) { return kind == GradKind::kActivation ? "activation" : "weight"; }

int LargestSafeScaleLog2(double max_abs) {
  CORTADO_CHECK(max_abs > 0 && std::isfinite(max_abs));
  int k = std::ilogb(kHalfMax) - std::ilogb(max_abs);
  while (std::ldexp(max_abs, k) >= kHalfMax) --k;
  while (std::ldexp(max_abs, k + 1) < kHalfMax) ++k;
  return k;
}

void ForceFloatTypes(NetParameter* param) {
  auto fp32 = [](Type t) { return t == DOUBLE ? DOUBLE : FLOAT; };
  const Type df = fp32(param->default_forward_type());
  const Type db = fp32(param->default_backward_type());
  const Type dfm = fp32(param->default_forward_math());
  const Type dbm = fp32(param->default_backward_math());
  param->set_default_forward_type(df);
  param->set_default_backward_type(db);
  param->set_default_forward_math(dfm);
  param->set_default_backward_math(dbm);
  for (LayerParameter& lp : *param->mutable_layer()) {
    lp.set_forward_type(lp.has_forward_type() ? fp32(lp.forward_type()) : df);
    lp.set_backward_type(lp.has_backward_type() ? fp32(lp.backward_type()) : db);
    lp.set_forward_math(lp.has_forward_math() ? fp32(lp.forward_math()) : dfm);
    lp.set_backward_math(lp.has_backward_math() ? fp32(lp.backward_math()) : dbm);
  }
}

// ---- GradStats ----------------------------------------------------------------------

const GradStatsResult& GradStats::Run(int iterations) {
  CORTADO_CHECK_GE(iterations, 1);
  Net& net = *net_;
  const auto& layers = net.layers();
  const int n = static_cast<int>(layers.size());
  result_ = GradStatsResult();
  result_.net_name = net.name();
  result_.iterations = iterations;
  result_.layers.resize(n);
  for (int i = 0; i < n; ++i) {
    result_.layers[i].name = layers[i]->name();
    result_.layers[i].type = layers[i]->type();
  }

  // The parameter blobs each layer owns and learns. Net::params() lists every
  // layer's blobs in layer order, shared ones repeated with their owner in
  // param_owners(); a shared diff is counted once, under its owner.
  std::vector<std::vector<const Blob*>> weights(n);
  size_t pi = 0;
  for (int i = 0; i < n; ++i) {
    for (size_t p = 0; p < layers[i]->blobs().size(); ++p, ++pi) {
      CORTADO_CHECK_LT(pi, net.param_owners().size());
      if (net.param_owners()[pi] < 0 && layers[i]->param_propagate_down(static_cast<int>(p)))
        weights[i].push_back(layers[i]->blobs()[p].get());
    }
  }
  CORTADO_CHECK_EQ(pi, net.params().size());

  double loss = 0;
  for (int it = 0; it < iterations; ++it) {
    net.ClearParamDiffs();
    loss += net.Forward();
    // Net::Backward's loop, with each layer's bottom gradients read before a
    // layer below can overwrite them (in-place layers share a blob).
    for (int i = n - 1; i >= 0; --i) {
      if (!net.layer_need_backward()[i]) continue;
      const std::vector<bool>& need = net.bottom_need_backward()[i];
      layers[i]->Backward(net.top_vecs()[i], need, net.bottom_vecs()[i]);
      for (size_t b = 0; b < need.size(); ++b)
        if (need[b]) add_blob_diff(*net.bottom_vecs()[i][b], &result_.layers[i].activation);
    }
    for (int i = 0; i < n; ++i)
      for (const Blob* w : weights[i]) add_blob_diff(*w, &result_.layers[i].weight);
  }
  result_.mean_loss = loss / iterations;

  for (const LayerGradStats& l : result_.layers) {
    result_.activation.Merge(l.activation);
    result_.weight.Merge(l.weight);
  }
  result_.all.Merge(result_.activation);
  result_.all.Merge(result_.weight);
  result_.has_loss_scale = result_.all.max_abs > 0;
  result_.loss_scale_log2 = result_.has_loss_scale ? LargestSafeScaleLog2(result_.all.max_abs) : 0;
  result_.loss_scale = std::ldexp(1.0, result_.loss_scale_log2);
  const int k = result_.loss_scale_log2;
  for (LayerGradStats& l : result_.layers) {
    l.activation.fp16_zero_at_scale = l.activation.ZeroAtScale(k);
    l.weight.fp16_zero_at_scale = l.weight.ZeroAtScale(k);
  }
  for (GradHistogram* h : {&result_.activation, &result_.weight, &result_.all}) h->fp16_zero_at_scale = h->ZeroAtScale(k);
  return result_;
}

// ---- report -----------------------------------------------------------------------

std::string GradStatsReport(const GradStatsResult& r) {
  std::ostringstream os;
  os << "Gradient statistics of net '" << r.net_name << "': " << r.iterations << " iteration"
     << (r.iterations == 1 ? "" : "s") << " in FP32, mean loss " << number(r.mean_loss) << "\n";
  os << "FP16 rounds |g| <= 2^-25 to zero, holds |g| < 2^-14 as a subnormal, overflows at |g| >= 65520.\n";
  const std::string k_text = r.has_loss_scale ? str_cat("2^", r.loss_scale_log2) : "1";

  size_t width = std::string("overall").size();
  for (const LayerGradStats& l : r.layers) width = std::max(width, l.name.size());
  width = std::min<size_t>(width, 40);
  auto pad = [](const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); };
  auto lpad = [](const std::string& s, size_t w) { return s.size() >= w ? s : std::string(w - s.size(), ' ') + s; };

  os << "\n"
     << pad("layer", width) << "  " << pad("kind", 10) << lpad("values", 12) << lpad("zero", 8)
     << lpad("max|g|", 10) << lpad("log2|g|", 12) << lpad("->0 FP16", 10) << lpad("subnorm", 9)
     << lpad("overflow", 9) << lpad("->0 at S", 10) << "\n";
  auto line = [&](const std::string& name, GradKind kind, const GradHistogram& h) {
    int lo = 0, hi = 0;
    const std::string range = exponent_range(h, &lo, &hi) ? str_cat(lo, "..", hi) : "-";
    os << pad(name, width) << "  " << pad(grad_kind_name(kind), 10) << lpad(std::to_string(h.count), 12)
       << lpad(percent(h.count ? double(h.zeros) / double(h.count) : 0), 8) << lpad(number(h.max_abs), 10)
       << lpad(range, 12) << lpad(percent(h.zero_share()), 10) << lpad(percent(h.subnormal_share()), 9)
       << lpad(percent(h.overflow_share()), 9) << lpad(percent(h.zero_share_at_scale()), 10);
    if (h.nonfinite) os << "  (" << h.nonfinite << " Inf/NaN)";
    os << "\n";
  };
  for (const LayerGradStats& l : r.layers) {
    if (!l.activation.empty()) line(l.name, GradKind::kActivation, l.activation);
    if (!l.weight.empty()) line(l.name, GradKind::kWeight, l.weight);
  }
  os << std::string(width + 2 + 10 + 12 + 8 + 10 + 12 + 10 + 9 + 9 + 10, '-') << "\n";
  line("overall", GradKind::kActivation, r.activation);
  line("overall", GradKind::kWeight, r.weight);
  os << "(zero: share of all values; log2|g|: floor(log2) of the smallest and largest nonzero |g|; "
        "->0 FP16, subnorm, overflow, ->0 at S: shares of the nonzero values, at S = 1 and at S = "
     << k_text << ")\n\n";

  if (!r.has_loss_scale) {
    os << "No nonzero finite gradient was seen: there is nothing to scale (is any layer learning?).\n";
    return os.str();
  }
  // Where the largest gradient lives.
  std::string where;
  for (const LayerGradStats& l : r.layers)
    for (GradKind kind : {GradKind::kActivation, GradKind::kWeight})
      if (where.empty() && l.of(kind).max_abs == r.all.max_abs) where = str_cat(l.name, ", ", grad_kind_name(kind));
  os << "Largest |gradient|: " << number(r.all.max_abs) << " (" << where << ")\n";
  os << "Suggested static loss scale: S = " << scale_text(r.loss_scale_log2)
     << "  (the largest power of two with S * max|g| = " << number(r.loss_scale * r.all.max_abs) << " < 65504)\n";
  os << "Nonzero gradients FP16 would flush to zero: " << percent(r.all.zero_share()) << " at S = 1 ("
     << percent(r.activation.zero_share()) << " of activation, " << percent(r.weight.zero_share())
     << " of weight gradients), " << percent(r.all.zero_share_at_scale()) << " at S = 2^" << r.loss_scale_log2
     << " (" << percent(r.activation.zero_share_at_scale()) << ", " << percent(r.weight.zero_share_at_scale())
     << ")\n";
  if (r.all.nonfinite)
    os << "Warning: " << r.all.nonfinite << " gradient values were Inf or NaN already in FP32.\n";
  return os.str();
}

void WriteGradStatsCsv(const GradStatsResult& r, std::ostream& out) {
  out << "# net: " << r.net_name << "\n";
  out << "# iterations: " << r.iterations << "\n";
  out << "# loss_scale_log2: " << (r.has_loss_scale ? std::to_string(r.loss_scale_log2) : "") << "\n";
  out << "# max_abs: " << r.all.max_abs << "\n";
  out << "scope,layer,type,kind,bin,log2_lower,count\n";
  for (const LayerGradStats& l : r.layers)
    for (GradKind kind : {GradKind::kActivation, GradKind::kWeight})
      if (!l.of(kind).empty()) csv_rows(out, "layer", l.name, l.type, kind, l.of(kind));
  csv_rows(out, "net", "", "", GradKind::kActivation, r.activation);
  csv_rows(out, "net", "", "", GradKind::kWeight, r.weight);
}

void WriteGradStatsCsv(const GradStatsResult& r, const std::string& path) {
  std::ofstream out(path);
  if (!out) fail(path, ": cannot open for writing");
  WriteGradStatsCsv(r, out);
  out.flush();
  if (!out) fail(path, ": write failed");
}

}  // namespace cortado
