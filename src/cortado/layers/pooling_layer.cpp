#include "cortado/layers/pooling_layer.hpp"

#include <algorithm>
#include <utility>

#include "cortado/util/cpu_parallel.hpp"
#include "cortado/util/math_buffer.hpp"
#include "cortado/util/rng.hpp"
#include "cortado/util/cuda.hpp"

namespace cortado {

namespace {

// One pooling window: the clipped range [h0, h1) x [w0, w1) and the AVE
// divisor (the window clipped to the padded image, as Caffe counts it).
struct Window {
  int h0, h1, w0, w1, size;
};

inline Window window(int oy, int ox, int height, int width, int kh, int kw, int ph, int pw, int sh, int sw) {
  int h0 = oy * sh - ph, w0 = ox * sw - pw;
  int h1 = std::min(h0 + kh, height + ph), w1 = std::min(w0 + kw, width + pw);
  const int size = (h1 - h0) * (w1 - w0);
  h0 = std::max(h0, 0);
  w0 = std::max(w0, 0);
  h1 = std::min(h1, height);
  w1 = std::min(w1, width);
  return {h0, h1, w0, w1, size};
}

// sum(x) and sum(x^2) over one window of a plane (stochastic pooling's TEST phase).
template <typename M>
std::pair<M, M> window_sums(const M* xp, const Window& win, int width) {
  M sum = 0, sq = 0;
  for (int h = win.h0; h < win.h1; ++h) {
    for (int w = win.w0; w < win.w1; ++w) {
      const M v = xp[h * width + w];
      sum += v;
      sq += v * v;
    }
  }
  return {sum, sq};
}

// Caffe's output extent, rounded up (or down with `floor`); the last window
// must start inside the image or its padding on the near side (see the header).
inline int out_extent(int in, int k, int p, int s, bool floor) {
  int out = (in + 2 * p - k + (floor ? 0 : s - 1)) / s + 1;
  if ((out - 1) * s >= in + p) --out;
  return out;
}

}  // namespace

template <typename Ftype, typename Btype>
void PoolingLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const PoolingParameter& p = this->layer_param().pooling_param();
  max_ = p.pool() == PoolingParameter::MAX;
  stochastic_ = p.pool() == PoolingParameter::STOCHASTIC;
  global_ = p.global_pooling();
  if (p.torch_pooling() && p.has_round_mode() && p.round_mode() == PoolingParameter::CEIL)
    this->field_error("pooling_param.torch_pooling", "rounds the output size down; round_mode: CEIL contradicts it");
  floor_ = p.round_mode() == PoolingParameter::FLOOR || p.torch_pooling();
  const bool has_hw_kernel = p.has_kernel_h() || p.has_kernel_w();
  if (global_) {
    if (p.has_kernel_size() || has_hw_kernel) {
      this->field_error("pooling_param.kernel_size", "must not be set with global_pooling (the kernel is the whole input)");
    }
    if (p.pad() != 0 || p.pad_h() != 0 || p.pad_w() != 0) {
      this->field_error("pooling_param.pad", "must be 0 with global_pooling");
    }
    if (p.stride() != 1 || p.has_stride_h() || p.has_stride_w()) {
      this->field_error("pooling_param.stride", "must be 1 (unset) with global_pooling");
    }
  } else {
    if (p.has_kernel_size() && has_hw_kernel) {
      this->field_error("pooling_param.kernel_size", "give either kernel_size or kernel_h and kernel_w, not both");
    }
    if (has_hw_kernel && !(p.has_kernel_h() && p.has_kernel_w())) {
      this->field_error(p.has_kernel_h() ? "pooling_param.kernel_w" : "pooling_param.kernel_h",
                        "kernel_h and kernel_w must be given together");
    }
    if (!p.has_kernel_size() && !has_hw_kernel) {
      this->field_error("pooling_param.kernel_size", "is required (or kernel_h and kernel_w, or global_pooling)");
    }
    kh_ = static_cast<int>(has_hw_kernel ? p.kernel_h() : p.kernel_size());
    kw_ = static_cast<int>(has_hw_kernel ? p.kernel_w() : p.kernel_size());
    if (kh_ <= 0 || kw_ <= 0) this->field_error("pooling_param.kernel_size", "must be positive, got ", kh_, "x", kw_);
  }
  if (p.has_pad_h() || p.has_pad_w()) {
    if (p.has_pad()) this->field_error("pooling_param.pad", "give either pad or pad_h/pad_w, not both");
    ph_ = static_cast<int>(p.pad_h());
    pw_ = static_cast<int>(p.pad_w());
  } else {
    ph_ = pw_ = static_cast<int>(p.pad());
  }
  if (p.has_stride_h() || p.has_stride_w()) {
    if (p.has_stride()) this->field_error("pooling_param.stride", "give either stride or stride_h and stride_w, not both");
    if (!(p.has_stride_h() && p.has_stride_w())) {
      this->field_error(p.has_stride_h() ? "pooling_param.stride_w" : "pooling_param.stride_h",
                        "stride_h and stride_w must be given together");
    }
    sh_ = static_cast<int>(p.stride_h());
    sw_ = static_cast<int>(p.stride_w());
  } else {
    sh_ = sw_ = static_cast<int>(p.stride());
  }
  if (sh_ <= 0 || sw_ <= 0) this->field_error("pooling_param.stride", "must be positive, got ", sh_, "x", sw_);
  if (!global_ && (ph_ >= kh_ || pw_ >= kw_)) {
    this->field_error("pooling_param.pad", "pad ", ph_, "x", pw_, " must be smaller than the kernel ", kh_, "x", kw_);
  }
  if (stochastic_ && (ph_ != 0 || pw_ != 0)) {
    this->field_error("pooling_param.pad", "STOCHASTIC pooling takes no padding, got ", ph_, "x", pw_);
  }
  if (top.size() > 1 && !max_) this->field_error("top", "only MAX pooling has a second (mask) top");
}

