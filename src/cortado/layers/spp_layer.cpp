#include "cortado/layers/spp_layer.hpp"

#include <algorithm>
#include <string>

#include "cortado/util/cuda.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void SPPLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const SPPParameter& p = this->layer_param().spp_param();
  if (!p.has_pyramid_height() || p.pyramid_height() < 1 || p.pyramid_height() > 31) {
    this->field_error("spp_param.pyramid_height", "must be set and in [1, 31], got ",
                      p.has_pyramid_height() ? p.pyramid_height() : 0);
  }
  if (p.pool() == SPPParameter::STOCHASTIC) {
    this->field_error("spp_param.pool", "STOCHASTIC is not supported (the pyramid levels are padded, and stochastic "
                                        "pooling takes no padding); use MAX or AVE");
  }
  pyramid_height_ = static_cast<int>(p.pyramid_height());
  pool_ = p.pool() == SPPParameter::AVE ? PoolingParameter::AVE : PoolingParameter::MAX;
  height_ = width_ = -1;
  levels_.clear();
}

template <typename Ftype, typename Btype>
void SPPLayer<Ftype, Btype>::BuildLevels(const BlobVec& bottom, const BlobVec& top) {
  const int h = bottom[0]->shape(2), w = bottom[0]->shape(3);
  const int64_t channels = bottom[0]->shape(1);
  std::vector<Level> levels;
  int64_t offset = 0;
  for (int l = 0; l < pyramid_height_; ++l) {
    const int64_t bins = int64_t{1} << l;
    const int64_t kh = (h + bins - 1) / bins, kw = (w + bins - 1) / bins;
    const int64_t ph = (kh * bins - h + 1) / 2, pw = (kw * bins - w + 1) / 2;
    if (ph >= kh || pw >= kw) {
      this->field_error("spp_param.pyramid_height", "level ", l, " (", bins, "x", bins, " bins) does not fit the ",
                        h, "x", w, " input: kernel ", kh, "x", kw, " would need pad ", ph, "x", pw,
                        ", and pooling needs pad < kernel; lower pyramid_height or use a larger input");
    }
    LayerParameter lp;
    lp.set_name(this->name() + "/level" + std::to_string(l));
    lp.set_type("Pooling");
    lp.set_forward_type(this->forward_type());
    lp.set_backward_type(this->backward_type());
    lp.set_phase(this->layer_param().phase());
    PoolingParameter* pp = lp.mutable_pooling_param();
    pp->set_pool(pool_);
    pp->set_kernel_h(static_cast<uint32_t>(kh));
    pp->set_kernel_w(static_cast<uint32_t>(kw));
    pp->set_pad_h(static_cast<uint32_t>(ph));
    pp->set_pad_w(static_cast<uint32_t>(pw));
    pp->set_stride_h(static_cast<uint32_t>(kh));
    pp->set_stride_w(static_cast<uint32_t>(kw));
    Level level;
    level.pool = std::make_unique<PoolingLayer<Ftype, Btype>>(lp);
    level.pool->set_context(this->ctx_);
    level.out = std::make_unique<Blob>(type_of<Ftype>());
    level.size = channels * bins * bins;
    level.offset = offset;
    offset += level.size;
    Blob* out = pyramid_height_ == 1 ? top[0] : level.out.get();
    level.pool->SetUp(bottom, {out});
    CORTADO_CHECK(out->shape(2) == bins && out->shape(3) == bins)
        << "SPP level " << l << " pooled to " << out->shape_string() << ", not " << bins << "x" << bins;
    levels.push_back(std::move(level));
  }
  levels_ = std::move(levels);
  height_ = h;
  width_ = w;
  row_ = offset;
}

template <typename Ftype, typename Btype>
void SPPLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->num_axes() != 4) {
    this->field_error("bottom", "has shape ", bottom[0]->shape_string(), "; SPP needs 4 axes (N, C, H, W)");
  }
  if (bottom[0]->shape(2) < 1 || bottom[0]->shape(3) < 1) {
    this->field_error("bottom", "has shape ", bottom[0]->shape_string(), "; SPP needs H and W of at least 1");
  }
  if (top[0] == bottom[0]) this->field_error("top", "SPP cannot be computed in place");
  if (bottom[0]->shape(2) != height_ || bottom[0]->shape(3) != width_) BuildLevels(bottom, top);
  const int num = bottom[0]->shape(0), channels = bottom[0]->shape(1);
  if (pyramid_height_ == 1) {
    top[0]->Reshape({num, channels, 1, 1});
  } else {
    top[0]->Reshape({num, static_cast<int>(row_)});
  }
}

