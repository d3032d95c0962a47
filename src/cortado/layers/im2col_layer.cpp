#include "cortado/layers/im2col_layer.hpp"

#include <algorithm>
#include <climits>
#include <string>

#include "cortado/util/im2col.hpp"

namespace cortado {

namespace {

constexpr const char* kKernelSize = "convolution_param.kernel_size";

// (h, w) from a repeated field (none: dflt; 1 value for both; 2 for (h, w))
// or from its name_h / name_w pair, which must come together unless
// `pair_alone` (pad_h and pad_w default to 0, as in Caffe).
template <typename L, typename Rep>
void read_hw(const L& layer, const Rep& rep, const std::string& name, const std::string& pair, bool has_h,
             uint32_t h, bool has_w, uint32_t w, bool pair_alone, int dflt, int* out_h, int* out_w) {
  const std::string field = "convolution_param." + name;
  if (has_h || has_w) {
    if (rep.size() > 0) layer.field_error(field, "give either ", name, " or ", pair, "_h and ", pair, "_w, not both");
    if (!pair_alone && !(has_h && has_w)) {
      layer.field_error("convolution_param." + pair + (has_h ? "_w" : "_h"), pair, "_h and ", pair,
                        "_w must be given together");
    }
    *out_h = static_cast<int>(std::min<uint32_t>(h, INT_MAX));
    *out_w = static_cast<int>(std::min<uint32_t>(w, INT_MAX));
    return;
  }
  if (rep.size() > 2) layer.field_error(field, "takes 1 or 2 values for a 2D im2col, got ", rep.size());
  *out_h = rep.size() == 0 ? dflt : static_cast<int>(std::min<uint32_t>(rep.Get(0), INT_MAX));
  *out_w = rep.size() == 0 ? dflt : static_cast<int>(std::min<uint32_t>(rep.Get(rep.size() - 1), INT_MAX));
}

}  // namespace

template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ConvolutionParameter& p = this->layer_param().convolution_param();
  if (p.axis() != 1) {
    this->field_error("convolution_param.axis", "only axis 1 (N, C, H, W) is implemented, got ", p.axis());
  }
  if (!p.has_kernel_h() && !p.has_kernel_w() && p.kernel_size_size() == 0) {
    this->field_error(kKernelSize, "is required (or kernel_h and kernel_w)");
  }
  read_hw(*this, p.kernel_size(), "kernel_size", "kernel", p.has_kernel_h(), p.kernel_h(), p.has_kernel_w(),
          p.kernel_w(), false, 0, &kh_, &kw_);
  if (kh_ <= 0 || kw_ <= 0) this->field_error(kKernelSize, "must be positive, got ", kh_, "x", kw_);
  read_hw(*this, p.pad(), "pad", "pad", p.has_pad_h(), p.pad_h(), p.has_pad_w(), p.pad_w(), true, 0, &ph_, &pw_);
  read_hw(*this, p.stride(), "stride", "stride", p.has_stride_h(), p.stride_h(), p.has_stride_w(), p.stride_w(),
          false, 1, &sh_, &sw_);
  if (sh_ <= 0 || sw_ <= 0) this->field_error("convolution_param.stride", "must be positive, got ", sh_, "x", sw_);
  read_hw(*this, p.dilation(), "dilation", "dilation", false, 0, false, 0, false, 1, &dh_, &dw_);
  if (dh_ <= 0 || dw_ <= 0) this->field_error("convolution_param.dilation", "must be positive, got ", dh_, "x", dw_);
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
  const int64_t ekh = int64_t{dh_} * (kh_ - 1) + 1, ekw = int64_t{dw_} * (kw_ - 1) + 1;
  if (ekh > height_ + 2 * int64_t{ph_} || ekw > width_ + 2 * int64_t{pw_}) {
    this->field_error(kKernelSize, "kernel ", kh_, "x", kw_, " (dilated ", ekh, "x", ekw,
                      ") is larger than the padded input ", height_ + 2 * int64_t{ph_}, "x",
                      width_ + 2 * int64_t{pw_}, " (pad ", ph_, "x", pw_, ")");
  }
  const int64_t rows = int64_t{channels_} * kh_ * kw_;
  if (rows > INT_MAX) {
    this->field_error(kKernelSize, "C*KH*KW = ", channels_, "*", kh_, "*", kw_, " = ", rows, " exceeds ", INT_MAX);
  }
  const int out_h = static_cast<int>((height_ + 2 * int64_t{ph_} - ekh) / sh_ + 1);
  const int out_w = static_cast<int>((width_ + 2 * int64_t{pw_} - ekw) / sw_ + 1);
  top[0]->Reshape({num_, static_cast<int>(rows), out_h, out_w});
  image_ = static_cast<int64_t>(bottom[0]->count(1));
  col_ = static_cast<int64_t>(top[0]->count(1));
}

template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  for (int n = 0; n < num_; ++n) {
    im2col_cpu<Ftype>(x + n * image_, channels_, height_, width_, kh_, kw_, ph_, pw_, sh_, sw_, dh_, dw_,
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
    col2im_cpu<Btype>(dy + n * col_, channels_, height_, width_, kh_, kw_, ph_, pw_, sh_, sw_, dh_, dw_,
                      dx + n * image_);
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  for (int n = 0; n < num_; ++n) {
    im2col_gpu<Ftype>(x + n * image_, channels_, height_, width_, kh_, kw_, ph_, pw_, sh_, sw_, dh_, dw_,
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
    col2im_gpu<Btype>(dy + n * col_, channels_, height_, width_, kh_, kw_, ph_, pw_, sh_, sw_, dh_, dw_,
                      dx + n * image_, this->context().stream());
  }
}
#endif

CORTADO_INSTANTIATE_LAYER(Im2colLayer);

}  // namespace cortado
