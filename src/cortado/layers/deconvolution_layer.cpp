#include "cortado/layers/deconvolution_layer.hpp"

#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "cortado/util/math.hpp"
#include "cortado/util/cpu_parallel.hpp"
#include "cortado/layers/bias_layer.hpp"

#include "cortado/util/cuda.hpp"
#include "cortado/util/gpu_math.hpp"

namespace cortado {

// The GEMMs below multiply in M (cpu_gemm<M>, or cuBLAS in M's math), each
// group through ConvGemm with C = op(A) op(B) + beta C.
template <typename Ftype, typename Btype>
void DeconvolutionLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  const ConvGemm gm = this->gemm();  // M = C/group, K = num_output/group * KH * KW, N = H * W
  const ConvImage im = this->col_image();
  const int64_t ohw = static_cast<int64_t>(this->out_h_) * this->out_w_;
  const int64_t top_n = this->top_size();
  const M* w = this->blobs_[0]->template cpu_data<M>();
  const M* b = this->bias_term_ ? this->blobs_[1]->template cpu_data<M>() : nullptr;
  auto multiply = [](int, Trans ta, Trans tb, int rows, int cols, int inner, const M* a, const M* bm, float beta,
                     M* c) { cpu_gemm<M>(ta, tb, rows, cols, inner, M(1), a, bm, M(beta), c); };
  for (size_t i = 0; i < bottom.size(); ++i) {
    const M* x = bottom[i]->cpu_data<M>();
    Ftype* y = top[i]->mutable_cpu_data<Ftype>();
    // Images are independent: each chunk of them runs on its own core with its own buffers.
    cpu_parallel_for(this->num_, [&](int, int n0, int n1) {
      std::vector<M> col(this->col_size()), img(top_n);
      for (int n = n0; n < n1; ++n) {
        // col_g = W_g^T x_g, then the scatter-add of every tap
        gm.Backward(multiply, w, x + n * this->bottom_size(), col.data());
        im.col2im_cpu(col.data(), img.data());
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
  const ConvGemm gm = this->gemm();
  const ConvImage im = this->col_image();
  const int64_t ohw = static_cast<int64_t>(this->out_h_) * this->out_w_;
  const int64_t top_n = this->top_size(), bottom_n = this->bottom_size();
  const bool dw_on = this->param_propagate_down(0), db_on = this->bias_term_ && this->param_propagate_down(1);
  const M* w = this->blobs_[0]->template cpu_data<M>();
  auto multiply = [](int, Trans ta, Trans tb, int rows, int cols, int inner, const M* a, const M* bm, float beta,
                     M* c) { cpu_gemm<M>(ta, tb, rows, cols, inner, M(1), a, bm, M(beta), c); };
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
      std::vector<M> col(this->col_size()), xbuf(bottom_n);
      std::vector<M>& wacc = w_parts[chunk];
      std::vector<M>& bacc = b_parts[chunk];
      for (int n = n0; n < n1; ++n) {
        const M* dyn = dy + n * top_n;
        if (db_on) {
          for (int64_t k = 0; k < top_n; ++k) bacc[k / ohw] += dyn[k];
        }
        if (!dw_on && !dx) continue;
        im.im2col_cpu(dyn, col.data());
        // dW_g += x_g col_g^T; dx_g = W_g col_g
        if (dw_on) gm.Weight(multiply, x + n * bottom_n, col.data(), wacc.data());
        if (dx) {
          gm.Forward(multiply, w, col.data(), xbuf.data());
          Btype* dxn = dx + n * bottom_n;
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
template <typename M>
auto gpu_multiply(cublasContext* handle) {
  return [handle](int, Trans ta, Trans tb, int rows, int cols, int inner, const M* a, const M* bm, float beta, M* c) {
    gpu_gemm<M>(handle, ta, tb, rows, cols, inner, 1.f, a, bm, beta, c, gemm_math<M>());
  };
}
}  // namespace

template <typename Ftype, typename Btype>
void DeconvolutionLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  CUstream_st* stream = this->context().stream();
  const ConvGemm gm = this->gemm();
  const ConvImage im = this->col_image();
  const int64_t ohw = static_cast<int64_t>(this->out_h_) * this->out_w_;
  const int64_t top_n = this->top_size();
  const M* w = this->blobs_[0]->template gpu_data<M>();
  const M* b = this->bias_term_ ? this->blobs_[1]->template gpu_data<M>() : nullptr;
  auto col = scratch<M>(this->col_size());
  auto img = scratch<M>(static_cast<size_t>(this->num_) * top_n);
  const auto multiply = gpu_multiply<M>(this->context().cublas());
  for (size_t i = 0; i < bottom.size(); ++i) {
    const M* x = bottom[i]->gpu_data<M>();
    for (int n = 0; n < this->num_; ++n) {
      gm.Backward(multiply, w, x + n * this->bottom_size(), col.get());
      im.col2im_gpu(col.get(), img.get() + n * top_n, stream);
    }
    if (b) gpu::bias_forward<M>(this->num_, this->num_output_, ohw, img.get(), b, img.get(), stream);
    gpu_convert(type_of<M>(), img.get(), type_of<Ftype>(), top[i]->mutable_gpu_data<Ftype>(), this->num_ * top_n,
                stream);
  }
}

template <typename Ftype, typename Btype>
void DeconvolutionLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                    const BlobVec& bottom) {
  using M = math_t<Btype>;
  CUstream_st* stream = this->context().stream();
  const ConvGemm gm = this->gemm();
  const ConvImage im = this->col_image();
  const int64_t ohw = static_cast<int64_t>(this->out_h_) * this->out_w_;
  const int64_t top_n = this->top_size(), bottom_n = this->bottom_size();
  const bool dw_on = this->param_propagate_down(0), db_on = this->bias_term_ && this->param_propagate_down(1);
  const M* w = this->blobs_[0]->template gpu_data<M>();
  const int64_t wcount = static_cast<int64_t>(this->blobs_[0]->count());
  auto col = scratch<M>(this->col_size());
  auto wacc = scratch<M>(dw_on ? wcount : 1);
  auto xbuf = scratch<M>(static_cast<size_t>(this->num_) * bottom_n);
  const auto multiply = gpu_multiply<M>(this->context().cublas());
  if (dw_on) gpu_set<M>(wcount, 0.f, wacc.get(), stream);
  for (size_t i = 0; i < top.size(); ++i) {
    if (db_on) {
      gpu::bias_backward<Btype>(this->num_, this->num_output_, ohw, top[i]->gpu_diff<Btype>(), true,
                                this->blobs_[1]->template mutable_gpu_diff<Btype>(), stream);
    }
    if (!dw_on && !propagate_down[i]) continue;
    const M* dy = top[i]->gpu_diff<M>();
    const M* x = dw_on ? bottom[i]->gpu_data<M>() : nullptr;
    for (int n = 0; n < this->num_; ++n) {
      im.im2col_gpu(dy + n * top_n, col.get(), stream);
      if (dw_on) gm.Weight(multiply, x + n * bottom_n, col.get(), wacc.get());
      if (propagate_down[i]) gm.Forward(multiply, w, col.get(), xbuf.get() + n * bottom_n);
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
