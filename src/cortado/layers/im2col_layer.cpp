#include "cortado/layers/im2col_layer.hpp"

#include <climits>

namespace cortado {

template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  CheckConvAxis(*this);
  win_ = ReadConvWindow(*this);
}

template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->num_axes() != 4) {
    this->field_error("bottom", "has shape ", bottom[0]->shape_string(), "; Im2col needs 4 axes (N, C, H, W)");
  }
  if (top[0] == bottom[0]) this->field_error("top", "Im2col cannot be computed in place");
  num_ = bottom[0]->shape(0);
  const int channels = bottom[0]->shape(1), height = bottom[0]->shape(2), width = bottom[0]->shape(3);
  CheckKernelFits(*this, win_, height, width, false);
  const int64_t rows = int64_t{channels} * win_.kh * win_.kw;
  if (rows > INT_MAX) {
    this->field_error("convolution_param.kernel_size", "C*KH*KW = ", channels, "*", win_.kh, "*", win_.kw, " = ",
                      rows, " exceeds ", INT_MAX);
  }
  image_shape_ = {channels, height, width, win_};
  top[0]->Reshape({num_, static_cast<int>(rows), win_.conv_out_h(height), win_.conv_out_w(width)});
  image_ = static_cast<int64_t>(bottom[0]->count(1));
  col_ = static_cast<int64_t>(top[0]->count(1));
}

template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  for (int n = 0; n < num_; ++n) image_shape_.im2col_cpu(x + n * image_, y + n * col_);
}

template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  if (propagate_down.empty() || !propagate_down[0]) return;
  const Btype* dy = top[0]->cpu_diff<Btype>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  for (int n = 0; n < num_; ++n) image_shape_.col2im_cpu(dy + n * col_, dx + n * image_);
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  for (int n = 0; n < num_; ++n) image_shape_.im2col_gpu(x + n * image_, y + n * col_, this->context().stream());
}

template <typename Ftype, typename Btype>
void Im2colLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  if (propagate_down.empty() || !propagate_down[0]) return;
  const Btype* dy = top[0]->gpu_diff<Btype>();
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  for (int n = 0; n < num_; ++n) image_shape_.col2im_gpu(dy + n * col_, dx + n * image_, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(Im2colLayer);

}  // namespace cortado
