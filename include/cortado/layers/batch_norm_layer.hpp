#pragma once
// Batch normalization, as Caffe's BatchNormLayer plus NVCaffe's scale_bias.
//
// The bottom is seen as (N, C, S): N = shape(0), C = shape(1) (1 for a 1-axis
// bottom), S = the product of the remaining axes; m = N * S values per channel.
//   xhat = (x - mean_c) / sqrt(var_c + eps)
//   y    = xhat                          (scale_bias false)
//   y    = gamma_c * xhat + beta_c       (scale_bias true)
// Batch statistics (use_global_stats false): mean_c and the biased var_c of
// the bottom (two passes: mean, then the mean of squared deviations). Each
// such forward updates the running statistics like Caffe:
//   blobs_[2] = maf * blobs_[2] + 1
//   blobs_[0] = maf * blobs_[0] + mean_c
//   blobs_[1] = maf * blobs_[1] + m / (m - 1) * var_c     (factor 1 when m = 1)
// Global statistics (use_global_stats true): mean_c = blobs_[0] / blobs_[2],
// var_c = blobs_[1] / blobs_[2] (both 0 when blobs_[2] is 0).
// Backward, with g_c = gamma_c / sqrt(var_c + eps) (gamma_c = 1 without scale_bias):
//   global stats: dx = g_c * dy
//   batch stats:  dx = g_c * (dy - mean_c(dy) - xhat * mean_c(dy * xhat))
//   dgamma_c += sum dy * xhat, dbeta_c += sum dy (scale_bias; accumulated).
//
// Parameter blobs:
//   blobs_[0] running mean (C), blobs_[1] running variance (C), blobs_[2]
//   moving-average factor (1): statistics, never learned. They are stored in
//   math_t<Ftype> (float for float16, double for double) so that running sums
//   do not round to half. LayerSetUp sets their param_propagate_down to false
//   and, where the layer's `param` list does not cover them, appends
//   ParamSpecs with lr_mult 0 and decay_mult 0 to the layer's own
//   LayerParameter (as Caffe does); a given ParamSpec for them with a nonzero
//   lr_mult or decay_mult is a field error. NOTE for the Net: it must take
//   the learnability of blobs 0..2 from layer->layer_param() after SetUp (or
//   skip param blobs whose param_propagate_down the layer set false), else a
//   solver with weight decay would decay the running statistics.
//   blobs_[3] scale gamma (C), blobs_[4] bias beta (C): only with scale_bias,
//   stored in Ftype, learnable.
//   Loaded blobs are kept; a wrong count or shape is a field error.
//
// batch_norm_param fields:
//   use_global_stats (default: phase == TEST)
//   moving_average_fraction maf (default 0.999; in [0, 1])
//   eps (default 1e-5; > 0)
//   scale_bias (default false), scale_filler (default constant 1),
//   bias_filler (default constant 0)
//
// Types: statistics and reductions in math_t (float for float16, double for
// double). Forward keeps the per-channel mean and 1/sqrt(var + eps), and the
// backward recomputes xhat from x with the forward's own arithmetic: the
// same values as a stored xhat, in no extra memory. x is the bottom itself
// when the layer is not in place (no later layer writes a blob that another
// layer reads: the Net rejects such nets); in place (top == bottom), the
// forward keeps a copy of x in Ftype (2 bytes a value for float16), except
// with global statistics where the backward needs no xhat (no scale_bias,
// or gamma not learned).
//
// GPU: one block per channel reduces the statistics (and, in the backward,
// sum dy and sum dy * xhat) in float (double for double); elementwise kernels
// normalize and form dx.
//
// Fusion (layer_fusion.hpp; the Net decides, NetParameter.fuse_layers): this
// layer can be the head of a chain that follows it in place on its top:
//   a Scale (kChannelAffine; only without scale_bias): z = stored(xhat) *
//     s_c + b_c, with the Scale layer's blobs; its gradients ds_c += sum dz *
//     stored(xhat), db_c += sum dz accumulate into them (as far as that
//     layer's param_propagate_down says), and the gradient reaching the
//     formulas above is dy = stored_B(dz * s_c);
//   then the residual add right after (kResidualAdd: an Eltwise SUM of this
//     chain's top and another blob r into a top of its own, `sum`; only
//     without a ReLU before it, and not for a channels-last blob on the CPU,
//     whose passes go through NCHW stand-ins): z becomes stored(z) + r, the
//     chain writes sum instead of its top (which is then never written),
//     and in the backward dr = dz (r's diff, when r needs a gradient; written
//     by the first pass, which then always runs), with dz the gradient
//     reaching the Scale;
//   then a ReLU (kReLU): out = max(0, stored(z)) (z = y without a Scale), and
//     dz = out > 0 ? dout : 0, the test read from the top's data (the ReLU's
//     output, which is what in place leaves) as Btype. With the residual add
//     "the top" is sum, from there on.
// stored() rounds to Ftype, stored_B to Btype: the points where the unfused
// layers store their results, so that the CPU result is the unfused one
// bit for bit. xhat is recomputed from x (or its copy) in the backward, so a
// fused Scale keeps no copy of its input; a fused chain reads and writes the
// blob once per pass instead of three times.

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cortado/layer.hpp"
#include "cortado/layers/layer_fusion.hpp"
#include "cortado/layers/layout_stand_in.hpp"

