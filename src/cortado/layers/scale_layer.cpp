#include "cortado/layers/scale_layer.hpp"

#include <climits>

#include "cortado/layers/filler.hpp"
#include "cortado/layers/broadcast_param.hpp"
#include "cortado/layers/param_blobs.hpp"
#include "cortado/util/cpu_parallel.hpp"
#include "cortado/util/math.hpp"
#include "cortado/util/math_buffer.hpp"
#include "cortado/util/plane_math.hpp"
#include "cortado/util/gpu_math.hpp"

namespace cortado {

namespace {
// body(o, d, j) for every (outer, dim) plane of inner values, j its first
// index; the planes are split into chunks over the cores.
template <typename F>
void for_planes(int64_t outer, int64_t dim, int64_t inner, F&& body) {
  const int64_t planes = outer * dim;
  if (planes > INT_MAX) {
    for (int64_t p = 0; p < planes; ++p) body(p / dim, p % dim, p * inner);
    return;
  }
  cpu_parallel_for(static_cast<int>(planes), [&](int, int p0, int p1) {
    for (int64_t p = p0; p < p1; ++p) body(p / dim, p % dim, p * inner);
  });
}

// body(d0, d1) for chunks [d0, d1) of the dim axis, over the cores.
template <typename F>
void for_dims(int64_t dim, F&& body) {
  if (dim > INT_MAX) return body(int64_t{0}, dim);
  cpu_parallel_for(static_cast<int>(dim), [&](int, int d0, int d1) { body(int64_t{d0}, int64_t{d1}); });
}
}  // namespace

template <typename Ftype, typename Btype>
std::vector<int> ScaleLayer<Ftype, Btype>::ParamShape(const Blob& x) const {
  const ScaleParameter& p = this->layer_param().scale_param();
  return BroadcastParamShape(*this, "scale_param", p.axis(), p.num_axes(), x);
}

template <typename Ftype, typename Btype>
void ScaleLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ScaleParameter& p = this->layer_param().scale_param();
  bias_term_ = p.bias_term();
  const bool one = bottom.size() == 1;
  if (one) CheckFiller(*this, p.filler(), "scale_param.filler");
  if (bias_term_) CheckFiller(*this, p.bias_filler(), "scale_param.bias_filler");
  const std::vector<int> shape = one ? ParamShape(*bottom[0]) : bottom[1]->shape();
  const size_t want = (one ? 1 : 0) + (bias_term_ ? 1 : 0);
  auto& blobs = this->blobs_;
  if (!blobs.empty()) {
    if (blobs.size() != want) {
      this->field_error("blobs", "expected ", want, " parameter blobs, got ", blobs.size());
    }
    for (auto& b : blobs) {
      if (b->shape() != shape) {
        this->field_error("blobs", "parameter shape ", b->shape_string(), " does not match the expected ",
                          shape_string(shape));
      }
    }
  } else {
    if (one) {
      FillerParameter f = p.filler();
      if (!p.has_filler()) f.set_value(1);  // constant 1 by default
      blobs.push_back(this->make_param(shape));
      Fill(f, blobs.back().get(), "scale_param.filler");
    }
    if (bias_term_) {
      blobs.push_back(this->make_param(shape));
      Fill(p.bias_filler(), blobs.back().get(), "scale_param.bias_filler");
    }
  }
  this->param_propagate_down_.assign(blobs.size(), true);
  const int axis = p.axis() < 0 ? p.axis() + bottom[0]->num_axes() : p.axis();
  channel_affine_ = one && axis == 1 && shape.size() == 1;
}

template <typename Ftype, typename Btype>
void ScaleLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& x = *bottom[0];
  const Blob& s = *scale(bottom);
  const BroadcastView v = BroadcastAxes(*this, "scale_param", "scale", this->layer_param().scale_param().axis(), x, s);
  if (bias_term_ && bias_blob(bottom)->count() != s.count()) {
    this->field_error("blobs", "bias shape ", bias_blob(bottom)->shape_string(), " does not match scale shape ",
                      s.shape_string());
  }
  outer_ = v.outer, dim_ = v.dim, inner_ = v.inner;
  channels_last_ = x.channels_last();
  if (top[0] != bottom[0]) top[0]->ReshapeLike(x);
  if (top[0] == bottom[0]) x_copy_.ReshapeLike(x);
}

