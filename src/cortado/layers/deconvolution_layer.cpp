#include "cortado/layers/deconvolution_layer.hpp"

#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "cortado/filler.hpp"
#include "cortado/util/im2col.hpp"
#include "cortado/util/math.hpp"
#include "cortado/util/cpu_parallel.hpp"

#ifdef CORTADO_USE_CUDA
#include "cortado/util/cuda.hpp"
#include "cortado/util/gpu_math.hpp"
#endif

namespace cortado {

template <typename Ftype, typename Btype>
void DeconvolutionLayer<Ftype, Btype>::CheckDeconvBottoms(const BlobVec& bottom) const {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (bottom[i]->num_axes() != 4) {
      this->field_error("bottom", "bottom ", i, " has shape ", bottom[i]->shape_string(),
                        "; Deconvolution needs 4 axes (N, C, H, W)");
    }
    if (bottom[i]->shape() != bottom[0]->shape()) {
      this->field_error("bottom", "all bottoms must have the same shape: bottom 0 is ", bottom[0]->shape_string(),
                        ", bottom ", i, " is ", bottom[i]->shape_string());
    }
  }
  const int c = bottom[0]->shape(1), h = bottom[0]->shape(2), w = bottom[0]->shape(3);
  if (c % this->group_ != 0) {
    this->field_error("convolution_param.group", "= ", this->group_, " does not divide the ", c, " input channels");
  }
  const int oh = this->sh_ * (h - 1) + this->dh_ * (this->kh_ - 1) + 1 - 2 * this->ph_;
  const int ow = this->sw_ * (w - 1) + this->dw_ * (this->kw_ - 1) + 1 - 2 * this->pw_;
  if (oh <= 0 || ow <= 0) {
    this->field_error("convolution_param.pad", "pad ", this->ph_, "x", this->pw_, " leaves an empty output (",
                      oh, "x", ow, ") for input ", h, "x", w);
  }
}

template <typename Ftype, typename Btype>
void DeconvolutionLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  this->ReadGeometry();
  CheckDeconvBottoms(bottom);
  this->channels_ = bottom[0]->shape(1);
  const std::vector<int> wshape{this->channels_, this->num_output_ / this->group_, this->kh_, this->kw_};
  const std::vector<int> bshape{this->num_output_};
  auto& blobs = this->blobs_;
  if (!blobs.empty()) {
    const size_t want = this->bias_term_ ? 2 : 1;
    if (blobs.size() != want) {
      this->field_error("blobs", "expected ", want, " parameter blobs (bias_term ", this->bias_term_, "), got ",
                        blobs.size());
    }
    if (blobs[0]->shape() != wshape || (this->bias_term_ && blobs[1]->shape() != bshape)) {
      this->field_error("blobs", "weight shape ", blobs[0]->shape_string(), " does not match the expected ",
                        shape_string(wshape), " (C, num_output/group, KH, KW)");
    }
  } else {
    const auto& p = this->layer_param().convolution_param();
    blobs.push_back(this->make_param(wshape));
    Fill(p.weight_filler(), blobs[0].get(), "convolution_param.weight_filler");
    if (this->bias_term_) {
      blobs.push_back(this->make_param(bshape));
      Fill(p.bias_filler(), blobs[1].get(), "convolution_param.bias_filler");
    }
  }
  this->param_propagate_down_.assign(blobs.size(), true);
}

template <typename Ftype, typename Btype>
void DeconvolutionLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CheckDeconvBottoms(bottom);
  if (bottom[0]->shape(1) != this->channels_) {
    this->field_error("bottom", "bottom has ", bottom[0]->shape(1), " channels; the layer was set up for ",
                      this->channels_);
  }
  for (Blob* b : bottom) {
    for (Blob* t : top) {
      if (b == t) this->field_error("top", "Deconvolution cannot be computed in place");
    }
  }
  this->num_ = bottom[0]->shape(0);
  this->height_ = bottom[0]->shape(2);
  this->width_ = bottom[0]->shape(3);
  this->out_h_ = this->sh_ * (this->height_ - 1) + this->dh_ * (this->kh_ - 1) + 1 - 2 * this->ph_;
  this->out_w_ = this->sw_ * (this->width_ - 1) + this->dw_ * (this->kw_ - 1) + 1 - 2 * this->pw_;
  for (Blob* t : top) t->Reshape({this->num_, this->num_output_, this->out_h_, this->out_w_});
}