struct CUstream_st;

namespace cortado {

template <typename Ftype, typename Btype>
class BatchNormLayer : public Layer<Ftype, Btype>, public FusableLayer {
 public:
  CORTADO_LAYER_HEAD(Layer, "BatchNorm", BlobRules().Bottoms(1).Tops(1))
  /// Takes a Scale (without scale_bias, before any ReLU) or a ReLU.
  bool AbsorbTail(FusionRole role, LayerBase* tail) override;
  /// The Scale layer whose pass this layer does (null: none), and whether it
  /// applies a ReLU.
  const LayerBase* fused_scale() const { return affine_; }
  bool fused_relu() const { return relu_; }
  /// Takes the residual add right after the chain (below; refused after a
  /// ReLU, or for a channels-last blob on the CPU).
  bool AbsorbResidual(LayerBase* tail, Blob* other, Blob* out, bool other_diff) override;
  /// The blob a fused residual add adds (null: none).
  const Blob* fused_residual() const { return residual_; }
  /// False where the chain is meant for cuDNN's kernels (CudnnPlanned), which
  /// take no aliased operands: the memory plans then give the sum and the
  /// input's gradient memory of their own.
  bool fused_pass_may_alias() const override { return !CudnnPlanned(); }

  CORTADO_LAYER_SETUP
  /// Whether the last forward kept a copy of its input (tests, diagnostics).
  bool kept_copy() const { return saved_; }
  /// Whether the last forward ran on cuDNN's kernels (cudnn.batch_norm; tests, diagnostics).
  bool cudnn_ran() const { return cudnn_ran_; }
  /// Whether the last backward did (it follows a cuDNN forward unless the
  /// gradients' memory forbids; each refusal is logged once with its reason).
  bool cudnn_backward_ran() const { return cudnn_backward_ran_; }

 protected:
  CORTADO_LAYER_PASSES

 private:
  using MF = math_t<Ftype>;
  void ValidateParam(int channels);

