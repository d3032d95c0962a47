#include "cortado/layers/im2col_layer.hpp"

#include <algorithm>
#include <climits>
#include <string>

#include "cortado/util/im2col.hpp"

namespace cortado {

namespace {
constexpr const char* kKernelSize = "convolution_param.kernel_size";
}  // namespace

template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ConvolutionParameter& p = this->layer_param().convolution_param();
  if (p.axis() != 1) {
    this->field_error("convolution_param.axis", "only axis 1 (N, C, H, W) is implemented, got ", p.axis());
  }
  win_ = ReadConvWindow(*this);
}

template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->num_axes() != 4) {
    this->field_error("bottom", "has shape ", bottom[0]->shape_string(), "; Im2col needs 4 axes (N, C, H, W)");
  }
  if (top[0] == bottom[0]) this->field_error("top", "Im2col cannot be computed in place");
  num_ = bottom[0]->shape(0);
  channels_ = bottom[0]->shape(1);
  height_ = bottom[0]->shape(2);
  width_ = bottom[0]->shape(3);
  const int64_t ekh = int64_t{win_.dh} * (win_.kh - 1) + 1, ekw = int64_t{win_.dw} * (win_.kw - 1) + 1;
  if (ekh > height_ + 2 * int64_t{win_.ph} || ekw > width_ + 2 * int64_t{win_.pw}) {
    this->field_error(kKernelSize, "kernel ", win_.kh, "x", win_.kw, " (dilated ", ekh, "x", ekw,
                      ") is larger than the padded input ", height_ + 2 * int64_t{win_.ph}, "x",
                      width_ + 2 * int64_t{win_.pw}, " (pad ", win_.ph, "x", win_.pw, ")");
  }
  const int64_t rows = int64_t{channels_} * win_.kh * win_.kw;
  if (rows > INT_MAX) {
    this->field_error(kKernelSize, "C*KH*KW = ", channels_, "*", win_.kh, "*", win_.kw, " = ", rows, " exceeds ", INT_MAX);
  }
  const int out_h = static_cast<int>((height_ + 2 * int64_t{win_.ph} - ekh) / win_.sh + 1);
  const int out_w = static_cast<int>((width_ + 2 * int64_t{win_.pw} - ekw) / win_.sw + 1);
  top[0]->Reshape({num_, static_cast<int>(rows), out_h, out_w});
  image_ = static_cast<int64_t>(bottom[0]->count(1));
  col_ = static_cast<int64_t>(top[0]->count(1));
}

template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  for (int n = 0; n < num_; ++n) {
    im2col_cpu<Ftype>(x + n * image_, channels_, height_, width_, win_.kh, win_.kw, win_.ph, win_.pw, win_.sh, win_.sw, win_.dh, win_.dw,
                      y + n * col_);
  }
}

template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  if (propagate_down.empty() || !propagate_down[0]) return;
  const Btype* dy = top[0]->cpu_diff<Btype>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  for (int n = 0; n < num_; ++n) {
    col2im_cpu<Btype>(dy + n * col_, channels_, height_, width_, win_.kh, win_.kw, win_.ph, win_.pw, win_.sh, win_.sw, win_.dh, win_.dw,
                      dx + n * image_);
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  for (int n = 0; n < num_; ++n) {
    im2col_gpu<Ftype>(x + n * image_, channels_, height_, width_, win_.kh, win_.kw, win_.ph, win_.pw, win_.sh, win_.sw, win_.dh, win_.dw,
                      y + n * col_, this->context().stream());
  }
}

template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  if (propagate_down.empty() || !propagate_down[0]) return;
  const Btype* dy = top[0]->gpu_diff<Btype>();
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  for (int n = 0; n < num_; ++n) {
    col2im_gpu<Btype>(dy + n * col_, channels_, height_, width_, win_.kh, win_.kw, win_.ph, win_.pw, win_.sh, win_.sw, win_.dh, win_.dw,
                      dx + n * image_, this->context().stream());
  }
}
#endif

CORTADO_INSTANTIATE_LAYER(Im2colLayer);

}  // namespace cortado
