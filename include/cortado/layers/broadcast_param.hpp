#pragma once
// The broadcast of a parameter along some axes of a bottom, shared by Bias
// and Scale (bias_param / scale_param: axis, default 1, negative counts from
// the end; num_axes, default 1, -1 to the last axis, 0 a scalar). The
// bottom x is viewed as (outer, dim, inner) around the parameter's axes:
// y[o, d, i] = x[o, d, i] (+ or *) p[d]. Header-only.

#include <cstdint>
#include <string>
#include <vector>

#include "cortado/layer.hpp"

namespace cortado {

/// The shape of the parameter a layer learns for bottom x: x's axes
/// [axis, axis + num_axes). Field errors on `param`.num_axes (< -1, or past
/// the last axis) and `param`.axis (out of range).
inline std::vector<int> BroadcastParamShape(const LayerBase& layer, const std::string& param, int axis, int num_axes,
                                            const Blob& x) {
  const int n = x.num_axes();
  if (num_axes < -1) layer.field_error(param + ".num_axes", "must be >= -1, got ", num_axes);
  if (num_axes == 0) return {};
  if (axis < -n || axis >= n) {
    layer.field_error(param + ".axis", "= ", axis, " is out of range for a bottom of shape ", x.shape_string());
  }
  const int first = axis < 0 ? axis + n : axis;
  const int end = num_axes == -1 ? n : first + num_axes;
  if (end > n) {
    layer.field_error(param + ".num_axes", "= ", num_axes, " from axis ", first,
                      " goes past the last axis of a bottom of shape ", x.shape_string());
  }
  return std::vector<int>(x.shape().begin() + first, x.shape().begin() + end);
}

/// x as (outer, dim, inner) around the parameter p (learned or a second
/// bottom), whose axes must be x's from `axis` on (a scalar p: dim 1 from
/// axis 0). Field errors on `param`.axis naming `what` ("bias", "scale").
/// A channels-last x takes only a (C) p on axis 1 (its view is then
/// (N, C, H*W) in Caffe's order; the GPU kernels see it as (N*H*W, C, 1)).
struct BroadcastView {
  int64_t outer, dim, inner;
};
inline BroadcastView BroadcastAxes(const LayerBase& layer, const std::string& param, const char* what, int axis,
                                   const Blob& x, const Blob& p) {
  const int n = x.num_axes();
  int first = 0;
  if (p.num_axes() > 0) {
    if (axis < -n || axis >= n) {
      layer.field_error(param + ".axis", "= ", axis, " is out of range for a bottom of shape ", x.shape_string());
    }
    first = axis < 0 ? axis + n : axis;
  }
  bool fits = first + p.num_axes() <= n;
  for (int i = 0; fits && i < p.num_axes(); ++i) fits = x.shape(first + i) == p.shape(i);
  if (!fits) {
    layer.field_error(param + ".axis", what, " shape ", p.shape_string(), " does not match bottom shape ",
                      x.shape_string(), " from axis ", first);
  }
  if (x.channels_last() && (first != 1 || p.num_axes() != 1)) {
    layer.field_error(param + ".axis", what, " shape ", p.shape_string(), " from axis ", first,
                      " over a channels-last bottom of shape ", x.shape_string(),
                      ": only a (C) parameter on axis 1 applies to NHWC values");
  }
  return {static_cast<int64_t>(x.count(0, first)), static_cast<int64_t>(p.count()),
          static_cast<int64_t>(x.count(first + p.num_axes()))};
}

}  // namespace cortado