  bool use_global_stats_ = false;
  bool scale_bias_ = false;
  double maf_ = 0.999;
  double eps_ = 1e-5;
  int num_ = 0, channels_ = 0;
  int64_t spatial_ = 0;
  // Channels last (net_layout.hpp): the GPU kernels see (N*S, C, 1), each
  // (n, s) a row of C values; the CPU path computes on NCHW stand-ins.
  bool channels_last_ = false;
  int gpu_num() const { return channels_last_ ? static_cast<int>(num_ * spatial_) : num_; }
  int64_t gpu_spatial() const { return channels_last_ ? 1 : spatial_; }
  NchwPasses nchw_;
  // cuDNN's NHWC kernels (cudnn_batch_norm.hpp; the net's cudnn.batch_norm) for a
  // channels-last FLOAT16 layer out of place with batch statistics (with a
  // fused residual add only before a ReLU: BN_ADD_ACTIVATION): whether
  // they apply to the current shape, whether the last forward used them,
  // their state (shared_ptr: the type is the .cpp's), and float copies of
  // the parameter gradients they write.
  // CudnnPlanned: the layer's types, switch, layout, statistics and chain
  // suit cuDNN (decided after fusion, whatever the device, so that the
  // memory plans and the CPU tests see what a GPU net gets); UseCudnn: and
  // the current blobs do.
  bool CudnnPlanned() const;
  bool UseCudnn(const BlobVec& bottom, const BlobVec& top) const;
  // Logs each reason once for this layer; a reason is a string literal,
  // known by its address, so that a forward that falls back again builds no
  // string.
  void CudnnFallback(const char* why) const;
  void CudnnParams(const float** gamma, const float** beta);
  bool ForwardCudnn(const BlobVec& bottom, const BlobVec& top);  // false: cuDNN refused the shape
  bool cudnn_ran_ = false, cudnn_backward_ran_ = false;
  mutable std::set<const char*> cudnn_fallbacks_;  // reasons already logged
  std::shared_ptr<void> cudnn_;
  Blob cudnn_dgamma_{FLOAT}, cudnn_dbeta_{FLOAT}, cudnn_ones_{FLOAT}, cudnn_zeros_{FLOAT};
  Blob cudnn_dz_{type_of<Btype>()};  // a residual's gradient cuDNN writes where none is wanted
  bool NeedsXhat() const;  // whether the backward needs xhat

  LayerBase* affine_ = nullptr;  // a fused Scale (its blobs: s, and b with bias_term)
  bool relu_ = false;            // a fused ReLU
  // A fused residual add: the blob it adds, its top (what the chain writes
  // and reads the gradient from instead of top[0]), and whether the added
  // blob gets a gradient.
  Blob* residual_ = nullptr;
  Blob* residual_out_ = nullptr;
  bool residual_diff_ = false;
  Blob* chain_out(const BlobVec& top) const { return residual_out_ ? residual_out_ : top[0]; }
  bool KeepsCopy(const BlobVec& bottom, const BlobVec& top) const;