template <typename Ftype, typename Btype>
void PoolingLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->num_axes() != 4) {
    this->field_error("bottom", "has shape ", bottom[0]->shape_string(), "; Pooling needs 4 axes (N, C, H, W)");
  }
  num_ = bottom[0]->shape(0);
  channels_ = bottom[0]->shape(1);
  height_ = bottom[0]->shape(2);
  width_ = bottom[0]->shape(3);
  if (global_) {
    kh_ = height_;
    kw_ = width_;
  }
  if (kh_ > height_ + 2 * ph_ || kw_ > width_ + 2 * pw_) {
    this->field_error("pooling_param.kernel_size", "kernel ", kh_, "x", kw_, " is larger than the padded input ",
                      height_ + 2 * ph_, "x", width_ + 2 * pw_, " (pad ", ph_, "x", pw_, ")");
  }
  out_h_ = out_extent(height_, kh_, ph_, sh_, floor_);
  out_w_ = out_extent(width_, kw_, pw_, sw_, floor_);
  for (Blob* t : top) t->Reshape({num_, channels_, out_h_, out_w_});
  if (max_ || stochastic_) mask_.resize(top[0]->count());
  for (const Blob* t : top) {
    if (t->layout() != bottom[0]->layout()) {
      this->field_error("top", "the top's layout (", layout_name(t->layout()), ") is not the bottom's (",
                        layout_name(bottom[0]->layout()), ")");
    }
  }
  if (bottom[0]->layout() == Layout::NHWC && (stochastic_ || top.size() > 1)) {
    this->field_error("pooling_param.pool", "channels-last (NHWC) pooling is MAX or AVE with one top");
  }
}