template <typename Ftype, typename Btype>
void DeconvolutionLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  const int G = this->group_, cg = this->channels_ / G, og = this->num_output_ / G;
  const int kk = this->kh_ * this->kw_, hw = this->height_ * this->width_;
  const int64_t ohw = static_cast<int64_t>(this->out_h_) * this->out_w_;
  const int64_t top_n = this->num_output_ * ohw;
  const M* w = this->blobs_[0]->template cpu_data<M>();
  const M* b = this->bias_term_ ? this->blobs_[1]->template cpu_data<M>() : nullptr;
  for (size_t i = 0; i < bottom.size(); ++i) {
    const M* x = bottom[i]->cpu_data<M>();
    Ftype* y = top[i]->mutable_cpu_data<Ftype>();
    // Images are independent: each chunk of them runs on its own core with its own buffers.
    cpu_parallel_for(this->num_, [&](int, int n0, int n1) {
      std::vector<M> col(static_cast<size_t>(this->num_output_) * kk * hw), img(top_n);
      for (int n = n0; n < n1; ++n) {
        const M* xn = x + static_cast<int64_t>(n) * this->channels_ * hw;
        for (int g = 0; g < G; ++g) {
          cpu_gemm<M>(Trans::Yes, Trans::No, og * kk, hw, cg, M(1), w + static_cast<int64_t>(g) * cg * og * kk,
                      xn + static_cast<int64_t>(g) * cg * hw, M(0),
                      col.data() + static_cast<int64_t>(g) * og * kk * hw);
        }
        col2im_cpu<M>(col.data(), this->num_output_, this->out_h_, this->out_w_, this->kh_, this->kw_, this->ph_,
                      this->pw_, this->sh_, this->sw_, this->dh_, this->dw_, img.data());
        Ftype* yn = y + n * top_n;
        for (int64_t k = 0; k < top_n; ++k) yn[k] = static_cast<Ftype>(b ? img[k] + b[k / ohw] : img[k]);
      }
    });
  }
}

