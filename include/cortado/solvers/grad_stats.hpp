#pragma once
// Gradient statistics for choosing a loss scale: where the gradients of a net
// fall on FP16's number line. It is the measurement behind the histogram of
// activation gradients in NVIDIA's mixed-precision training guide (the
// Multibox SSD figure), as a tool: run a net built in FP32 for a few
// iterations and see which share of its gradients FP16 would flush to zero,
// make subnormal or overflow, and how far they can be shifted up.
//
// What is measured, each iteration (the caller builds the net with FLOAT
// types, see ForceFloatTypes, so the values are the ones FP16 would have to
// hold, not ones already damaged by FP16):
// - activation gradients: the diff of every bottom blob a layer writes in
//   backward (Net::bottom_need_backward()), read right after that layer's
//   Backward. Reading per layer matters for in-place layers (a ReLU that
//   shares its blob with the layer below): each layer's bottom gradient is
//   its own tensor in FP16 training and is counted once per layer; the
//   gradients of a Split layer's bottom (the sum over its consumers) count
//   too, as they are a tensor of their own as well.
// - weight gradients: the diff of each parameter blob the layer owns and
//   learns (param_propagate_down; shared parameters under their owner), per
//   iteration (the diffs are cleared before each one), before weight decay
//   and before any solver scaling.
//
// For each (layer, kind) and overall:
// - a histogram of |x| by power of two: bin e counts 2^e <= |x| < 2^(e+1)
//   for e in [kMinExp, kMaxExp]; the first bin also holds every smaller
//   nonzero value and the last every larger finite one; plus a zero bin and
//   a non-finite bin;
// - among the nonzero finite values, how many FP16 would round to zero
//   (|x| < 2^-25, and 2^-25 itself, which ties to even zero), to a subnormal
//   (up to 2^-14), or to Inf (|x| >= 65520): decided by the actual
//   conversion of float16.hpp, so the boundaries are exact;
// - the largest |x|.
// Then the largest power of two S with S * max|g| < 65504 (max over both
// kinds and all layers: with loss scaling every gradient is scaled by S) and,
// per (layer, kind) and overall, how many nonzero values would still round to
// zero in FP16 after multiplying by S (exact: S is a power of two, so the
// product only moves the exponent).

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "cortado/net/net.hpp"

namespace cortado {

/// Counts for one set of gradient values.
struct GradHistogram {
  static constexpr int kMinExp = -40;
  static constexpr int kMaxExp = 20;
  static constexpr int kNumBins = kMaxExp - kMinExp + 1;

  /// bins[i] counts the nonzero finite values with floor(log2|x|) = kMinExp + i
  /// (clamped into the first and last bins).
  std::vector<uint64_t> bins = std::vector<uint64_t>(kNumBins, 0);
  uint64_t count = 0;      ///< every value seen: sum(bins) + zeros + nonfinite
  uint64_t zeros = 0;      ///< exact zeros (either sign)
  uint64_t nonfinite = 0;  ///< Inf and NaN
  uint64_t fp16_zero = 0;       ///< nonzero finite values FP16 rounds to zero
  uint64_t fp16_subnormal = 0;  ///< nonzero finite values that become FP16 subnormals
  uint64_t fp16_overflow = 0;   ///< finite values that become FP16 Inf
  double max_abs = 0;           ///< largest finite |x|
  /// Nonzero finite values that still round to zero in FP16 after
  /// multiplying by the suggested loss scale (set by GradStats::Run).
  uint64_t fp16_zero_at_scale = 0;

  uint64_t nonzero() const { return count - zeros - nonfinite; }
  /// Shares of nonzero() (0 when there are none).
  double zero_share() const { return share(fp16_zero); }
  double subnormal_share() const { return share(fp16_subnormal); }
  double overflow_share() const { return share(fp16_overflow); }
  double zero_share_at_scale() const { return share(fp16_zero_at_scale); }
  double share(uint64_t n) const { return nonzero() ? double(n) / double(nonzero()) : 0.0; }
  bool empty() const { return count == 0; }