template <typename Ftype, typename Btype>
bool ScaleLayer<Ftype, Btype>::KeepsCopy(const BlobVec& bottom, const BlobVec& top) const {
  // Only the scale's gradient reads x; a second bottom's propagate_down is
  // not known before the backward, so that case keeps the copy.
  return top[0] == bottom[0] && (bottom.size() > 1 || this->param_propagate_down(0));
}

template <typename Ftype, typename Btype>
void ScaleLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if (fused_away()) return;  // the BatchNorm before it computes y
  if (nchw_.Use(bottom, top)) {
    nchw_.Forward(bottom, top, type_of<Ftype>(), false, nullptr,
                  [&](const BlobVec& b, const BlobVec& t) { Forward_cpu(b, t); });
    return;
  }
  using M = math_t<Ftype>;
  const int64_t count = outer_ * dim_ * inner_;
  copied_ = KeepsCopy(bottom, top);
  if (copied_) {
    cpu_copy<Ftype>(count, bottom[0]->template cpu_data<Ftype>(), x_copy_.template mutable_cpu_data<Ftype>());
  }
  // x and y may be one array (in place): a plane of x is read before that
  // plane of y is written; 16-bit planes are widened one at a time
  // (plane_math.hpp).
  const Ftype* x = bottom[0]->template cpu_data<Ftype>();
  const M* sp = scale(bottom)->template cpu_data<M>();
  const std::vector<M> s(sp, sp + dim_);
  std::vector<M> b(dim_, M(0));
  if (bias_term_) {
    const M* bp = bias_blob(bottom)->template cpu_data<M>();
    b.assign(bp, bp + dim_);
  }
  Ftype* y = top[0]->template mutable_cpu_data<Ftype>();
  // Nested loops, not an index division per element: this layer follows
  // every BatchNorm of a Caffe-style ResNet.
  for_planes(outer_, dim_, inner_, [&](int64_t, int64_t d, int64_t j) {
    const M sd = s[d], bd = b[d];
    const M* xp = plane_in<M>(x + j, inner_, 0);
    M* out = plane_buf<M>(y + j, inner_, 1);
    for (int64_t i = 0; i < inner_; ++i) out[i] = xp[i] * sd + bd;
    plane_out(out, inner_, y + j);
  });
}

