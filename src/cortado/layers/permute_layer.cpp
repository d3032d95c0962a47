#include "cortado/layers/permute_layer.hpp"

namespace cortado {
namespace {

template <typename T>
void Gather(int64_t n, const PermuteStrides& s, const T* x, T* y) {
  for (int64_t k = 0; k < n; ++k) {
    int64_t rem = k, src = 0;
    for (int i = 0; i < s.axes; ++i) {
      const int64_t j = rem / s.out_stride[i];
      rem -= j * s.out_stride[i];
      src += j * s.in_stride[i];
    }
    y[k] = x[src];
  }
}

std::vector<int64_t> RowMajorStrides(const std::vector<int>& shape) {
  std::vector<int64_t> stride(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) stride[i] = stride[i + 1] * shape[i + 1];
  return stride;
}

}  // namespace

PermuteStrides LayoutStrides(const std::vector<int>& shape, Layout from, Layout to) {
  const int r = static_cast<int>(shape.size());
  CORTADO_CHECK(r <= 8) << "a layout change of more than 8 axes";
  // The memory order of the axes in NHWC: 0, 2, ..., r - 1, 1.
  std::vector<int> order(r);
  for (int i = 0; i < r; ++i) order[i] = i;
  if (r > 2) {
    for (int i = 1; i + 1 < r; ++i) order[i] = i + 1;
    order[r - 1] = 1;
  }
  const auto memory_order = [&](Layout l) {
    std::vector<int> o(r);
    for (int i = 0; i < r; ++i) o[i] = l == Layout::NHWC ? order[i] : i;
    return o;
  };
  const std::vector<int> src = memory_order(from), dst = memory_order(to);
  std::vector<int> src_dims(r), dst_dims(r);
  for (int i = 0; i < r; ++i) src_dims[i] = shape[src[i]], dst_dims[i] = shape[dst[i]];
  const std::vector<int64_t> src_stride = RowMajorStrides(src_dims), dst_stride = RowMajorStrides(dst_dims);
  std::vector<int64_t> axis_src_stride(r);  // stride of each shape axis in the source
  for (int i = 0; i < r; ++i) axis_src_stride[src[i]] = src_stride[i];
  PermuteStrides s;
  s.axes = r;
  for (int i = 0; i < r; ++i) {
    s.out_stride[i] = dst_stride[i];
    s.in_stride[i] = axis_src_stride[dst[i]];
  }
  return s;
}

void GatherValues(int64_t n, const PermuteStrides& s, Type t, const void* x, void* y) {
  switch (type_size(t)) {
    case 2: Gather(n, s, static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y)); break;
    case 4: Gather(n, s, static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y)); break;
    default: Gather(n, s, static_cast<const uint64_t*>(x), static_cast<uint64_t*>(y)); break;
  }
}

template <typename Ftype, typename Btype>
void PermuteLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const int n = bottom[0]->num_axes();
  if (n > kMaxAxes) this->field_error("bottom", "Permute takes at most ", kMaxAxes, " axes, got shape ",
                                      bottom[0]->shape_string());
  std::vector<bool> used(n, false);
  order_.clear();
  for (uint32_t a : this->layer_param().permute_param().order()) {
    if (a >= static_cast<uint32_t>(n)) {
      this->field_error("permute_param.order", "axis ", a, " does not exist in a bottom of shape ",
                        bottom[0]->shape_string());
    }
    if (used[a]) this->field_error("permute_param.order", "axis ", a, " is listed twice");
    used[a] = true;
    order_.push_back(static_cast<int>(a));
  }
  for (int a = 0; a < n; ++a) {
    if (!used[a]) order_.push_back(a);
  }
}

template <typename Ftype, typename Btype>
void PermuteLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0] == top[0]) this->field_error("top", "Permute cannot be computed in place");
  const std::vector<int>& in = bottom[0]->shape();
  if (in.size() != order_.size()) {
    this->field_error("bottom", "the bottom has shape ", bottom[0]->shape_string(), "; the layer was set up for ",
                      order_.size(), " axes");
  }
  std::vector<int> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = in[order_[i]];
  top[0]->Reshape(out);
  const std::vector<int64_t> in_stride = RowMajorStrides(in), out_stride = RowMajorStrides(out);
  forward_.axes = backward_.axes = static_cast<int>(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    forward_.out_stride[i] = out_stride[i];
    forward_.in_stride[i] = in_stride[order_[i]];
    backward_.out_stride[order_[i]] = in_stride[order_[i]];
    backward_.in_stride[order_[i]] = out_stride[i];
  }
}

template <typename Ftype, typename Btype>
void PermuteLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  Gather(static_cast<int64_t>(top[0]->count()), forward_, bottom[0]->cpu_data<Ftype>(),
         top[0]->mutable_cpu_data<Ftype>());
}

template <typename Ftype, typename Btype>
void PermuteLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                              const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  Gather(static_cast<int64_t>(bottom[0]->count()), backward_, top[0]->cpu_diff<Btype>(),
         bottom[0]->mutable_cpu_diff<Btype>());
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void PermuteLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  gpu::permute_gather(static_cast<int64_t>(top[0]->count()), forward_, bottom[0]->gpu_data<Ftype>(),
                      top[0]->mutable_gpu_data<Ftype>(), this->context().stream());
}