  bool saved_ = false;             // whether the last forward filled x_saved_
  Blob x_saved_{type_of<Ftype>()};  // (N, C, S) the forward's bottom, in place only
  Blob mean_{type_of<MF>()};     // (C) mean used by the last forward
  Blob inv_std_{type_of<MF>()};  // (C) 1 / sqrt(var + eps) of the last forward
  Blob sdy_{type_of<MF>()};      // (C) GPU backward: sum dy
  Blob sdyx_{type_of<MF>()};     // (C) GPU backward: sum dy * xhat
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
// Launchers of batch_norm_layer.cu. T is the storage type, M its math type
// (float for float16, T otherwise); x is (N, C, S).

/// Per channel (one block each): mean and biased variance of x into mean/var
/// (M), then run_mean = maf * run_mean + mean, run_var = maf * run_var +
/// m/(m-1) * var, and (block 0) run_factor = maf * run_factor + 1.
template <typename T, typename M>
void bn_batch_stats(int n, int c, int64_t s, const T* x, double maf, M* mean, M* var, M* run_mean, M* run_var,
                    M* run_factor, CUstream_st* stream);
/// mean = run_mean / run_factor, var = run_var / run_factor (0 if factor 0).
template <typename M>
void bn_global_stats(int c, const M* run_mean, const M* run_var, const M* run_factor, M* mean, M* var,
                     CUstream_st* stream);
/// inv_std = 1 / sqrt(var + eps), in place over var.
template <typename M>
void bn_inv_std(int c, double eps, M* var_to_inv_std, CUstream_st* stream);
/// x_saved = x; xhat = (x - mean) * inv_std; y = gamma * xhat + beta
/// (gamma/beta null: y = xhat). y may be x.
template <typename T, typename M>
void bn_normalize(int n, int c, int64_t s, const T* x, const M* mean, const M* inv_std, const T* gamma,
                  const T* beta, T* x_saved, T* y, CUstream_st* stream);
/// Per channel: sdy = sum dy, sdyx = sum dy * xhat, xhat recomputed from
/// x_saved (X, the forward's type); with dgamma/dbeta non-null adds sdyx /
/// sdy to them.
template <typename T, typename X, typename M>
void bn_backward_reduce(int n, int c, int64_t s, const T* dy, const X* x_saved, const M* mean, const M* inv_std,
                        M* sdy, M* sdyx, T* dgamma, T* dbeta, CUstream_st* stream);
/// dx = gamma * inv_std * (dy - sdy/m - xhat * sdyx/m) (batch stats) or
/// gamma * inv_std * dy (global: sdy and sdyx null, x_saved unused).
template <typename T, typename X, typename M>
void bn_backward_dx(int n, int c, int64_t s, const T* dy, const X* x_saved, const M* mean, const M* inv_std,
                    const T* gamma, const M* sdy, const M* sdyx, T* dx, CUstream_st* stream);

/// From a batch's mean and inv_std = 1 / sqrt(var + eps) (cuDNN's saved
/// statistics): run_mean = maf * run_mean + mean, run_var = maf * run_var +
/// unbias * (1 / inv_std^2 - eps), and (thread 0) run_factor = maf *
/// run_factor + 1, as bn_batch_stats updates them.
template <typename M>
void bn_running_from_saved(int c, double eps, double maf, double unbias, const M* mean, const M* inv_std,
                           M* run_mean, M* run_var, M* run_factor, CUstream_st* stream);
/// diff[c] += d[c] (d in float), rounded once to T.
template <typename T>
void bn_add_param_diff(int c, const float* d, T* diff, CUstream_st* stream);

/// What a fused chain adds around the normalization (layer_fusion.hpp), as
/// the fused kernels see it: a Scale's s and b (scale null: no Scale; bias
/// null: no bias) and a ReLU. T is the storage type of the pass.
template <typename T>
struct BnTail {
  const T* scale = nullptr;
  const T* bias = nullptr;
  bool relu = false;
  const T* residual = nullptr;  // a fused residual add's other blob (forward)
  T* residual_diff = nullptr;   // its gradient (backward; null: not wanted)
};
/// bn_normalize followed by the tail: z = scale ? stored(xhat) * s + b :
/// (gamma ? gamma * xhat + beta : xhat); z = stored(z) + residual with a
/// residual; y = relu ? max(0, stored(z)) : z.
/// One plane (n, c) per block: the channel is found once per plane, and
/// planes whose length and pointers allow it move 16 bytes per load.
template <typename T, typename M>
void bn_normalize_fused(int n, int c, int64_t s, const T* x, const M* mean, const M* inv_std, const T* gamma,
                        const T* beta, BnTail<T> tail, T* x_saved, T* y, CUstream_st* stream);
/// The fused backward's sums, per channel. The gradient into the tail, dout,
/// is masked by the ReLU (y > 0, y the top's data in X read as T) and, with a
/// Scale, gives ds_c += sum dz * stored_X(xhat) (ds non-null), db_c += sum dz
/// (db non-null) and dy = stored(dz * s_c); then sdy, sdyx, dgamma, dbeta as
/// bn_backward_reduce computes them from dy. With tail.residual_diff, also
/// writes the masked gradient there (the residual's gradient; it may be
/// dout's memory: masking it again changes nothing).
template <typename T, typename X, typename M>
void bn_backward_reduce_fused(int n, int c, int64_t s, const T* dout, const X* y, const X* x_saved, const M* mean,
                              const M* inv_std, BnTail<T> tail, M* sdy, M* sdyx, T* dgamma, T* dbeta, T* ds,
                              T* db, CUstream_st* stream);
/// bn_backward_dx with dy formed from dout as in bn_backward_reduce_fused.
template <typename T, typename X, typename M>
void bn_backward_dx_fused(int n, int c, int64_t s, const T* dout, const X* y, const X* x_saved, const M* mean,
                          const M* inv_std, const T* gamma, BnTail<T> tail, const M* sdy, const M* sdyx, T* dx,
                          CUstream_st* stream);
}  // namespace gpu
#endif  // CORTADO_USE_CUDA

}  // namespace cortado