template <typename Ftype, typename Btype>
void SPPLayer<Ftype, Btype>::ForwardLevel(Level& level, const BlobVec& bottom, const BlobVec& top) {
  level.pool->set_context(this->ctx_);
  level.pool->Forward(bottom, {pyramid_height_ == 1 ? top[0] : level.out.get()});
}

template <typename Ftype, typename Btype>
void SPPLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t num = bottom[0]->shape(0);
  for (Level& level : levels_) {
    ForwardLevel(level, bottom, top);
    if (pyramid_height_ == 1) return;
    const Ftype* x = level.out->template cpu_data<Ftype>();
    Ftype* y = top[0]->mutable_cpu_data<Ftype>();
    for (int64_t n = 0; n < num; ++n) {
      std::copy(x + n * level.size, x + (n + 1) * level.size, y + n * row_ + level.offset);
    }
  }
}

template <typename Ftype, typename Btype>
bool SPPLayer<Ftype, Btype>::BackwardPyramid(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  if (propagate_down.empty() || !propagate_down[0]) return false;
  levels_[0].pool->set_context(this->ctx_);
  if (pyramid_height_ == 1) {
    levels_[0].pool->Backward(top, {true}, bottom);
    return false;
  }
  return true;
}

template <typename Ftype, typename Btype>
void SPPLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (!BackwardPyramid(top, propagate_down, bottom)) return;
  using M = math_t<Btype>;
  const int64_t num = bottom[0]->shape(0), count = static_cast<int64_t>(bottom[0]->count());
  std::vector<M> acc(static_cast<size_t>(count));
  for (size_t l = 0; l < levels_.size(); ++l) {
    Level& level = levels_[l];
    const Btype* dy = top[0]->cpu_diff<Btype>();
    Btype* d = level.out->template mutable_cpu_diff<Btype>();
    for (int64_t n = 0; n < num; ++n) {
      const Btype* src = dy + n * row_ + level.offset;
      std::copy(src, src + level.size, d + n * level.size);
    }
    level.pool->set_context(this->ctx_);
    level.pool->Backward({level.out.get()}, {true}, bottom);  // the bottom diff holds this level's gradient
    const Btype* g = bottom[0]->cpu_diff<Btype>();
    for (int64_t i = 0; i < count; ++i) acc[i] = (l == 0 ? M(0) : acc[i]) + static_cast<M>(g[i]);
  }
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  for (int64_t i = 0; i < count; ++i) dx[i] = static_cast<Btype>(acc[i]);
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void SPPLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const size_t num = static_cast<size_t>(bottom[0]->shape(0));
  for (Level& level : levels_) {
    ForwardLevel(level, bottom, top);
    if (pyramid_height_ == 1) return;
    if (num == 0) continue;
    const Ftype* x = level.out->template gpu_data<Ftype>();
    Ftype* y = top[0]->mutable_gpu_data<Ftype>();
    CORTADO_CUDA_CHECK(cudaMemcpy2DAsync(y + level.offset, row_ * sizeof(Ftype), x, level.size * sizeof(Ftype),
                                         level.size * sizeof(Ftype), num, cudaMemcpyDeviceToDevice,
                                         this->context().stream()));
  }
}

template <typename Ftype, typename Btype>
void SPPLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (!BackwardPyramid(top, propagate_down, bottom)) return;
  using M = math_t<Btype>;
  const size_t num = static_cast<size_t>(bottom[0]->shape(0));
  const int64_t count = static_cast<int64_t>(bottom[0]->count());
  if (count == 0) return;
  std::unique_ptr<void, void (*)(void*)> acc(cuda::device_alloc(count * sizeof(M)), &cuda::device_free);
  for (size_t l = 0; l < levels_.size(); ++l) {
    Level& level = levels_[l];
    CORTADO_CUDA_CHECK(cudaMemcpy2DAsync(level.out->template mutable_gpu_diff<Btype>(), level.size * sizeof(Btype),
                                         top[0]->gpu_diff<Btype>() + level.offset, row_ * sizeof(Btype),
                                         level.size * sizeof(Btype), num, cudaMemcpyDeviceToDevice,
                                         this->context().stream()));
    level.pool->set_context(this->ctx_);
    level.pool->Backward({level.out.get()}, {true}, bottom);  // the bottom diff holds this level's gradient
    if (l + 1 < levels_.size()) {
      gpu::spp_accumulate<Btype>(count, bottom[0]->gpu_diff<Btype>(), static_cast<M*>(acc.get()), l == 0,
                                 this->context().stream());
    } else {
      gpu::spp_finish<Btype>(count, static_cast<const M*>(acc.get()), bottom[0]->mutable_gpu_diff<Btype>(),
                             this->context().stream());
    }
  }
}
#endif

CORTADO_INSTANTIATE_LAYER(SPPLayer);

}  // namespace cortado