  /// Adds values; T is float, double or float16.
  template <typename T> void Add(const T* x, size_t n);
  /// Adds another histogram's counts.
  void Merge(const GradHistogram& other);
  /// Nonzero finite values that round to zero in FP16 once multiplied by
  /// 2^scale_log2.
  uint64_t ZeroAtScale(int scale_log2) const;

  // Exact floor(log2|x|) counts over the whole double range, and how many of
  // them were exact powers of two: what ZeroAtScale needs for any scale.
  static constexpr int kFullMinExp = -1074;
  static constexpr int kFullMaxExp = 1023;
  std::vector<uint64_t> full_bins = std::vector<uint64_t>(kFullMaxExp - kFullMinExp + 1, 0);
  std::vector<uint64_t> full_pow2 = std::vector<uint64_t>(kFullMaxExp - kFullMinExp + 1, 0);
};

enum class GradKind { kActivation, kWeight };
const char* grad_kind_name(GradKind kind);  // "activation", "weight"

/// One layer's gradients (empty histograms when it has none of a kind).
struct LayerGradStats {
  std::string name;
  std::string type;
  GradHistogram activation;
  GradHistogram weight;
  const GradHistogram& of(GradKind k) const { return k == GradKind::kActivation ? activation : weight; }
};

struct GradStatsResult {
  std::string net_name;
  int iterations = 0;
  double mean_loss = 0;
  std::vector<LayerGradStats> layers;  ///< in net order, every layer
  GradHistogram activation;            ///< all layers' activation gradients
  GradHistogram weight;                ///< all layers' weight gradients
  GradHistogram all;                   ///< both kinds
  /// The suggested static loss scale S = 2^loss_scale_log2: the largest power
  /// of two with S * all.max_abs < 65504. Without any nonzero finite
  /// gradient there is nothing to scale: has_loss_scale is false and S is 1.
  bool has_loss_scale = false;
  int loss_scale_log2 = 0;
  double loss_scale = 1;
};

/// The largest k with 2^k * max_abs < 65504 (max_abs > 0 and finite).
int LargestSafeScaleLog2(double max_abs);

/// Sets FLOAT as the forward/backward type and math of the net defaults and
/// of every layer, leaving DOUBLE where it is written (as a default or on a
/// layer): the measurement runs in FP32 whatever the prototxt trains in.
void ForceFloatTypes(NetParameter* param);

class GradStats {
 public:
  /// `net` must outlive this object; it is run in whatever phase it was built.
  explicit GradStats(Net* net) : net_(net) {}

  /// Runs `iterations` iterations (clear parameter diffs, forward, backward
  /// layer by layer with the measurement after each layer), then computes the
  /// overall histograms and the loss scale. Calling it again starts over.
  const GradStatsResult& Run(int iterations);
  const GradStatsResult& result() const { return result_; }

 private:
  Net* net_;
  GradStatsResult result_;
};

/// A text report: one line per (layer, kind) with gradients, the overall
/// lines, and the suggested loss scale.
std::string GradStatsReport(const GradStatsResult& r);
/// CSV for plotting: '#' comment lines with the net name, iterations and loss
/// scale, then the header
///   scope,layer,type,kind,bin,log2_lower,count
/// and one row per (layer, kind, bin) for every layer and kind with values
/// (scope "layer") and for the overall histograms (scope "net", layer "",
/// kind "activation", "weight"). bin is "zero", "nonfinite" or "exp" (then
/// log2_lower is e: the row counts 2^e <= |x| < 2^(e+1); the first and last
/// are open-ended). Fields holding ',' or '"' are quoted.
void WriteGradStatsCsv(const GradStatsResult& r, std::ostream& out);
/// Writes the CSV to `path`; throws Error if the file cannot be written.
void WriteGradStatsCsv(const GradStatsResult& r, const std::string& path);

}  // namespace cortado