template <typename Ftype, typename Btype>
void PoolingLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if (nchw_.Use(bottom, top)) {
    nchw_.Forward(bottom, top, type_of<Ftype>(), false, nullptr,
                  [&](const BlobVec& b, const BlobVec& t) { Forward_cpu(b, t); });
    return;
  }
  using M = math_t<Ftype>;
  const M* x = bottom[0]->template cpu_data<M>();
  MathBuffer<Ftype> yb(top[0]->template mutable_cpu_data<Ftype>(), top[0]->count(), false);
  M* y = yb.get();
  const size_t in_plane = static_cast<size_t>(height_) * width_;
  const bool sample = stochastic_ && train();
  if (sample) {
    // Drawn on the host from the process RNG, so that the GPU path samples the same positions.
    rand_.resize(top[0]->count());
    rng_uniform<float>(static_cast<int64_t>(rand_.size()), 0.0, 1.0, rand_.data());
  }
  // Planes are independent: each chunk of them runs on its own core.
  const size_t out_plane = static_cast<size_t>(out_h_) * out_w_;
  cpu_parallel_for(num_ * channels_, [&](int, int p0, int p1) {
    size_t o = p0 * out_plane;
    for (int plane = p0; plane < p1; ++plane) {
      const M* xp = x + plane * in_plane;
      for (int oy = 0; oy < out_h_; ++oy) {
        for (int ox = 0; ox < out_w_; ++ox, ++o) {
          const Window win = window(oy, ox, height_, width_, kh_, kw_, ph_, pw_, sh_, sw_);
          if (max_) {
            int best = win.h0 * width_ + win.w0;
            for (int h = win.h0; h < win.h1; ++h) {
              for (int w = win.w0; w < win.w1; ++w) {
                if (xp[h * width_ + w] > xp[best]) best = h * width_ + w;
              }
            }
            y[o] = xp[best];
            mask_[o] = best;
          } else if (sample) {
            // Sample a position with probability x / sum(x): the first whose running sum reaches u * sum.
            M sum = 0;
            for (int h = win.h0; h < win.h1; ++h) {
              for (int w = win.w0; w < win.w1; ++w) sum += xp[h * width_ + w];
            }
            const M thres = static_cast<M>(rand_[o]) * sum;
            M run = 0;
            int pick = (win.h1 - 1) * width_ + win.w1 - 1;
            bool found = false;
            for (int h = win.h0; h < win.h1 && !found; ++h) {
              for (int w = win.w0; w < win.w1; ++w) {
                run += xp[h * width_ + w];
                if (run >= thres) {
                  pick = h * width_ + w;
                  found = true;
                  break;
                }
              }
            }
            y[o] = xp[pick];
            mask_[o] = pick;
          } else if (stochastic_) {
            // TEST: the probability-weighted average sum(x^2) / sum(x) (0 when sum(x) <= 0).
            const auto [sum, sq] = window_sums(xp, win, width_);
            y[o] = sum > M(0) ? sq / sum : M(0);
          } else {
            M sum = 0;
            for (int h = win.h0; h < win.h1; ++h) {
              for (int w = win.w0; w < win.w1; ++w) sum += xp[h * width_ + w];
            }
            y[o] = sum / static_cast<M>(win.size);
          }
        }
      }
    }
  });
  yb.store();
  if (top.size() > 1) {
    float* m = top[1]->template mutable_cpu_data<float>();
    for (size_t i = 0; i < mask_.size(); ++i) m[i] = static_cast<float>(mask_[i]);
  }
}