template <typename Ftype, typename Btype>
void DeconvolutionLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                    const BlobVec& bottom) {
  using M = math_t<Btype>;
  const int G = this->group_, cg = this->channels_ / G, og = this->num_output_ / G;
  const int kk = this->kh_ * this->kw_, hw = this->height_ * this->width_;
  const int64_t ohw = static_cast<int64_t>(this->out_h_) * this->out_w_;
  const int64_t top_n = this->num_output_ * ohw;
  const bool dw_on = this->param_propagate_down(0), db_on = this->bias_term_ && this->param_propagate_down(1);
  const M* w = this->blobs_[0]->template cpu_data<M>();
  // The batch is split into chunks of images, one per core; each chunk sums
  // its parameter gradients on its own, and the sums are added in chunk
  // order: the same bits on every run with the same thread count.
  const int chunks = cpu_chunks(this->num_);
  const size_t w_count = dw_on ? this->blobs_[0]->count() : 0, b_count = db_on ? this->num_output_ : 0;
  std::vector<std::vector<M>> w_parts(chunks, std::vector<M>(w_count, M(0)));
  std::vector<std::vector<M>> b_parts(chunks, std::vector<M>(b_count, M(0)));
  for (size_t i = 0; i < top.size(); ++i) {
    const M* dy = top[i]->cpu_diff<M>();
    const M* x = dw_on ? bottom[i]->cpu_data<M>() : nullptr;
    Btype* dx = propagate_down[i] ? bottom[i]->mutable_cpu_diff<Btype>() : nullptr;
    cpu_parallel_for(this->num_, [&](int chunk, int n0, int n1) {
      std::vector<M> col(static_cast<size_t>(this->num_output_) * kk * hw),
          xbuf(static_cast<size_t>(this->channels_) * hw);
      std::vector<M>& wacc = w_parts[chunk];
      std::vector<M>& bacc = b_parts[chunk];
      for (int n = n0; n < n1; ++n) {
        const M* dyn = dy + n * top_n;
        if (db_on) {
          for (int64_t k = 0; k < top_n; ++k) bacc[k / ohw] += dyn[k];
        }
        if (!dw_on && !dx) continue;
        im2col_cpu<M>(dyn, this->num_output_, this->out_h_, this->out_w_, this->kh_, this->kw_, this->ph_, this->pw_,
                      this->sh_, this->sw_, this->dh_, this->dw_, col.data());
        for (int g = 0; g < G; ++g) {
          const M* colg = col.data() + static_cast<int64_t>(g) * og * kk * hw;
          if (dw_on) {
            cpu_gemm<M>(Trans::No, Trans::Yes, cg, og * kk, hw, M(1),
                        x + (static_cast<int64_t>(n) * this->channels_ + g * cg) * hw, colg, M(1),
                        wacc.data() + static_cast<int64_t>(g) * cg * og * kk);
          }
          if (dx) {
            cpu_gemm<M>(Trans::No, Trans::No, cg, hw, og * kk, M(1), w + static_cast<int64_t>(g) * cg * og * kk, colg,
                        M(0), xbuf.data() + static_cast<int64_t>(g) * cg * hw);
          }
        }
        if (dx) {
          Btype* dxn = dx + static_cast<int64_t>(n) * this->channels_ * hw;
          for (size_t k = 0; k < xbuf.size(); ++k) dxn[k] = static_cast<Btype>(xbuf[k]);
        }
      }
    });
  }
  std::vector<M>& wacc = w_parts[0];
  std::vector<M>& bacc = b_parts[0];
  for (int chunk = 1; chunk < chunks; ++chunk) {
    if (dw_on) cpu_axpy<M>(static_cast<int64_t>(w_count), M(1), w_parts[chunk].data(), wacc.data());
    if (db_on) cpu_axpy<M>(static_cast<int64_t>(b_count), M(1), b_parts[chunk].data(), bacc.data());
  }
  if (dw_on) {
    Btype* dW = this->blobs_[0]->template mutable_cpu_diff<Btype>();
    for (size_t k = 0; k < wacc.size(); ++k) dW[k] = static_cast<Btype>(static_cast<M>(dW[k]) + wacc[k]);
  }
  if (db_on) {
    Btype* db = this->blobs_[1]->template mutable_cpu_diff<Btype>();
    for (size_t k = 0; k < bacc.size(); ++k) db[k] = static_cast<Btype>(static_cast<M>(db[k]) + bacc[k]);
  }
}

#ifdef CORTADO_USE_CUDA
namespace {
struct ScratchDeleter {
  void operator()(void* p) const { cuda::device_free(p); }
};
template <typename T>
std::unique_ptr<T, ScratchDeleter> scratch(size_t count) {
  return std::unique_ptr<T, ScratchDeleter>(static_cast<T*>(cuda::device_alloc(std::max<size_t>(1, count) * sizeof(T))));
}
template <typename M>
constexpr Type gemm_math() { return std::is_same_v<M, double> ? DOUBLE : FLOAT; }
}  // namespace

template <typename Ftype, typename Btype>
void DeconvolutionLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  CUstream_st* stream = this->context().stream();
  cublasContext* handle = this->context().cublas();
  const int G = this->group_, cg = this->channels_ / G, og = this->num_output_ / G;
  const int kk = this->kh_ * this->kw_, hw = this->height_ * this->width_;
  const int64_t ohw = static_cast<int64_t>(this->out_h_) * this->out_w_;
  const int64_t top_n = this->num_output_ * ohw;
  const M* w = this->blobs_[0]->template gpu_data<M>();
  const M* b = this->bias_term_ ? this->blobs_[1]->template gpu_data<M>() : nullptr;
  auto col = scratch<M>(static_cast<size_t>(this->num_output_) * kk * hw);
  auto img = scratch<M>(static_cast<size_t>(this->num_) * top_n);
  for (size_t i = 0; i < bottom.size(); ++i) {
    const M* x = bottom[i]->gpu_data<M>();
    for (int n = 0; n < this->num_; ++n) {
      const M* xn = x + static_cast<int64_t>(n) * this->channels_ * hw;
      for (int g = 0; g < G; ++g) {
        gpu_gemm<M>(handle, Trans::Yes, Trans::No, og * kk, hw, cg, 1.f, w + static_cast<int64_t>(g) * cg * og * kk,
                    xn + static_cast<int64_t>(g) * cg * hw, 0.f, col.get() + static_cast<int64_t>(g) * og * kk * hw,
                    gemm_math<M>());
      }
      col2im_gpu<M>(col.get(), this->num_output_, this->out_h_, this->out_w_, this->kh_, this->kw_, this->ph_,
                    this->pw_, this->sh_, this->sw_, this->dh_, this->dw_, img.get() + n * top_n, stream);
    }
    if (b) gpu::conv_add_bias<M>(this->num_, this->num_output_, ohw, b, img.get(), stream);
    gpu_convert(type_of<M>(), img.get(), type_of<Ftype>(), top[i]->mutable_gpu_data<Ftype>(), this->num_ * top_n,
                stream);
  }
}

