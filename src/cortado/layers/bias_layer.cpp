#include "cortado/layers/bias_layer.hpp"

#include "cortado/layers/filler.hpp"
#include "cortado/layers/broadcast_param.hpp"
#include "cortado/layers/param_blobs.hpp"
#include "cortado/util/math.hpp"
#include "cortado/util/math_buffer.hpp"
#include "cortado/util/gpu_math.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
std::vector<int> BiasLayer<Ftype, Btype>::ParamShape(const Blob& x) const {
  const BiasParameter& p = this->layer_param().bias_param();
  return BroadcastParamShape(*this, "bias_param", p.axis(), p.num_axes(), x);
}

template <typename Ftype, typename Btype>
void BiasLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const BiasParameter& p = this->layer_param().bias_param();
  if (bottom.size() > 1) {
    this->param_propagate_down_.assign(this->blobs_.size(), true);
    return;
  }
  CheckFiller(*this, p.filler(), "bias_param.filler");
  const std::vector<int> shape = ParamShape(*bottom[0]);
  if (!this->blobs_.empty()) {
    if (this->blobs_.size() != 1 || this->blobs_[0]->shape() != shape) {
      this->field_error("blobs", "expected one bias blob of shape ", shape_string(shape));
    }
  } else {
    this->blobs_.push_back(this->make_param(shape));
    Fill(p.filler(), this->blobs_[0].get(), "bias_param.filler");
  }
  this->param_propagate_down_.assign(1, true);
}

template <typename Ftype, typename Btype>
void BiasLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& x = *bottom[0];
  const BroadcastView v =
      BroadcastAxes(*this, "bias_param", "bias", this->layer_param().bias_param().axis(), x, *bias(bottom));
  outer_ = v.outer, dim_ = v.dim, inner_ = v.inner;
  channels_last_ = x.channels_last();
  if (top[0] != bottom[0]) top[0]->ReshapeLike(x);
}

template <typename Ftype, typename Btype>
void BiasLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if (nchw_.Use(bottom, top)) {
    nchw_.Forward(bottom, top, type_of<Ftype>(), false, nullptr,
                  [&](const BlobVec& b, const BlobVec& t) { Forward_cpu(b, t); });
    return;
  }
  using M = math_t<Ftype>;
  const int64_t count = outer_ * dim_ * inner_;
  const M* xp = bottom[0]->template cpu_data<M>();
  const std::vector<M> x(xp, xp + count);  // top may be bottom
  const M* b = bias(bottom)->template cpu_data<M>();
  const std::vector<M> bv(b, b + dim_);
  MathBuffer<Ftype> y(top[0]->template mutable_cpu_data<Ftype>(), count, false);
  for (int64_t j = 0; j < count; ++j) y.get()[j] = x[j] + bv[(j / inner_) % dim_];
  y.store();
}

template <typename Ftype, typename Btype>
void BiasLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  if (nchw_.Use(bottom, top)) {
    nchw_.Backward(top, propagate_down, bottom, type_of<Ftype>(), type_of<Btype>(), false, nullptr,
                   [&](const BlobVec& t, const BlobVec& b) { Backward_cpu(t, propagate_down, b); });
    return;
  }
  using M = math_t<Btype>;
  const int64_t count = outer_ * dim_ * inner_;
  const bool second = bottom.size() > 1;
  const bool want_b = second ? propagate_down.size() > 1 && propagate_down[1] : this->param_propagate_down(0);
  if (want_b) {
    const M* dy = top[0]->template cpu_diff<M>();
    std::vector<M> sum(dim_, M(0));
    for (int64_t j = 0; j < count; ++j) sum[(j / inner_) % dim_] += dy[j];
    Blob* b = bias(bottom);
    MathBuffer<Btype> db(b->template mutable_cpu_diff<Btype>(), dim_, !second);
    for (int64_t d = 0; d < dim_; ++d) db.get()[d] = (second ? M(0) : db.get()[d]) + sum[d];
    db.store();
  }
  if (!propagate_down.empty() && propagate_down[0] && top[0] != bottom[0]) {
    const M* dy = top[0]->template cpu_diff<M>();
    const std::vector<M> g(dy, dy + count);
    MathBuffer<Btype> dx(bottom[0]->template mutable_cpu_diff<Btype>(), count, false);
    for (int64_t j = 0; j < count; ++j) dx.get()[j] = g[j];
    dx.store();
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void BiasLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->template gpu_data<Ftype>();
  const Ftype* b = bias(bottom)->template gpu_data<Ftype>();
  Ftype* y = top[0]->template mutable_gpu_data<Ftype>();
  gpu::bias_forward<Ftype>(gpu_outer(), dim_, gpu_inner(), x, b, y, this->context().stream());
}

template <typename Ftype, typename Btype>
void BiasLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  CUstream_st* stream = this->context().stream();
  const int64_t count = outer_ * dim_ * inner_;
  const bool second = bottom.size() > 1;
  const bool want_b = second ? propagate_down.size() > 1 && propagate_down[1] : this->param_propagate_down(0);
  const Btype* dy = top[0]->template gpu_diff<Btype>();
  if (want_b) {
    gpu::bias_backward<Btype>(gpu_outer(), dim_, gpu_inner(), dy, !second,
                              bias(bottom)->template mutable_gpu_diff<Btype>(), stream);
  }
  if (!propagate_down.empty() && propagate_down[0] && top[0] != bottom[0]) {
    gpu_copy<Btype>(count, dy, bottom[0]->template mutable_gpu_diff<Btype>(), stream);
  }
}
#endif  // CORTADO_USE_CUDA

CORTADO_INSTANTIATE_LAYER(BiasLayer);

}  // namespace cortado