template <typename Ftype, typename Btype>
void ScaleLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  if (fused_away()) return;
  if (nchw_.Use(bottom, top)) {
    nchw_.Backward(top, propagate_down, bottom, type_of<Ftype>(), type_of<Btype>(), false, nullptr,
                   [&](const BlobVec& t, const BlobVec& b) { Backward_cpu(t, propagate_down, b); });
    return;
  }
  using M = math_t<Btype>;
  const bool second = bottom.size() > 1;
  // dy and dx may be one array (in place): the sums come first, and a plane
  // of dy is read before that plane of dx is written.
  const Btype* dy = top[0]->template cpu_diff<Btype>();
  const bool want_s = second ? propagate_down.size() > 1 && propagate_down[1] : this->param_propagate_down(0);
  const bool want_b = bias_term_ && this->param_propagate_down(bias_index(bottom));
  // Per d, the sums of term(dy plane, x plane, i) over the planes of d, in the batch's order.
  auto plane_sums = [&](const Ftype* x, auto&& term) {
    std::vector<M> sum(dim_, M(0));
    for_dims(dim_, [&](int64_t d0, int64_t d1) {
      for (int64_t o = 0; o < outer_; ++o)
        for (int64_t d = d0; d < d1; ++d) {
          const int64_t j = (o * dim_ + d) * inner_;
          const M* dyp = plane_in<M>(dy + j, inner_, 0);
          const M* xp = x ? plane_in<M>(x + j, inner_, 1) : nullptr;
          sum[d] += lane_sum<M>(inner_, [&](int64_t i) { return term(dyp, xp, i); });
        }
    });
    return sum;
  };
  if (want_s) {
    const std::vector<M> sum = plane_sums(saved_x(bottom, top).template cpu_data<Ftype>(),
                                          [](const M* g, const M* x, int64_t i) { return g[i] * x[i]; });
    MathBuffer<Btype> ds(scale(bottom)->template mutable_cpu_diff<Btype>(), dim_, !second);
    for (int64_t d = 0; d < dim_; ++d) ds.get()[d] = (second ? M(0) : ds.get()[d]) + sum[d];
    ds.store();
  }
  if (want_b) {
    const std::vector<M> sum = plane_sums(nullptr, [](const M* g, const M*, int64_t i) { return g[i]; });
    MathBuffer<Btype> db(bias_blob(bottom)->template mutable_cpu_diff<Btype>(), dim_, true);
    for (int64_t d = 0; d < dim_; ++d) db.get()[d] += sum[d];
    db.store();
  }
  if (!propagate_down.empty() && propagate_down[0]) {
    const M* sp = scale(bottom)->template cpu_data<M>();
    const std::vector<M> s(sp, sp + dim_);
    Btype* dx = bottom[0]->template mutable_cpu_diff<Btype>();
    for_planes(outer_, dim_, inner_, [&](int64_t, int64_t d, int64_t j) {
      const M sd = s[d];
      const M* dyp = plane_in<M>(dy + j, inner_, 0);
      M* out = plane_buf<M>(dx + j, inner_, 1);
      for (int64_t i = 0; i < inner_; ++i) out[i] = dyp[i] * sd;
      plane_out(out, inner_, dx + j);
    });
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void ScaleLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (fused_away()) return;
  CUstream_st* stream = this->context().stream();
  const int64_t count = outer_ * dim_ * inner_;
  copied_ = KeepsCopy(bottom, top);
  if (copied_) {
    gpu_copy<Ftype>(count, bottom[0]->template gpu_data<Ftype>(), x_copy_.template mutable_gpu_data<Ftype>(), stream);
  }
  const Ftype* x = bottom[0]->template gpu_data<Ftype>();
  const Ftype* s = scale(bottom)->template gpu_data<Ftype>();
  const Ftype* b = bias_term_ ? bias_blob(bottom)->template gpu_data<Ftype>() : nullptr;
  Ftype* y = top[0]->template mutable_gpu_data<Ftype>();
  gpu::scale_forward<Ftype>(gpu_outer(), dim_, gpu_inner(), x, s, b, y, stream);
}

template <typename Ftype, typename Btype>
void ScaleLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  if (fused_away()) return;
  CUstream_st* stream = this->context().stream();
  const bool second = bottom.size() > 1;
  const bool want_s = second ? propagate_down.size() > 1 && propagate_down[1] : this->param_propagate_down(0);
  const bool want_b = bias_term_ && this->param_propagate_down(bias_index(bottom));
  const Btype* dy = top[0]->template gpu_diff<Btype>();
  if (want_s || want_b) {
    const Ftype* x = want_s ? saved_x(bottom, top).template gpu_data<Ftype>() : nullptr;
    Btype* ds = want_s ? scale(bottom)->template mutable_gpu_diff<Btype>() : nullptr;
    Btype* db = want_b ? bias_blob(bottom)->template mutable_gpu_diff<Btype>() : nullptr;
    gpu::scale_backward_params<Btype, Ftype>(gpu_outer(), dim_, gpu_inner(), dy, x, ds, !second, db, stream);
  }
  if (!propagate_down.empty() && propagate_down[0]) {
    const Btype* s = scale(bottom)->template gpu_data<Btype>();
    gpu::scale_backward_dx<Btype>(gpu_outer(), dim_, gpu_inner(), dy, s, bottom[0]->template mutable_gpu_diff<Btype>(),
                                  stream);
  }
}
#endif  // CORTADO_USE_CUDA

CORTADO_INSTANTIATE_LAYER(ScaleLayer);

}  // namespace cortado