template <typename Ftype, typename Btype>
void PermuteLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                              const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  gpu::permute_gather(static_cast<int64_t>(bottom[0]->count()), backward_, top[0]->gpu_diff<Btype>(),
                      bottom[0]->mutable_gpu_diff<Btype>(), this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(PermuteLayer);

void CopyLayout(const std::vector<int>& shape, Layout from, Layout to, Type t, const void* x, void* y, bool gpu,
                CUstream_st* stream) {
  size_t count = 1;
  for (int d : shape) count *= static_cast<size_t>(d);
  const int64_t n = static_cast<int64_t>(count);
#ifdef CORTADO_USE_CUDA
  if (gpu && from != to && shape.size() > 2 && n > 0) {
    // (N, C, S) <-> (N, S, C): N transposes of C x S (to NHWC) or S x C.
    const int64_t batch = shape[0], c = shape[1], s = n / (batch * c);
    const bool to_last = to == Layout::NHWC;
    if (gpu::transpose_batched(batch, to_last ? c : s, to_last ? s : c, type_size(t), x, y, stream)) return;
  }
#endif
  const PermuteStrides strides = LayoutStrides(shape, from, to);
  if (!gpu) {
    GatherValues(n, strides, t, x, y);
    return;
  }
#ifdef CORTADO_USE_CUDA
  switch (type_size(t)) {  // a bit copy: any type of the size moves the values
    case 2: gpu::permute_gather(n, strides, static_cast<const float16*>(x), static_cast<float16*>(y), stream); break;
    case 4: gpu::permute_gather(n, strides, static_cast<const float*>(x), static_cast<float*>(y), stream); break;
    default: gpu::permute_gather(n, strides, static_cast<const double*>(x), static_cast<double*>(y), stream); break;
  }
#else
  (void)stream;
  CORTADO_CHECK(false) << "a device copy in a build without CUDA";
#endif
}

namespace {
// The host side of PadChannels (pad true) and UnpadChannels.
template <typename U>
void pad_channels_host(bool pad, int64_t outer, int c, int64_t inner, int cp, const void* x, void* y) {
  const U* src = static_cast<const U*>(x);
  U* dst = static_cast<U*>(y);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t p = 0; p < inner; ++p) {
      for (int j = 0; j < cp; ++j) {
        const int64_t padded = (o * inner + p) * cp + j;
        if (pad) {
          dst[padded] = j < c ? src[(o * c + j) * inner + p] : U(0);
        } else if (j < c) {
          dst[(o * c + j) * inner + p] = src[padded];
        }
      }
    }
  }
}

void pad_or_unpad(bool pad, int64_t outer, int c, int64_t inner, int cp, size_t bytes, const void* x, void* y,
                  bool gpu, CUstream_st* stream) {
  CORTADO_CHECK(c >= 0 && cp >= c && outer >= 0 && inner >= 0) << "channel padding from " << c << " to " << cp;
  if (gpu) {
#ifdef CORTADO_USE_CUDA
    gpu::pad_channels(pad, outer, c, inner, cp, bytes, x, y, stream);
    return;
#else
    (void)stream;
    CORTADO_CHECK(false) << "a device copy in a build without CUDA";
#endif
  }
  switch (bytes) {
    case 2: pad_channels_host<uint16_t>(pad, outer, c, inner, cp, x, y); return;
    case 4: pad_channels_host<uint32_t>(pad, outer, c, inner, cp, x, y); return;
    case 8: pad_channels_host<uint64_t>(pad, outer, c, inner, cp, x, y); return;
  }
  CORTADO_CHECK(false) << "channel padding of " << bytes << "-byte values";
}
}  // namespace

void PadChannels(int64_t outer, int c, int64_t inner, int cp, size_t bytes, const void* x, void* y, bool gpu,
                 CUstream_st* stream) {
  pad_or_unpad(true, outer, c, inner, cp, bytes, x, y, gpu, stream);
}

void UnpadChannels(int64_t outer, int c, int64_t inner, int cp, size_t bytes, const void* x, void* y, bool gpu,
                   CUstream_st* stream) {
  pad_or_unpad(false, outer, c, inner, cp, bytes, x, y, gpu, stream);
}

template <typename Ftype, typename Btype>
void LayoutConvertLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0] == top[0]) this->field_error("top", "LayoutConvert cannot be computed in place");
  if (bottom[0]->num_axes() > 8) {
    this->field_error("bottom", "LayoutConvert takes at most 8 axes, got shape ", bottom[0]->shape_string());
  }
  top[0]->ReshapeLike(*bottom[0]);
}

template <typename Ftype, typename Btype>
void LayoutConvertLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  CopyLayout(bottom[0]->shape(), bottom[0]->layout(), top[0]->layout(), type_of<Ftype>(),
             bottom[0]->cpu_data<Ftype>(), top[0]->mutable_cpu_data<Ftype>(), false, nullptr);
}

template <typename Ftype, typename Btype>
void LayoutConvertLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                    const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CopyLayout(top[0]->shape(), top[0]->layout(), bottom[0]->layout(), type_of<Btype>(), top[0]->cpu_diff<Btype>(),
             bottom[0]->mutable_cpu_diff<Btype>(), false, nullptr);
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void LayoutConvertLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  CopyLayout(bottom[0]->shape(), bottom[0]->layout(), top[0]->layout(), type_of<Ftype>(),
             bottom[0]->gpu_data<Ftype>(), top[0]->mutable_gpu_data<Ftype>(), true, this->context().stream());
}

template <typename Ftype, typename Btype>
void LayoutConvertLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                    const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CopyLayout(top[0]->shape(), top[0]->layout(), bottom[0]->layout(), type_of<Btype>(), top[0]->gpu_diff<Btype>(),
             bottom[0]->mutable_gpu_diff<Btype>(), true, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(LayoutConvertLayer);

}  // namespace cortado
