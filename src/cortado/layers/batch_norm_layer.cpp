#include "cortado/layers/batch_norm_layer.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "cortado/layers/filler.hpp"
#include "cortado/layers/relu_layer.hpp"
#include "cortado/util/cpu_parallel.hpp"
#include "cortado/util/logging.hpp"
#include "cortado/util/math_buffer.hpp"
#include "cortado/util/plane_math.hpp"
#include "cudnn_batch_norm.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void BatchNormLayer<Ftype, Btype>::ValidateParam(int channels) {
  const BatchNormParameter& p = this->layer_param().batch_norm_param();
  if (!(p.moving_average_fraction() >= 0.f && p.moving_average_fraction() <= 1.f)) {
    this->field_error("batch_norm_param.moving_average_fraction", "must be in [0, 1], got ",
                      p.moving_average_fraction());
  }
  if (!(p.eps() > 0.f)) this->field_error("batch_norm_param.eps", "must be positive, got ", p.eps());
  if (p.scale_bias()) {
    for (const auto& [f, field] : {std::pair{&p.scale_filler(), "batch_norm_param.scale_filler"},
                                   std::pair{&p.bias_filler(), "batch_norm_param.bias_filler"}}) {
      if (!f->has_type()) continue;
      try {
        ValidateFiller(*f, "");
      } catch (const Error& e) {
        this->field_error(std::string(field) + ".type", e.what());
      }
    }
  }
  // The statistics (blobs 0..2) are not learned: a ParamSpec for them must say so.
  const LayerParameter& lp = this->layer_param();
  for (int i = 0; i < 3 && i < lp.param_size(); ++i) {
    if (lp.param(i).lr_mult() != 0.f || (lp.param(i).has_decay_mult() && lp.param(i).decay_mult() != 0.f)) {
      this->field_error("param", "ParamSpec ", i, " is for a batch statistic (", i == 0 ? "mean" : i == 1 ? "variance" : "moving-average factor",
                        "): lr_mult and decay_mult must be 0");
    }
  }
  const size_t want = p.scale_bias() ? 5 : 3;
  if (static_cast<size_t>(lp.param_size()) > want) {
    this->field_error("param", "has ", lp.param_size(), " ParamSpecs for ", want, " parameter blobs");
  }
  const auto& blobs = this->blobs_;
  if (blobs.empty()) return;
  if (blobs.size() != want) {
    this->field_error("blobs", "expected ", want, " parameter blobs (scale_bias ", p.scale_bias(), "), got ",
                      blobs.size());
  }
  for (size_t i = 0; i < want; ++i) {
    const std::vector<int> shape{i == 2 ? 1 : channels};
    if (blobs[i]->count() != static_cast<size_t>(shape[0])) {
      this->field_error("blobs", "blob ", i, " has shape ", blobs[i]->shape_string(), ", expected ",
                        shape_string(shape));
    }
  }
}

template <typename Ftype, typename Btype>
void BatchNormLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const BatchNormParameter& p = this->layer_param().batch_norm_param();
  const int channels = bottom[0]->num_axes() <= 1 ? 1 : bottom[0]->shape(1);
  if (bottom[0]->num_axes() == 0) this->field_error("bottom", "needs at least one axis");
  ValidateParam(channels);
  use_global_stats_ = p.has_use_global_stats() ? p.use_global_stats() : this->layer_param().phase() == TEST;
  scale_bias_ = p.scale_bias();
  maf_ = p.moving_average_fraction();
  eps_ = p.eps();
  channels_ = channels;
  auto& blobs = this->blobs_;
  if (blobs.empty()) {
    // Statistics in the math type; fresh blobs are zero.
    blobs.push_back(std::make_shared<Blob>(std::vector<int>{channels}, type_of<MF>()));
    blobs.push_back(std::make_shared<Blob>(std::vector<int>{channels}, type_of<MF>()));
    blobs.push_back(std::make_shared<Blob>(std::vector<int>{1}, type_of<MF>()));
    if (scale_bias_) {
      FillerParameter one, zero;
      one.set_type("constant");
      one.set_value(1);
      zero.set_type("constant");
      zero.set_value(0);
      blobs.push_back(this->make_param({channels}));
      Fill(p.has_scale_filler() ? p.scale_filler() : one, blobs[3].get(), "batch_norm_param.scale_filler");
      blobs.push_back(this->make_param({channels}));
      Fill(p.has_bias_filler() ? p.bias_filler() : zero, blobs[4].get(), "batch_norm_param.bias_filler");
    }
  }
  for (int i = this->param_.param_size(); i < 3; ++i) {
    ParamSpec* spec = this->param_.add_param();
    spec->set_lr_mult(0.f);
    spec->set_decay_mult(0.f);
  }
  this->param_propagate_down_.assign(blobs.size(), true);
  for (int i = 0; i < 3; ++i) this->param_propagate_down_[i] = false;
}

