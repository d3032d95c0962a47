#include "cortado/layers/lrn_layer.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace cortado {

template <typename Ftype, typename Btype>
void LRNLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const LRNParameter& p = this->layer_param().lrn_param();
  if (p.local_size() < 1 || p.local_size() % 2 == 0 || p.local_size() > 1000000) {
    this->field_error("lrn_param.local_size", "must be odd and positive, got ", p.local_size());
  }
  if (!std::isfinite(p.alpha())) this->field_error("lrn_param.alpha", "must be finite, got ", p.alpha());
  if (!std::isfinite(p.beta())) this->field_error("lrn_param.beta", "must be finite, got ", p.beta());
  if (!std::isfinite(p.k())) this->field_error("lrn_param.k", "must be finite, got ", p.k());
  if (top[0] == bottom[0]) this->field_error("top", "LRN cannot run in place");
  size_ = static_cast<int>(p.local_size());
  within_ = p.norm_region() == LRNParameter::WITHIN_CHANNEL;
  alpha_ = p.alpha();
  beta_ = p.beta();
  k_ = within_ ? 1.0 : static_cast<double>(p.k());
}

template <typename Ftype, typename Btype>
void LRNLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->num_axes() != 4) {
    this->field_error("bottom", "LRN needs a 4-axis bottom (N, C, H, W), got ", bottom[0]->num_axes(), " axes");
  }
  top[0]->ReshapeLike(*bottom[0]);
  if (!scale_) scale_ = std::make_unique<Blob>(type_of<M>());
  scale_->ReshapeLike(*bottom[0]);
}

namespace {

// Calls f(j) for every element index j in the window of element (n, c, h, w).
template <typename Fn>
inline void for_window(bool within, int size, int C, int H, int W, int n, int c, int h, int w, Fn&& f) {
  const int half = (size - 1) / 2;
  if (within) {
    const int h0 = std::max(h - half, 0), h1 = std::min(h + half, H - 1);
    const int w0 = std::max(w - half, 0), w1 = std::min(w + half, W - 1);
    for (int hh = h0; hh <= h1; ++hh) {
      for (int ww = w0; ww <= w1; ++ww) f(((static_cast<int64_t>(n) * C + c) * H + hh) * W + ww);
    }
  } else {
    const int c0 = std::max(c - half, 0), c1 = std::min(c + half, C - 1);
    for (int cc = c0; cc <= c1; ++cc) f(((static_cast<int64_t>(n) * C + cc) * H + h) * W + w);
  }
}

// Calls f(i, n, c, h, w) for every element i of an (N, C, H, W) blob, in storage order.
template <typename Fn>
inline void for_each_position(int N, int C, int H, int W, Fn&& f) {
  int64_t i = 0;
  for (int n = 0; n < N; ++n) {
    for (int c = 0; c < C; ++c) {
      for (int h = 0; h < H; ++h) {
        for (int w = 0; w < W; ++w, ++i) f(i, n, c, h, w);
      }
    }
  }
}

}  // namespace

template <typename Ftype, typename Btype>
void LRNLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const int N = bottom[0]->shape(0), C = bottom[0]->shape(1), H = bottom[0]->shape(2), W = bottom[0]->shape(3);
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  M* s = scale_->mutable_cpu_data<M>();
  const M k = static_cast<M>(k_);
  const M norm = static_cast<M>(alpha_ / (within_ ? double(size_) * size_ : double(size_)));
  const M beta = static_cast<M>(beta_);
  for_each_position(N, C, H, W, [&](int64_t i, int n, int c, int h, int w) {
    M sum = M(0);
    for_window(within_, size_, C, H, W, n, c, h, w, [&](int64_t j) {
      const M v = static_cast<M>(x[j]);
      sum += v * v;
    });
    s[i] = k + norm * sum;
    y[i] = static_cast<Ftype>(static_cast<M>(x[i]) * std::pow(s[i], -beta));
  });
}

template <typename Ftype, typename Btype>
void LRNLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using MB = math_t<Btype>;
  const int N = bottom[0]->shape(0), C = bottom[0]->shape(1), H = bottom[0]->shape(2), W = bottom[0]->shape(3);
  const int64_t count = static_cast<int64_t>(bottom[0]->count());
  const Btype* x = bottom[0]->cpu_data<Btype>();
  const Btype* y = top[0]->cpu_data<Btype>();
  const Btype* dy = top[0]->cpu_diff<Btype>();
  const MB* s = scale_->cpu_data<MB>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  const MB norm = static_cast<MB>(alpha_ / (within_ ? double(size_) * size_ : double(size_)));
  const MB beta = static_cast<MB>(beta_);
  const MB coeff = MB(2) * norm * beta;
  std::vector<MB> ratio(count);
  for (int64_t j = 0; j < count; ++j) ratio[j] = static_cast<MB>(dy[j]) * static_cast<MB>(y[j]) / s[j];
  for_each_position(N, C, H, W, [&](int64_t i, int n, int c, int h, int w) {
    MB sum = MB(0);
    for_window(within_, size_, C, H, W, n, c, h, w, [&](int64_t j) { sum += ratio[j]; });
    dx[i] = static_cast<Btype>(static_cast<MB>(dy[i]) * std::pow(s[i], -beta) - coeff * static_cast<MB>(x[i]) * sum);
  });
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void LRNLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const gpu::LRNShape g{bottom[0]->shape(0), bottom[0]->shape(1), bottom[0]->shape(2), bottom[0]->shape(3), size_,
                        within_, k_, alpha_ / (within_ ? double(size_) * size_ : double(size_)), beta_};
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  M* s = scale_->mutable_gpu_data<M>();
  gpu::lrn_forward(g, x, s, y, this->context().stream());
}

template <typename Ftype, typename Btype>
void LRNLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using MB = math_t<Btype>;
  const gpu::LRNShape g{bottom[0]->shape(0), bottom[0]->shape(1), bottom[0]->shape(2), bottom[0]->shape(3), size_,
                        within_, k_, alpha_ / (within_ ? double(size_) * size_ : double(size_)), beta_};
  const Btype* x = bottom[0]->gpu_data<Btype>();
  const Btype* y = top[0]->gpu_data<Btype>();
  const Btype* dy = top[0]->gpu_diff<Btype>();
  const MB* s = scale_->gpu_data<MB>();
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  gpu::lrn_backward(g, x, y, s, dy, dx, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(LRNLayer);

}  // namespace cortado
