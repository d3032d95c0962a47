#pragma once
// MVN: mean-variance normalization of each row.
//
//   A row is one (n, c) plane of count(2) values, or with across_channels one
//   item n of count(1) values. For a row x of dim values:
//     mu = mean(x); sigma = sqrt(mean((x - mu)^2))
//     normalize_variance: y = (x - mu) / (sigma + eps);  else y = x - mu
//   Backward (g = dtop, y = top):
//     normalize_variance: dx = (g - mean(g) - y * mean(g * y)) / (sigma + eps)
//     else:               dx = g - mean(g)
//
// Bottoms: 1 (at least 2 axes without across_channels, 1 with). Tops: 1, same
// shape. Fields: mvn_param.normalize_variance (default true);
// mvn_param.across_channels (default false); mvn_param.eps (default 1e-9,
// >= 0; added to sigma as Caffe does). In place: yes.
// Types: statistics in math_t<Ftype> (float for float16 and float, double for
// double), kept per row (sigma) for the backward, which computes in
// math_t<Btype> from the top's data read as Btype.
// GPU (mvn_layer.cu): one thread per row, the CPU's order of summation.
// Launchers are instantiated for (T, S) = (double, double), (float, float),
// (float16, float) and (bfloat16, float): the pairs the instantiated layers use.

#include <memory>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class MVNLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "MVN", BlobRules().Bottoms(1).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  using S = math_t<Ftype>;  // type of the kept statistics
  bool normalize_variance_ = true, across_channels_ = false;
  double eps_ = 1e-9;
  int64_t num_ = 0, dim_ = 0;
  std::unique_ptr<Blob> sigma_;  // (num_) in S
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// Per row r of dim values: y = x - mu, or (x - mu) / (sigma + eps) with
/// normalize; sigma[r] written (S is float or double). x and y may alias.
template <typename T, typename S>
void mvn_forward(int64_t num, int64_t dim, bool normalize, double eps, const T* x, T* y, S* sigma,
                 CUstream_st* stream);
/// The backward above; dx and dy may alias.
template <typename T, typename S>
void mvn_backward(int64_t num, int64_t dim, bool normalize, double eps, const T* y, const T* dy, const S* sigma,
                  T* dx, CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