template <typename Ftype, typename Btype>
void BatchNormLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& b = *bottom[0];
  const int channels = b.num_axes() <= 1 ? 1 : b.shape(1);
  if (b.num_axes() == 0 || channels != channels_) {
    this->field_error("bottom", "bottom shape ", b.shape_string(), " does not have the ", channels_,
                      " channels the layer was set up for");
  }
  num_ = b.shape(0);
  spatial_ = num_ * channels_ == 0 ? 0 : static_cast<int64_t>(b.count() / (static_cast<size_t>(num_) * channels_));
  // NHWC (blob.hpp): the GPU kernels see (N*H*W, C, 1), each (n, h, w) a
  // row of C values; the CPU computes on NCHW stand-ins.
  channels_last_ = b.channels_last();
  if (top[0] != bottom[0]) top[0]->ReshapeLike(b);
  if (top[0] == bottom[0]) x_saved_.ReshapeLike(b);
  if (residual_out_) {
    // The fused residual add (AbsorbResidual): this layer writes the sum
    // before the Eltwise's own Reshape runs, so it sizes the sum here (a
    // batch that grew between forwards); the shortcut was computed before.
    if (residual_->shape() != b.shape()) {
      this->field_error("bottom", "the fused residual add's other bottom has shape ", residual_->shape_string(),
                        ", this layer's bottom ", b.shape_string());
    }
    residual_out_->ReshapeLike(b);
  }
  for (Blob* s : {&mean_, &inv_std_, &sdy_, &sdyx_}) s->Reshape({channels_});
}

template <typename Ftype, typename Btype>
bool BatchNormLayer<Ftype, Btype>::NeedsXhat() const {
  return !use_global_stats_ || (scale_bias_ && this->param_propagate_down(3)) ||
         (affine_ && affine_->param_propagate_down(0));
}

template <typename Ftype, typename Btype>
bool BatchNormLayer<Ftype, Btype>::AbsorbTail(FusionRole role, LayerBase* tail) {
  if (role == FusionRole::kReLU && !relu_) {
    relu_ = true;
    return true;
  }
  if (role != FusionRole::kChannelAffine || scale_bias_ || affine_ || relu_ || residual_) return false;
  const auto& b = tail->blobs();
  for (const auto& p : b)
    if (p->count() != static_cast<size_t>(channels_)) return false;
  if (b.empty() || b.size() > 2) return false;
  affine_ = tail;
  return true;
}

template <typename Ftype, typename Btype>
bool BatchNormLayer<Ftype, Btype>::AbsorbResidual(LayerBase*, Blob* other, Blob* out, bool other_diff) {
  // On the CPU a channels-last BatchNorm computes through NCHW stand-ins of
  // its own bottom and top only.
  if (relu_ || residual_ || (channels_last_ && !this->on_gpu())) return false;
  residual_ = other;
  residual_out_ = out;
  residual_diff_ = other_diff;
  return true;
}

// In place, x is kept also with a fused residual add, which writes the sum's
// blob and not x: the data plan may have given the sum x's memory (a sum
// computes in a bottom's memory where that bottom's producers keep what
// their backward needs, as this layer does in place).
template <typename Ftype, typename Btype>
bool BatchNormLayer<Ftype, Btype>::KeepsCopy(const BlobVec& bottom, const BlobVec& top) const {
  return top[0] == bottom[0] && NeedsXhat();
}

