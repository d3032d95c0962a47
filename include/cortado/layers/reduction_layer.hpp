#pragma once
// Reduction: reduces all axes from `axis` on to one number per leading index.
//
//   With num = count(0, axis) and dim = count(axis), for n in [0, num):
//     SUM:   top[n] = coeff * sum_d x[n, d]
//     ASUM:  top[n] = coeff * sum_d |x[n, d]|
//     SUMSQ: top[n] = coeff * sum_d x[n, d]^2
//     MEAN:  top[n] = coeff / dim * sum_d x[n, d]
//   Backward: dx[n, d] = c * dtop[n] * (1, sign(x), 2x, 1 respectively), with
//   c = coeff (coeff / dim for MEAN).
//
// Bottoms: 1. Tops: 1 with the bottom's shape truncated to its first `axis`
// axes (axis 0: a scalar, shape ()).
// Fields: reduction_param.operation (SUM | ASUM | SUMSQ | MEAN, default SUM);
// reduction_param.axis (default 0; negative counts from the end);
// reduction_param.coeff (default 1). In place: no.
// Types: sums accumulate in math_t<Ftype> (float for float16 and float, double
// for double) and are stored once in Ftype; backward in math_t<Btype>.
// GPU (reduction_layer.cu): forward one thread per output summing its row in
// the CPU's order; backward one thread per bottom element.

#include "cortado/config.hpp"
#include "cortado/layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
class ReductionLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Reduction", BlobRules().Bottoms(1).Tops(1))
  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  int op_ = 1;  // ReductionParameter::ReductionOp
  int axis_ = 0;
  double coeff_ = 1;  // MEAN's 1/dim folded in at Reshape
  int64_t num_ = 0, dim_ = 0;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// op: 1 SUM (also MEAN, with coeff already divided), 2 ASUM, 3 SUMSQ.
/// y[n] = coeff * sum_d f(x[n, d]) for n in [0, num).
template <typename T>
void reduction_forward(int64_t num, int64_t dim, int op, double coeff, const T* x, T* y, CUstream_st* stream);
/// dx[n, d] = coeff * dy[n] * f'(x[n, d]) for the num * dim bottom elements.
template <typename T>
void reduction_backward(int64_t num, int64_t dim, int op, double coeff, const T* x, const T* dy, T* dx,
                        CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