template <typename Ftype, typename Btype>
void PoolingLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                              const BlobVec& bottom) {
  if (propagate_down.empty() || !propagate_down[0]) return;
  if (nchw_.Use(bottom, top)) {
    nchw_.Backward(top, propagate_down, bottom, type_of<Ftype>(), type_of<Btype>(), false, nullptr,
                   [&](const BlobVec& t, const BlobVec& b) { Backward_cpu(t, propagate_down, b); });
    return;
  }
  using M = math_t<Btype>;
  const M* dy = top[0]->template cpu_diff<M>();
  MathBuffer<Btype> dxb(bottom[0]->template mutable_cpu_diff<Btype>(), bottom[0]->count(), false);
  M* dx = dxb.get();
  const size_t in_plane = static_cast<size_t>(height_) * width_;
  const bool routed = max_ || (stochastic_ && train());
  const M* x = stochastic_ && !routed ? bottom[0]->template cpu_data<M>() : nullptr;
  // Planes are independent: each chunk of them runs on its own core.
  const size_t out_plane = static_cast<size_t>(out_h_) * out_w_;
  cpu_parallel_for(num_ * channels_, [&](int, int p0, int p1) {
    size_t o = p0 * out_plane;
    std::fill(dx + p0 * in_plane, dx + p1 * in_plane, M(0));
    for (int plane = p0; plane < p1; ++plane) {
      M* dxp = dx + plane * in_plane;
      for (int oy = 0; oy < out_h_; ++oy) {
        for (int ox = 0; ox < out_w_; ++ox, ++o) {
          if (routed) {
            dxp[mask_[o]] += dy[o];
            continue;
          }
          const Window win = window(oy, ox, height_, width_, kh_, kw_, ph_, pw_, sh_, sw_);
          if (stochastic_) {
            // TEST: d(Q / S) / dx = (2 x - Q / S) / S, with S = sum(x), Q = sum(x^2); 0 when S <= 0.
            const M* xp = x + plane * in_plane;
            const auto [sum, sq] = window_sums(xp, win, width_);
            if (!(sum > M(0))) continue;
            const M avg = sq / sum;
            for (int h = win.h0; h < win.h1; ++h) {
              for (int w = win.w0; w < win.w1; ++w) {
                dxp[h * width_ + w] += dy[o] * (M(2) * xp[h * width_ + w] - avg) / sum;
              }
            }
            continue;
          }
          const M g = dy[o] / static_cast<M>(win.size);
          for (int h = win.h0; h < win.h1; ++h) {
            for (int w = win.w0; w < win.w1; ++w) dxp[h * width_ + w] += g;
          }
        }
      }
    }
  });
  dxb.store();
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void PoolingLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const int nhwc = bottom[0]->layout() == Layout::NHWC ? channels_ : 0;  // Reshape checked MAX or AVE
  const gpu::PoolWindow g{height_, width_, out_h_, out_w_, kh_, kw_, ph_, pw_, sh_, sw_, nhwc};
  const int64_t planes = static_cast<int64_t>(num_) * channels_;
  const Ftype* x = bottom[0]->template gpu_data<Ftype>();
  Ftype* y = top[0]->template mutable_gpu_data<Ftype>();
  if (stochastic_) {
    const size_t count = top[0]->count();
    const float* rand = nullptr;
    if (train()) {
      if (gpu_mask_count_ < count) {
        gpu_mask_ = std::unique_ptr<void, void (*)(void*)>(cuda::device_alloc(count * sizeof(int)), &cuda::device_free);
        gpu_mask_count_ = count;
      }
      if (gpu_rand_count_ < count) {
        gpu_rand_ = std::unique_ptr<void, void (*)(void*)>(cuda::device_alloc(count * sizeof(float)), &cuda::device_free);
        gpu_rand_count_ = count;
      }
      // The same host draws as the CPU path.
      rand_.resize(count);
      rng_uniform<float>(static_cast<int64_t>(count), 0.0, 1.0, rand_.data());
      CORTADO_CUDA_CHECK(cudaMemcpyAsync(gpu_rand_.get(), rand_.data(), count * sizeof(float), cudaMemcpyHostToDevice,
                                         this->context().stream()));
      rand = static_cast<const float*>(gpu_rand_.get());
    }
    gpu::stochastic_pool_forward<Ftype>(planes, g, x, y, rand, rand ? static_cast<int*>(gpu_mask_.get()) : nullptr,
                                        this->context().stream());
    return;
  }
  if (!max_) {
    gpu::ave_pool_forward<Ftype>(planes, g, x, y, this->context().stream());
    return;
  }
  const size_t count = top[0]->count();
  if (gpu_mask_count_ < count) {
    gpu_mask_ = std::unique_ptr<void, void (*)(void*)>(cuda::device_alloc(count * sizeof(int)), &cuda::device_free);
    gpu_mask_count_ = count;
  }
  float* mask_top = top.size() > 1 ? top[1]->template mutable_gpu_data<float>() : nullptr;
  gpu::max_pool_forward<Ftype>(planes, g, x, y, static_cast<int*>(gpu_mask_.get()), mask_top,
                               this->context().stream());
}

template <typename Ftype, typename Btype>
void PoolingLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                              const BlobVec& bottom) {
  if (propagate_down.empty() || !propagate_down[0]) return;
  const int nhwc = bottom[0]->layout() == Layout::NHWC ? channels_ : 0;
  const gpu::PoolWindow g{height_, width_, out_h_, out_w_, kh_, kw_, ph_, pw_, sh_, sw_, nhwc};
  const int64_t planes = static_cast<int64_t>(num_) * channels_;
  const Btype* dy = top[0]->template gpu_diff<Btype>();
  Btype* dx = bottom[0]->template mutable_gpu_diff<Btype>();
  if (stochastic_ && !train()) {
    gpu::stochastic_pool_test_backward<Btype>(planes, g, bottom[0]->template gpu_data<Btype>(), dy, dx,
                                              this->context().stream());
  } else if (max_ || stochastic_) {
    CORTADO_CHECK(gpu_mask_count_ >= top[0]->count()) << "Pooling backward on the GPU before forward";
    gpu::max_pool_backward<Btype>(planes, g, dy, static_cast<const int*>(gpu_mask_.get()), dx,
                                  this->context().stream());
  } else {
    gpu::ave_pool_backward<Btype>(planes, g, dy, dx, this->context().stream());
  }
}
#endif  // CORTADO_USE_CUDA

CORTADO_INSTANTIATE_LAYER(PoolingLayer);

}  // namespace cortado