template <typename Ftype, typename Btype>
void BatchNormLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if (nchw_.Use(bottom, top)) {
    nchw_.Forward(bottom, top, type_of<Ftype>(), false, nullptr,
                  [&](const BlobVec& b, const BlobVec& t) { Forward_cpu(b, t); });
    return;
  }
  using M = MF;
  const size_t count = bottom[0]->count();
  // x and y may be one array (in place): every pass below reads a plane of x
  // before it writes that plane of y, so no copy of x is needed. 16-bit
  // planes are widened to M one at a time in the thread's scratch.
  const Ftype* x = bottom[0]->template cpu_data<Ftype>();
  const int64_t s = spatial_;
  const double m = static_cast<double>(num_) * s;
  M* mean = mean_.template mutable_cpu_data<M>();
  M* inv_std = inv_std_.template mutable_cpu_data<M>();
  M* run_mean = this->blobs_[0]->template mutable_cpu_data<M>();
  M* run_var = this->blobs_[1]->template mutable_cpu_data<M>();
  M* run_factor = this->blobs_[2]->template mutable_cpu_data<M>();
  auto at = [&](int n, int c) { return (static_cast<int64_t>(n) * channels_ + c) * s; };
  if (use_global_stats_) {
    const M f = run_factor[0] == M(0) ? M(0) : M(1) / run_factor[0];
    for (int c = 0; c < channels_; ++c) {
      mean[c] = run_mean[c] * f;
      inv_std[c] = M(1) / std::sqrt(run_var[c] * f + static_cast<M>(eps_));
    }
  } else {
    // Channels are independent: each chunk of them runs on its own core; a
    // channel's sums go plane by plane in the batch's order.
    cpu_parallel_for(channels_, [&](int, int c0, int c1) {
      for (int c = c0; c < c1; ++c) {
        M sum = 0;
        for (int n = 0; n < num_; ++n) {
          const M* xp = plane_in<M>(x + at(n, c), s, 0);
          sum += lane_sum<M>(s, [&](int64_t i) { return xp[i]; });
        }
        const M mu = m > 0 ? sum / static_cast<M>(m) : M(0);
        M sq = 0;
        for (int n = 0; n < num_; ++n) {
          const M* xp = plane_in<M>(x + at(n, c), s, 0);
          sq += lane_sum<M>(s, [&](int64_t i) { return (xp[i] - mu) * (xp[i] - mu); });
        }
        const M var = m > 0 ? sq / static_cast<M>(m) : M(0);
        mean[c] = mu;
        inv_std[c] = M(1) / std::sqrt(var + static_cast<M>(eps_));
        const M unbias = m > 1 ? static_cast<M>(m / (m - 1)) : M(1);
        run_mean[c] = static_cast<M>(maf_) * run_mean[c] + mu;
        run_var[c] = static_cast<M>(maf_) * run_var[c] + unbias * var;
      }
    });
    run_factor[0] = static_cast<M>(maf_) * run_factor[0] + M(1);
  }
  const M* gamma = scale_bias_ ? this->blobs_[3]->template cpu_data<M>() : nullptr;
  const M* beta = scale_bias_ ? this->blobs_[4]->template cpu_data<M>() : nullptr;
  // A fused Scale's parameters, read as that layer reads them.
  const M* as = affine_ ? affine_->blobs()[0]->template cpu_data<M>() : nullptr;
  const M* ab = affine_ && affine_->blobs().size() > 1 ? affine_->blobs()[1]->template cpu_data<M>() : nullptr;
  const ReLUOp relu{};
  // The backward recomputes xhat from x: from the bottom itself when the
  // layer is not in place (nothing writes it before the backward: the Net
  // never lets a later layer compute in place on a blob another layer
  // reads), else from this copy, made before y overwrites x.
  saved_ = KeepsCopy(bottom, top);
  if (saved_) cpu_copy<Ftype>(count, x, x_saved_.template mutable_cpu_data<Ftype>());
  Ftype* y = chain_out(top)->template mutable_cpu_data<Ftype>();
  const Ftype* r = residual_ ? residual_->template cpu_data<Ftype>() : nullptr;
  cpu_parallel_for(num_ * channels_, [&](int, int p0, int p1) {
    for (int p = p0; p < p1; ++p) {
      const int c = p % channels_;
      const M mu = mean[c], is = inv_std[c];
      const int64_t j0 = static_cast<int64_t>(p) * s;
      const M* xp = plane_in<M>(x + j0, s, 0);
      // A residual's plane, read before y (which may be its memory: the
      // data plan lets a sum compute in a bottom's) is written.
      M* rp = r ? thread_scratch<M>(2, s) : nullptr;
      if (r) convert_array(s, r + j0, rp);
      M* out = plane_buf<M>(y + j0, s, 1);
      if (gamma) {
        const M g = gamma[c], b = beta[c];
        for (int64_t i = 0; i < s; ++i) out[i] = g * ((xp[i] - mu) * is) + b;
      } else if (as) {
        const M sd = as[c], bd = ab ? ab[c] : M(0);
        for (int64_t i = 0; i < s; ++i) out[i] = stored_as<Ftype>((xp[i] - mu) * is) * sd + bd;
      } else {
        for (int64_t i = 0; i < s; ++i) out[i] = (xp[i] - mu) * is;
      }
      if (rp) {  // the residual add, as Eltwise SUM adds its two bottoms
        for (int64_t i = 0; i < s; ++i) out[i] = stored_as<Ftype>(out[i]) + rp[i];
      }
      if (relu_) {
        for (int64_t i = 0; i < s; ++i) out[i] = relu.forward(stored_as<Ftype>(out[i]));
      }
      plane_out(out, s, y + j0);
    }
  });
}