template <typename Ftype, typename Btype>
void DeconvolutionLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                    const BlobVec& bottom) {
  using M = math_t<Btype>;
  CUstream_st* stream = this->context().stream();
  cublasContext* handle = this->context().cublas();
  const int G = this->group_, cg = this->channels_ / G, og = this->num_output_ / G;
  const int kk = this->kh_ * this->kw_, hw = this->height_ * this->width_;
  const int64_t ohw = static_cast<int64_t>(this->out_h_) * this->out_w_;
  const int64_t top_n = this->num_output_ * ohw;
  const int64_t bottom_n = static_cast<int64_t>(this->channels_) * hw;
  const bool dw_on = this->param_propagate_down(0), db_on = this->bias_term_ && this->param_propagate_down(1);
  const M* w = this->blobs_[0]->template gpu_data<M>();
  const int64_t wcount = static_cast<int64_t>(this->blobs_[0]->count());
  auto col = scratch<M>(static_cast<size_t>(this->num_output_) * kk * hw);
  auto wacc = scratch<M>(dw_on ? wcount : 1);
  auto xbuf = scratch<M>(static_cast<size_t>(this->num_) * bottom_n);
  if (dw_on) gpu_set<M>(wcount, 0.f, wacc.get(), stream);
  for (size_t i = 0; i < top.size(); ++i) {
    if (db_on) {
      gpu::conv_bias_grad<Btype>(this->num_, this->num_output_, ohw, top[i]->gpu_diff<Btype>(),
                                 this->blobs_[1]->template mutable_gpu_diff<Btype>(), stream);
    }
    if (!dw_on && !propagate_down[i]) continue;
    const M* dy = top[i]->gpu_diff<M>();
    const M* x = dw_on ? bottom[i]->gpu_data<M>() : nullptr;
    for (int n = 0; n < this->num_; ++n) {
      im2col_gpu<M>(dy + n * top_n, this->num_output_, this->out_h_, this->out_w_, this->kh_, this->kw_, this->ph_,
                    this->pw_, this->sh_, this->sw_, this->dh_, this->dw_, col.get(), stream);
      for (int g = 0; g < G; ++g) {
        const M* colg = col.get() + static_cast<int64_t>(g) * og * kk * hw;
        if (dw_on) {
          gpu_gemm<M>(handle, Trans::No, Trans::Yes, cg, og * kk, hw, 1.f, x + n * bottom_n + static_cast<int64_t>(g) * cg * hw,
                      colg, 1.f, wacc.get() + static_cast<int64_t>(g) * cg * og * kk, gemm_math<M>());
        }
        if (propagate_down[i]) {
          gpu_gemm<M>(handle, Trans::No, Trans::No, cg, hw, og * kk, 1.f, w + static_cast<int64_t>(g) * cg * og * kk,
                      colg, 0.f, xbuf.get() + n * bottom_n + static_cast<int64_t>(g) * cg * hw, gemm_math<M>());
        }
      }
    }
    if (propagate_down[i]) {
      gpu_convert(type_of<M>(), xbuf.get(), type_of<Btype>(), bottom[i]->mutable_gpu_diff<Btype>(),
                  this->num_ * bottom_n, stream);
    }
  }
  if (dw_on) {
    Btype* dW = this->blobs_[0]->template mutable_gpu_diff<Btype>();
    if constexpr (std::is_same_v<M, float>) {
      gpu::add_f32<Btype>(wcount, wacc.get(), dW, stream);
    } else {
      gpu_axpy<M>(wcount, 1.f, wacc.get(), dW, stream);
    }
  }
}
#endif

CORTADO_INSTANTIATE_LAYER(DeconvolutionLayer);

}  // namespace cortado