template <typename Ftype, typename Btype>
void BatchNormLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                const BlobVec& bottom) {
  if (nchw_.Use(bottom, top)) {
    nchw_.Backward(top, propagate_down, bottom, type_of<Ftype>(), type_of<Btype>(), false, nullptr,
                   [&](const BlobVec& t, const BlobVec& b) { Backward_cpu(t, propagate_down, b); });
    return;
  }
  using M = math_t<Btype>;
  // dy and dx may be one array (in place): the sums come first, and the last
  // pass reads a plane of dy before it writes that plane of dx. 16-bit planes
  // are widened one at a time, as in the forward.
  const Btype* dy = chain_out(top)->template cpu_diff<Btype>();
  // xhat as the forward computed it, from its input and statistics; not
  // needed with global statistics unless dgamma is.
  const bool xhat = NeedsXhat();
  const Ftype* xs = saved_ ? x_saved_.template cpu_data<Ftype>() : bottom[0]->template cpu_data<Ftype>();
  const M* mean = mean_.template cpu_data<M>();
  const M* inv_std = inv_std_.template cpu_data<M>();
  const M* gamma = scale_bias_ ? this->blobs_[3]->template cpu_data<M>() : nullptr;
  const int64_t s = spatial_;
  const M m = static_cast<M>(static_cast<double>(num_) * s);
  std::vector<M> sdy(channels_, M(0)), sdyx(channels_, M(0));
  auto at = [&](int n, int c) { return (static_cast<int64_t>(n) * channels_ + c) * s; };
  // A fused chain (layer_fusion.hpp): dy is what the unfused ReLU and Scale
  // would have left in the diff, formed plane by plane from the top's diff,
  // each value rounded where those layers store it; the Scale's sums come
  // with the first pass (sums true), in the order that layer sums.
  const Ftype* yf = relu_ ? chain_out(top)->template cpu_data<Ftype>() : nullptr;
  // A fused residual add's gradient: the masked dout, written by the first
  // pass (the sums), plane by plane. It may share dout's memory: the second
  // pass then masks the masked values again, which changes nothing.
  Btype* rd = residual_ && residual_diff_ ? residual_->template mutable_cpu_diff<Btype>() : nullptr;
  const bool want_s = affine_ && affine_->param_propagate_down(0);
  const bool want_b = affine_ && affine_->blobs().size() > 1 && affine_->param_propagate_down(1);
  const M* as = affine_ ? affine_->blobs()[0]->template cpu_data<M>() : nullptr;
  std::vector<M> asdy(want_b ? channels_ : 0, M(0)), asdyx(want_s ? channels_ : 0, M(0));
  const ReLUOp relu{};
  auto dy_plane = [&](int64_t j, int c, bool sums) -> const M* {
    const M* dyp = plane_in<M>(dy + j, s, 0);
    if (!relu_ && !affine_ && !rd) return dyp;
    M* g = thread_scratch<M>(3, s);
    if (relu_) {
      const M* yp = plane_in<M>(yf + j, s, 2);
      for (int64_t i = 0; i < s; ++i) g[i] = stored_as<Btype>(relu.backward(stored_as<Btype>(yp[i]), M(0), dyp[i]));
    } else {
      std::copy(dyp, dyp + s, g);
    }
    if (sums && rd) convert_array(s, g, rd + j);  // Eltwise SUM's gradient to the other bottom (coefficient 1)
    if (!affine_) return g;
    if (sums && want_b) asdy[c] += lane_sum<M>(s, [&](int64_t i) { return g[i]; });
    if (sums && want_s) {
      const M* xsp = plane_in<M>(xs + j, s, 1);
      const M mu = mean[c], is = inv_std[c];
      asdyx[c] += lane_sum<M>(s, [&](int64_t i) { return g[i] * stored_as<Ftype>((xsp[i] - mu) * is); });
    }
    for (int64_t i = 0; i < s; ++i) g[i] = stored_as<Btype>(g[i] * as[c]);
    return g;
  };
  cpu_parallel_for(channels_, [&](int, int c0, int c1) {
    for (int n = 0; n < num_; ++n) {
      for (int c = c0; c < c1; ++c) {
        const M* dyp = dy_plane(at(n, c), c, true);
        sdy[c] += lane_sum<M>(s, [&](int64_t i) { return dyp[i]; });
        if (!xhat) continue;
        const M* xsp = plane_in<M>(xs + at(n, c), s, 1);
        const M mu = mean[c], is = inv_std[c];
        sdyx[c] += lane_sum<M>(s, [&](int64_t i) { return dyp[i] * ((xsp[i] - mu) * is); });
      }
    }
  });
  if (scale_bias_) {
    for (int k = 3; k < 5; ++k) {
      if (!this->param_propagate_down(k)) continue;
      MathBuffer<Btype> d(this->blobs_[k]->template mutable_cpu_diff<Btype>(), channels_, true);
      for (int c = 0; c < channels_; ++c) d.get()[c] += k == 3 ? sdyx[c] : sdy[c];
      d.store();
    }
  }
  for (int k = 0; k < 2; ++k) {
    if (!(k == 0 ? want_s : want_b)) continue;
    const std::vector<M>& sum = k == 0 ? asdyx : asdy;
    MathBuffer<Btype> d(affine_->blobs()[k]->template mutable_cpu_diff<Btype>(), channels_, true);
    for (int c = 0; c < channels_; ++c) d.get()[c] = d.get()[c] + sum[c];
    d.store();
  }
  if (propagate_down.empty() || !propagate_down[0]) return;
  Btype* dx = bottom[0]->template mutable_cpu_diff<Btype>();
  cpu_parallel_for(num_ * channels_, [&](int, int p0, int p1) {
    for (int p = p0; p < p1; ++p) {
      const int c = p % channels_;
      const M g = (gamma ? gamma[c] : M(1)) * inv_std[c];
      const M mdy = use_global_stats_ || m == 0 ? M(0) : sdy[c] / m;
      const M mdyx = use_global_stats_ || m == 0 ? M(0) : sdyx[c] / m;
      const M mu = mean[c], is = inv_std[c];
      const int64_t j0 = static_cast<int64_t>(p) * s;
      const M* dyp = dy_plane(j0, c, false);
      M* out = plane_buf<M>(dx + j0, s, 2);
      if (use_global_stats_ || m == 0) {
        for (int64_t i = 0; i < s; ++i) out[i] = g * dyp[i];
      } else {
        const M* xsp = plane_in<M>(xs + j0, s, 1);
        for (int64_t i = 0; i < s; ++i) out[i] = g * (dyp[i] - mdy - ((xsp[i] - mu) * is) * mdyx);
      }
      plane_out(out, s, dx + j0);
    }
  });
}

template <typename Ftype, typename Btype>
bool BatchNormLayer<Ftype, Btype>::CudnnPlanned() const {
#ifdef CORTADO_USE_CUDA
  return std::is_same_v<Ftype, float16> && std::is_same_v<Btype, float16> && this->cudnn_param().batch_norm() &&
         channels_last_ && !use_global_stats_ && (!residual_ || relu_);  // cuDNN adds a residual only before its activation
#else
  return false;
#endif
}

template <typename Ftype, typename Btype>
void BatchNormLayer<Ftype, Btype>::CudnnFallback(const char* why) const {
  if (!cudnn_fallbacks_.insert(why).second) return;
  LOG(WARNING) << "layer '" << this->layer_param().name() << "' (BatchNorm): cuDNN's BatchNorm does not run it ("
               << why << "); the layer's own kernels do";
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void BatchNormLayer<Ftype, Btype>::CudnnParams(const float** gamma, const float** beta) {
  // cuDNN's scale and bias in float: scale_bias's, a fused Scale's, else 1 and 0.
  const auto constant = [this](Blob* b, float v) {
    if (static_cast<int>(b->count()) != channels_) {
      b->Reshape({channels_});
      std::vector<float> host(channels_, v);
      std::copy(host.begin(), host.end(), b->template mutable_cpu_data<float>());
    }
    return b->template gpu_data<float>();
  };
  if (scale_bias_) {
    *gamma = this->blobs_[3]->template gpu_data<float>();
    *beta = this->blobs_[4]->template gpu_data<float>();
  } else if (affine_) {
    *gamma = affine_->blobs()[0]->template gpu_data<float>();
    *beta = affine_->blobs().size() > 1 ? affine_->blobs()[1]->template gpu_data<float>()
                                        : constant(&cudnn_zeros_, 0.f);
  } else {
    *gamma = constant(&cudnn_ones_, 1.f);
    *beta = constant(&cudnn_zeros_, 0.f);
  }
}

template <typename Ftype, typename Btype>
bool BatchNormLayer<Ftype, Btype>::UseCudnn(const BlobVec& bottom, const BlobVec& top) const {
  if (!CudnnPlanned()) {
    // Asked for but not planned: say why once (a type pair other than FP16
    // says nothing: cuDNN's NHWC kernels are for 16-bit nets).
    if (std::is_same_v<Ftype, float16> && std::is_same_v<Btype, float16> && this->cudnn_param().batch_norm() &&
        !use_global_stats_) {
      if (!channels_last_) CudnnFallback("its blob is not channels-last");
      else if (residual_ && !relu_) CudnnFallback("a fused residual add without a ReLU after it");
    }
    return false;
  }
  if (bottom[0]->num_axes() != 4) CudnnFallback("a bottom that is not 4-axis (N, C, H, W)");
  else if (top[0] == bottom[0]) CudnnFallback("in place (out of place is the training nets' plan)");
  else return true;
  return false;
}

template <typename Ftype, typename Btype>
bool BatchNormLayer<Ftype, Btype>::ForwardCudnn(const BlobVec& bottom, const BlobVec& top) {
  using M = float;
  if (!cudnn_) cudnn_ = std::make_shared<cudnn_bn::CudnnBatchNorm>();
  auto* bn = static_cast<cudnn_bn::CudnnBatchNorm*>(cudnn_.get());
  const Blob& b = *bottom[0];
  Ftype* y = chain_out(top)->template mutable_gpu_data<Ftype>();
  const Ftype* z = residual_ ? residual_->template gpu_data<Ftype>() : nullptr;
  if (z == y) {  // the sum in the residual's memory: the own kernels read each value before writing it
    CudnnFallback("the residual sum shares the residual's memory");
    return false;
  }
  bn->Reshape(b.shape(0), b.shape(1), b.shape(2), b.shape(3), relu_, residual_ != nullptr);
  const float *gamma, *beta;
  CudnnParams(&gamma, &beta);
  if (!bn->Forward(this->context().cudnn(), b.template gpu_data<Ftype>(), y, gamma, beta, eps_,
                   mean_.template mutable_gpu_data<M>(), inv_std_.template mutable_gpu_data<M>(), z))
    return false;  // cuDNN does not take the shape (logged there): the own kernels run it
  const double m = static_cast<double>(num_) * spatial_;
  gpu::bn_running_from_saved<M>(channels_, eps_, maf_, m > 1 ? m / (m - 1) : 1.0, mean_.template gpu_data<M>(),
                                inv_std_.template gpu_data<M>(), this->blobs_[0]->template mutable_gpu_data<M>(),
                                this->blobs_[1]->template mutable_gpu_data<M>(),
                                this->blobs_[2]->template mutable_gpu_data<M>(), this->context().stream());
  saved_ = false;
  cudnn_ran_ = true;
  return true;
}

template <typename Ftype, typename Btype>
void BatchNormLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  using M = MF;
  CUstream_st* stream = this->context().stream();
  cudnn_ran_ = false;
  cudnn_backward_ran_ = false;
  if constexpr (std::is_same_v<M, float>) {
    if (UseCudnn(bottom, top) && ForwardCudnn(bottom, top)) return;
  }
  M* mean = mean_.template mutable_gpu_data<M>();
  M* inv_std = inv_std_.template mutable_gpu_data<M>();
  M* run_mean = this->blobs_[0]->template mutable_gpu_data<M>();
  M* run_var = this->blobs_[1]->template mutable_gpu_data<M>();
  M* run_factor = this->blobs_[2]->template mutable_gpu_data<M>();
  const Ftype* x = bottom[0]->template gpu_data<Ftype>();
  if (use_global_stats_) {
    gpu::bn_global_stats<M>(channels_, run_mean, run_var, run_factor, mean, inv_std, stream);
  } else {
    gpu::bn_batch_stats<Ftype, M>(gpu_num(), channels_, gpu_spatial(), x, maf_, mean, inv_std, run_mean, run_var,
                                  run_factor, stream);
  }
  gpu::bn_inv_std<M>(channels_, eps_, inv_std, stream);
  const Ftype* gamma = scale_bias_ ? this->blobs_[3]->template gpu_data<Ftype>() : nullptr;
  const Ftype* beta = scale_bias_ ? this->blobs_[4]->template gpu_data<Ftype>() : nullptr;
  saved_ = KeepsCopy(bottom, top);
  Ftype* x_saved = saved_ ? x_saved_.template mutable_gpu_data<Ftype>() : nullptr;
  // Elementwise: y may be x (in place); each thread saves its x first.
  Ftype* y = chain_out(top)->template mutable_gpu_data<Ftype>();
  // Channels last, the fused kernels also serve a layer without tails: they
  // take 8 channels a thread where the plain ones take one value.
  if (affine_ || relu_ || residual_ || channels_last_) {
    const auto& ab = affine_ ? affine_->blobs() : this->blobs_;
    const gpu::BnTail<Ftype> tail{affine_ ? ab[0]->template gpu_data<Ftype>() : nullptr,
                                  affine_ && ab.size() > 1 ? ab[1]->template gpu_data<Ftype>() : nullptr, relu_,
                                  residual_ ? residual_->template gpu_data<Ftype>() : nullptr};
    gpu::bn_normalize_fused<Ftype, M>(gpu_num(), channels_, gpu_spatial(), x, mean, inv_std, gamma, beta, tail,
                                      x_saved, y, stream);
    return;
  }
  gpu::bn_normalize<Ftype, M>(gpu_num(), channels_, gpu_spatial(), x, mean, inv_std, gamma, beta, x_saved, y, stream);
}

template <typename Ftype, typename Btype>
void BatchNormLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                const BlobVec& bottom) {
  using M = math_t<Btype>;
  CUstream_st* stream = this->context().stream();
  cudnn_backward_ran_ = false;
  const Btype* dy = chain_out(top)->template gpu_diff<Btype>();
  const Ftype* x_saved = saved_ ? x_saved_.template gpu_data<Ftype>() : bottom[0]->template gpu_data<Ftype>();
  const M* mean = mean_.template gpu_data<M>();
  const M* inv_std = inv_std_.template gpu_data<M>();
  M* sdy = sdy_.template mutable_gpu_data<M>();
  M* sdyx = sdyx_.template mutable_gpu_data<M>();
  const bool dg = scale_bias_ && this->param_propagate_down(3);
  const bool db = scale_bias_ && this->param_propagate_down(4);
  const bool dx_wanted = !propagate_down.empty() && propagate_down[0];
  if constexpr (std::is_same_v<M, float>) {
    // cuDNN writes dx (and a residual's gradient) where no two of them and dy
    // share memory (the diff plan may give dx the memory of a sum's dy, which
    // the kernels below allow); else the kernels below use its statistics.
    Btype* dx = dx_wanted ? bottom[0]->template mutable_gpu_diff<Btype>() : nullptr;
    Btype* dz = nullptr;
    if (cudnn_ran_ && residual_ && residual_diff_) {
      dz = residual_->template mutable_gpu_diff<Btype>();
    } else if (cudnn_ran_ && residual_) {
      cudnn_dz_.ReshapeLike(*bottom[0]);
      dz = cudnn_dz_.template mutable_gpu_data<Btype>();
    }
    if (cudnn_ran_ && !dx_wanted) CudnnFallback("backward: no input gradient is wanted");
    else if (cudnn_ran_ && (dx == dy || dz == dy || dz == dx))
      CudnnFallback("backward: the input's, the output's or the residual's gradients share memory");
    if (cudnn_ran_ && dx_wanted && dx != dy && dz != dy && dz != dx) {
      cudnn_backward_ran_ = true;
      auto* bn = static_cast<cudnn_bn::CudnnBatchNorm*>(cudnn_.get());
      const float *gamma, *beta;
      CudnnParams(&gamma, &beta);
      cudnn_dgamma_.Reshape({channels_});
      cudnn_dbeta_.Reshape({channels_});
      float* dgamma = cudnn_dgamma_.template mutable_gpu_data<float>();
      float* dbeta = cudnn_dbeta_.template mutable_gpu_data<float>();
      bn->Backward(this->context().cudnn(), x_saved, chain_out(top)->template gpu_data<Ftype>(), dy, dx, gamma, beta,
                   dgamma, dbeta, eps_, mean, inv_std, dz);
      // The parameters' gradients: BatchNorm's own (scale_bias) or its fused Scale's.
      const bool want_s = affine_ && affine_->param_propagate_down(0);
      const bool want_b = affine_ && affine_->blobs().size() > 1 && affine_->param_propagate_down(1);
      Blob* g = dg ? this->blobs_[3].get() : want_s ? affine_->blobs()[0].get() : nullptr;
      Blob* b = db ? this->blobs_[4].get() : want_b ? affine_->blobs()[1].get() : nullptr;
      if (g) gpu::bn_add_param_diff<Btype>(channels_, dgamma, g->template mutable_gpu_diff<Btype>(), stream);
      if (b) gpu::bn_add_param_diff<Btype>(channels_, dbeta, b->template mutable_gpu_diff<Btype>(), stream);
      return;
    }
  }
  if (affine_ || relu_ || residual_ || channels_last_) {
    // The fused chain (layer_fusion.hpp): the same two passes, dy formed from
    // the top's diff in each; the first also writes a residual's gradient.
    const bool want_s = affine_ && affine_->param_propagate_down(0);
    const bool want_b = affine_ && affine_->blobs().size() > 1 && affine_->param_propagate_down(1);
    Btype* rd = residual_ && residual_diff_ ? residual_->template mutable_gpu_diff<Btype>() : nullptr;
    const gpu::BnTail<Btype> tail{affine_ ? affine_->blobs()[0]->template gpu_data<Btype>() : nullptr, nullptr, relu_,
                                  nullptr, rd};
    const Ftype* y = relu_ ? chain_out(top)->template gpu_data<Ftype>() : nullptr;
    if (dg || db || want_s || want_b || (dx_wanted && !use_global_stats_) || rd) {
      gpu::bn_backward_reduce_fused<Btype, Ftype, M>(
          gpu_num(), channels_, gpu_spatial(), dy, y, x_saved, mean, inv_std, tail, sdy, sdyx,
          dg ? this->blobs_[3]->template mutable_gpu_diff<Btype>() : nullptr,
          db ? this->blobs_[4]->template mutable_gpu_diff<Btype>() : nullptr,
          want_s ? affine_->blobs()[0]->template mutable_gpu_diff<Btype>() : nullptr,
          want_b ? affine_->blobs()[1]->template mutable_gpu_diff<Btype>() : nullptr, stream);
    }
    if (!dx_wanted) return;
    const Btype* gamma = scale_bias_ ? this->blobs_[3]->template gpu_data<Btype>() : nullptr;
    // With a residual's gradient written, that is the masked dout: the dx
    // pass reads it alone instead of dout and the top's data (one read fewer).
    gpu::BnTail<Btype> dx_tail = tail;
    if (rd) dx_tail.relu = false;
    gpu::bn_backward_dx_fused<Btype, Ftype, M>(gpu_num(), channels_, gpu_spatial(), rd ? rd : dy, rd ? nullptr : y,
                                               x_saved, mean, inv_std, gamma, dx_tail,
                                               use_global_stats_ ? nullptr : sdy,
                                               use_global_stats_ ? nullptr : sdyx,
                                               bottom[0]->template mutable_gpu_diff<Btype>(), stream);
    return;
  }
  if (dg || db || (dx_wanted && !use_global_stats_)) {
    gpu::bn_backward_reduce<Btype, Ftype, M>(gpu_num(), channels_, gpu_spatial(), dy, x_saved, mean, inv_std, sdy, sdyx,
                                      dg ? this->blobs_[3]->template mutable_gpu_diff<Btype>() : nullptr,
                                      db ? this->blobs_[4]->template mutable_gpu_diff<Btype>() : nullptr, stream);
  }
  if (!dx_wanted) return;
  const Btype* gamma = scale_bias_ ? this->blobs_[3]->template gpu_data<Btype>() : nullptr;
  Btype* dx = bottom[0]->template mutable_gpu_diff<Btype>();
  gpu::bn_backward_dx<Btype, Ftype, M>(gpu_num(), channels_, gpu_spatial(), dy, x_saved, mean, inv_std, gamma,
                                use_global_stats_ ? nullptr : sdy, use_global_stats_ ? nullptr : sdyx, dx, stream);
}
#endif  // CORTADO_USE_CUDA

CORTADO_INSTANTIATE_LAYER(BatchNormLayer);

}  // namespace cortado
