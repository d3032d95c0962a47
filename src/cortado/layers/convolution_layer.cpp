#include "cortado/layers/convolution_layer.hpp"

#include <algorithm>
#include <climits>
#include <optional>
#include <type_traits>

#include "cortado/layers/bias_layer.hpp"
#include "cortado/layers/param_blobs.hpp"
#include "cortado/util/gemm_bf16.hpp"
#include "cortado/util/math.hpp"
#include "cortado/util/math_buffer.hpp"
#include "cortado/util/cpu_parallel.hpp"
#ifdef CORTADO_USE_CUDA
#include <memory>

#include "cortado/util/cuda.hpp"
#include "cortado/util/gpu_math.hpp"
#endif

namespace cortado {

namespace {

constexpr const char* kKernelSize = "convolution_param.kernel_size";

// Fills (h, w) from a repeated field (0, 1 or 2 values) or its _h/_w pair
// (Caffe names the pairs kernel_h, pad_h, stride_h; pad_h or pad_w alone is
// allowed, as in Caffe).
template <typename L, typename Rep>
void read_pair(const L& layer, const Rep& rep, const std::string& name, const std::string& hw, bool has_h,
               uint32_t h, bool has_w, uint32_t w, int dflt, int* out_h, int* out_w) {
  const std::string field = "convolution_param." + name;
  if (has_h || has_w) {
    if (rep.size() > 0) layer.field_error(field, "give either ", name, " or ", hw, "_h and ", hw, "_w, not both");
    // pad_h and pad_w default to 0 in the schema; kernel and stride have no default.
    if (!(has_h && has_w) && hw != "pad") {
      layer.field_error("convolution_param." + hw + (has_h ? "_w" : "_h"), hw, "_h and ", hw,
                        "_w must be given together");
    }
    *out_h = static_cast<int>(h);
    *out_w = static_cast<int>(w);
    return;
  }
  switch (rep.size()) {
    case 0: *out_h = *out_w = dflt; return;
    case 1: *out_h = *out_w = static_cast<int>(rep.Get(0)); return;
    case 2:
      *out_h = static_cast<int>(rep.Get(0));
      *out_w = static_cast<int>(rep.Get(1));
      return;
    default: layer.field_error(field, "takes 1 or 2 values for a 2D convolution, got ", rep.size());
  }
}

}  // namespace

ConvWindow ReadConvWindow(const LayerBase& layer) {
  const ConvolutionParameter& p = layer.layer_param().convolution_param();
  if (!p.has_kernel_h() && !p.has_kernel_w() && p.kernel_size_size() == 0) {
    layer.field_error(kKernelSize, "is required (or kernel_h and kernel_w)");
  }
  ConvWindow w;
  read_pair(layer, p.kernel_size(), "kernel_size", "kernel", p.has_kernel_h(), p.kernel_h(), p.has_kernel_w(),
            p.kernel_w(), 0, &w.kh, &w.kw);
  if (w.kh <= 0 || w.kw <= 0) layer.field_error(kKernelSize, "must be positive, got ", w.kh, "x", w.kw);
  read_pair(layer, p.pad(), "pad", "pad", p.has_pad_h(), p.pad_h(), p.has_pad_w(), p.pad_w(), 0, &w.ph, &w.pw);
  read_pair(layer, p.stride(), "stride", "stride", p.has_stride_h(), p.stride_h(), p.has_stride_w(), p.stride_w(),
            1, &w.sh, &w.sw);
  if (w.sh <= 0 || w.sw <= 0) layer.field_error("convolution_param.stride", "must be positive, got ", w.sh, "x", w.sw);
  read_pair(layer, p.dilation(), "dilation", "dilation", false, 0, false, 0, 1, &w.dh, &w.dw);
  if (w.dh <= 0 || w.dw <= 0) {
    layer.field_error("convolution_param.dilation", "must be positive, got ", w.dh, "x", w.dw);
  }
  return w;
}

void CheckConvAxis(const LayerBase& layer) {
  const int axis = layer.layer_param().convolution_param().axis();
  if (axis != 1) {
    layer.field_error("convolution_param.axis", "only axis 1 (N, C, H, W) is implemented, got ", axis);
  }
}

void CheckKernelFits(const LayerBase& layer, const ConvWindow& win, int h, int w, bool square_short) {
  const int64_t ekh = win.dilated_h(), ekw = win.dilated_w();
  const int64_t hp = h + 2 * int64_t{win.ph}, wp = w + 2 * int64_t{win.pw};
  if (ekh <= hp && ekw <= wp) return;
  const auto& p = layer.layer_param().convolution_param();
  const std::string field = p.kernel_size_size() > 0 ? kKernelSize : "convolution_param.kernel_h";
  if (square_short && win.kh == win.kw && win.dh == win.dw && win.ph == win.pw) {
    layer.field_error(field, "kernel ", win.kh, " (dilated ", ekh, ") is larger than the padded input ", hp, "x", wp,
                      " (pad ", win.ph, ")");
  }
  layer.field_error(field, "kernel ", win.kh, "x", win.kw, " (dilated ", ekh, "x", ekw,
                    ") is larger than the padded input ", hp, "x", wp, " (pad ", win.ph, "x", win.pw, ")");
}

namespace {

// y (rows, cols) += b broadcast along the rows.
template <typename M>
void add_bias(int rows, int cols, const M* b, M* y) {
  for (int o = 0; o < rows; ++o) {
    M* row = y + static_cast<size_t>(o) * cols;
    for (int j = 0; j < cols; ++j) row[j] += b[o];
  }
}

// s[o] += sum of row o of x (rows, cols).
template <typename X, typename M>
void add_row_sums(int rows, int cols, const X* x, M* s) {
  for (int o = 0; o < rows; ++o) {
    const X* row = x + static_cast<size_t>(o) * cols;
    M sum = 0;
    for (int j = 0; j < cols; ++j) sum += M(row[j]);
    s[o] += sum;
  }
}

// Depthwise convolution of one image: y[o] = sum_{ky,kx} w[o, ky, kx] *
// x[o / mult] at the dilated, strided, padded position; no bias.
template <typename M>
void depthwise_forward_cpu(const DepthwiseGeometry& g, const M* x, const M* w, M* y) {
  const int64_t hw = static_cast<int64_t>(g.height) * g.width, ohw = static_cast<int64_t>(g.out_h) * g.out_w;
  const int kk = g.kh * g.kw;
  for (int c = 0; c < g.channels; ++c) {
    const M* xc = x + c * hw;
    for (int m = 0; m < g.mult; ++m) {
      const int o = c * g.mult + m;
      const M* wo = w + static_cast<int64_t>(o) * kk;
      M* yo = y + o * ohw;
      for (int oy = 0; oy < g.out_h; ++oy)
        for (int ox = 0; ox < g.out_w; ++ox) {
          M acc = 0;
          for (int ky = 0; ky < g.kh; ++ky) {
            const int iy = oy * g.sh - g.ph + ky * g.dh;
            if (iy < 0 || iy >= g.height) continue;
            for (int kx = 0; kx < g.kw; ++kx) {
              const int ix = ox * g.sw - g.pw + kx * g.dw;
              if (ix >= 0 && ix < g.width) acc += wo[ky * g.kw + kx] * xc[iy * g.width + ix];
            }
          }
          yo[oy * g.out_w + ox] = acc;
        }
    }
  }
}

// Its backward for one image: dw += dy (x) x (when dw), dx = w^T dy
// (overwritten, when dx).
template <typename M>
void depthwise_backward_cpu(const DepthwiseGeometry& g, const M* x, const M* w, const M* dy, M* dw, M* dx) {
  const int64_t hw = static_cast<int64_t>(g.height) * g.width, ohw = static_cast<int64_t>(g.out_h) * g.out_w;
  const int kk = g.kh * g.kw;
  if (dx) std::fill(dx, dx + g.channels * hw, M(0));
  for (int c = 0; c < g.channels; ++c) {
    const M* xc = x ? x + c * hw : nullptr;
    M* dxc = dx ? dx + c * hw : nullptr;
    for (int m = 0; m < g.mult; ++m) {
      const int o = c * g.mult + m;
      const M* wo = w + static_cast<int64_t>(o) * kk;
      M* dwo = dw ? dw + static_cast<int64_t>(o) * kk : nullptr;
      const M* dyo = dy + o * ohw;
      for (int oy = 0; oy < g.out_h; ++oy)
        for (int ox = 0; ox < g.out_w; ++ox) {
          const M d = dyo[oy * g.out_w + ox];
          for (int ky = 0; ky < g.kh; ++ky) {
            const int iy = oy * g.sh - g.ph + ky * g.dh;
            if (iy < 0 || iy >= g.height) continue;
            for (int kx = 0; kx < g.kw; ++kx) {
              const int ix = ox * g.sw - g.pw + kx * g.dw;
              if (ix < 0 || ix >= g.width) continue;
              const int64_t at = iy * g.width + ix;
              if (dwo) dwo[ky * g.kw + kx] += d * xc[at];
              if (dxc) dxc[at] += wo[ky * g.kw + kx] * d;
            }
          }
        }
    }
  }
}

}  // namespace

template <typename Ftype, typename Btype>
void ConvolutionLayer<Ftype, Btype>::ReadGeometry() {
  const ConvolutionParameter& p = this->layer_param().convolution_param();
  CheckConvAxis(*this);
  if (!p.has_num_output()) this->field_error("convolution_param.num_output", "is required");
  if (p.num_output() == 0) this->field_error("convolution_param.num_output", "must be positive, got 0");
  if (p.num_output() > static_cast<uint32_t>(INT_MAX))
    this->field_error("convolution_param.num_output", "= ", p.num_output(), " is larger than ", INT_MAX);
  win_ = ReadConvWindow(*this);
  if (p.group() == 0) this->field_error("convolution_param.group", "must be positive, got 0");
  num_output_ = static_cast<int>(p.num_output());
  group_ = static_cast<int>(p.group());
  if (num_output_ % group_ != 0) {
    this->field_error("convolution_param.group", "= ", group_, " does not divide num_output ", num_output_);
  }
  bias_term_ = p.bias_term();
  const LayerParameter& lp = this->layer_param();
  forward_math_ = gpu_math_type(type_of<Ftype>(), lp.has_forward_math(), lp.forward_math());
  backward_math_ = gpu_math_type(type_of<Btype>(), lp.has_backward_math(), lp.backward_math());
  is_1x1_ = !transposed_ && win_.is_1x1();
  CheckFiller(*this, p.weight_filler(), "convolution_param.weight_filler");
  if (bias_term_) CheckFiller(*this, p.bias_filler(), "convolution_param.bias_filler");
}

template <typename Ftype, typename Btype>
void ConvolutionLayer<Ftype, Btype>::CheckBottoms(const BlobVec& bottom) const {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (bottom[i]->num_axes() != 4) {
      this->field_error("bottom", "bottom ", i, " has shape ", bottom[i]->shape_string(), "; ", this->type(),
                        " needs 4 axes (N, C, H, W)");
    }
    if (bottom[i]->shape() != bottom[0]->shape()) {
      this->field_error("bottom", "all bottoms must have the same shape: bottom 0 is ",
                        bottom[0]->shape_string(), ", bottom ", i, " is ", bottom[i]->shape_string());
    }
  }
  const int c = bottom[0]->shape(1), h = bottom[0]->shape(2), w = bottom[0]->shape(3);
  if (c % group_ != 0) {
    this->field_error("convolution_param.group", "= ", group_, " does not divide the ", c, " input channels");
  }
  if (!transposed_) {
    CheckKernelFits(*this, win_, h, w, true);
    return;
  }
  const int oh = win_.deconv_out_h(h), ow = win_.deconv_out_w(w);
  if (oh <= 0 || ow <= 0) {
    this->field_error("convolution_param.pad", "pad ", win_.ph, "x", win_.pw, " leaves an empty output (", oh, "x",
                      ow, ") for input ", h, "x", w);
  }
}

template <typename Ftype, typename Btype>
void ConvolutionLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  ReadGeometry();
  CheckBottoms(bottom);
  channels_ = bottom[0]->shape(1);
  depthwise_ = !transposed_ && group_ > 1 && group_ == channels_;
  const auto& p = this->layer_param().convolution_param();
  SetUpWeightAndBias(*this, &this->blobs_,
                     transposed_ ? std::vector<int>{channels_, num_output_ / group_, win_.kh, win_.kw}
                                 : std::vector<int>{num_output_, channels_ / group_, win_.kh, win_.kw},
                     transposed_ ? " (C, num_output/group, KH, KW)" : " (num_output, C/group, KH, KW)", bias_term_,
                     {num_output_}, p.weight_filler(), p.bias_filler(), "convolution_param",
                     [this](const std::vector<int>& shape) { return this->make_param(shape); });
  this->param_propagate_down_.assign(this->blobs_.size(), true);
}

template <typename Ftype, typename Btype>
void ConvolutionLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CheckBottoms(bottom);
  if (bottom[0]->shape(1) != channels_) {
    this->field_error("bottom", "bottom has ", bottom[0]->shape(1), " channels; the layer was set up for ",
                      channels_);
  }
  if (transposed_) {
    for (Blob* b : bottom) {
      for (Blob* t : top) {
        if (b == t) this->field_error("top", this->type(), " cannot be computed in place");
      }
    }
  }
  num_ = bottom[0]->shape(0);
  height_ = bottom[0]->shape(2);
  width_ = bottom[0]->shape(3);
  out_h_ = transposed_ ? win_.deconv_out_h(height_) : win_.conv_out_h(height_);
  out_w_ = transposed_ ? win_.deconv_out_w(width_) : win_.conv_out_w(width_);
  for (Blob* t : top) t->Reshape({num_, num_output_, out_h_, out_w_});
}

template <typename Ftype, typename Btype>
void ConvolutionLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if (nchw_.Use(bottom, top)) {
    nchw_.Forward(bottom, top, type_of<Ftype>(), false, nullptr,
                  [&](const BlobVec& b, const BlobVec& t) { Forward_cpu(b, t); });
    return;
  }
  using M = math_t<Ftype>;
  const ConvGemm gm = gemm();
  const ConvImage im = col_image();
  const int ohw = gm.n;
  const int64_t chw = bottom_size(), top_image = top_size();
  const size_t cols = is_1x1_ || depthwise_ ? 0 : col_size();
  const M* b = bias_term_ ? this->blobs_[1]->template cpu_data<M>() : nullptr;
  // O: the type of the GEMM operands (input, columns, weights). bfloat16
  // itself where the CPU multiplies bfloat16 pairs (gemm_bf16.hpp), the math
  // type otherwise; the outputs are summed in the math type either way.
  auto run = [&](auto operand) {
    using O = decltype(operand);
    const O* w = this->blobs_[0]->template cpu_data<O>();
    // The bfloat16 kernel packs each group's weights once for all images.
    std::vector<detail::Bf16PackedA> packed;
    if constexpr (std::is_same_v<O, bfloat16>) {
      packed.resize(group_);
      for (int g = 0; g < group_; ++g) packed[g].pack(Trans::No, gm.m, gm.k, w + gm.w_offset(g));
    }
    // (mg, ohw) = (mg, kg) x (kg, ohw) per group
    auto multiply = [&](int g, Trans ta, Trans tb, int rows, int cols, int inner, const O* wg, const O* cg,
                        float beta, M* yg) {
      if constexpr (std::is_same_v<O, bfloat16>) {
        detail::gemm_bf16_dot(packed[g], Trans::No, cols, M(1), cg, M(beta), yg);
      } else {
        cpu_gemm<M>(ta, tb, rows, cols, inner, M(1), wg, cg, M(beta), yg);
      }
    };
    for (size_t i = 0; i < bottom.size(); ++i) {
      const O* x = bottom[i]->template cpu_data<O>();
      MathBuffer<Ftype> y(top[i]->template mutable_cpu_data<Ftype>(), top[i]->count(), false);
      // Images are independent: each chunk of them runs on its own core with its own column buffer
      // (the thread's scratch, kept from pass to pass).
      cpu_parallel_for(num_, [&](int, int n0, int n1) {
        O* col = thread_scratch<O>(0, cols);
        for (int n = n0; n < n1; ++n) {
          const O* xn = x + n * chw;
          M* yn = y.get() + n * top_image;
          if constexpr (std::is_same_v<O, M>) {
            if (depthwise_) {
              depthwise_forward_cpu<M>(depthwise_geometry(), xn, w, yn);
              if (b) add_bias(num_output_, ohw, b, yn);
              continue;
            }
          }
          const O* c = xn;
          if (!is_1x1_) {
            im.im2col_cpu(xn, col);
            c = col;
          }
          gm.Forward(multiply, w, c, yn);
          if (b) add_bias(num_output_, ohw, b, yn);
        }
      });
      y.store();
    }
  };
  with_gemm_operands<Ftype>(run, !depthwise_);
}

template <typename Ftype, typename Btype>
void ConvolutionLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                  const BlobVec& bottom) {
  if (nchw_.Use(bottom, top)) {
    nchw_.Backward(top, propagate_down, bottom, type_of<Ftype>(), type_of<Btype>(), false, nullptr,
                   [&](const BlobVec& t, const BlobVec& b) { Backward_cpu(t, propagate_down, b); });
    return;
  }
  using M = math_t<Btype>;
  const ConvGemm gm = gemm();
  const ConvImage im = col_image();
  const int ohw = gm.n;
  const int64_t chw = bottom_size(), top_image = top_size();
  const size_t cols = is_1x1_ || depthwise_ ? 0 : col_size();
  const bool do_w = this->param_propagate_down(0);
  const bool do_b = bias_term_ && this->param_propagate_down(1);
  // Gradients of the whole batch sum in M and are added to the Btype diffs once.
  std::optional<MathBuffer<Btype>> wd, bd;
  if (do_w) wd.emplace(this->blobs_[0]->template mutable_cpu_diff<Btype>(), this->blobs_[0]->count(), true);
  if (do_b) bd.emplace(this->blobs_[1]->template mutable_cpu_diff<Btype>(), this->blobs_[1]->count(), true);
  // The batch is split into chunks of images, one per core. Chunk 0 adds its
  // parameter gradients to the diffs directly, chunk k > 0 into its own zeroed
  // partial sums, which are added in chunk order at the end: the same bits
  // on every run with the same thread count.
  const int chunks = cpu_chunks(num_);
  const size_t w_count = do_w ? this->blobs_[0]->count() : 0, b_count = do_b ? num_output_ : 0;
  std::vector<M> w_part(w_count * (chunks - 1)), b_part(b_count * (chunks - 1));
  auto w_sum = [&](int chunk) { return chunk == 0 ? wd->get() : w_part.data() + (chunk - 1) * w_count; };
  auto b_sum = [&](int chunk) { return chunk == 0 ? bd->get() : b_part.data() + (chunk - 1) * b_count; };
  // O: the type of the GEMM operands (weights, top gradient, columns), as in
  // Forward_cpu; the gradients the GEMMs produce are in M.
  auto run = [&](auto operand) {
    using O = decltype(operand);
    const O* w = this->blobs_[0]->template cpu_data<O>();
    // The bfloat16 kernel packs each group's W^T once for all images.
    std::vector<detail::Bf16PackedA> packed;
    if constexpr (std::is_same_v<O, bfloat16>) {
      const bool any_x = std::find(propagate_down.begin(), propagate_down.end(), true) != propagate_down.end();
      if (any_x) packed.resize(group_);
      for (size_t g = 0; g < packed.size(); ++g) packed[g].pack(Trans::Yes, gm.k, gm.m, w + gm.w_offset(g));
    }
    // dW_g (mg, kg) += dY_g (mg, ohw) x col_g^T (ohw, kg)
    auto weight = [&](int, Trans ta, Trans tb, int rows, int cols, int inner, const O* dyg, const O* cg, float beta,
                      M* dwg) { cpu_gemm_to_math<O>(ta, tb, rows, cols, inner, M(1), dyg, cg, M(beta), dwg); };
    // dcol_g (kg, ohw) = W_g^T (kg, mg) x dY_g (mg, ohw)
    auto data = [&](int g, Trans ta, Trans tb, int rows, int cols, int inner, const O* wg, const O* dyg, float beta,
                    M* dg) {
      if constexpr (std::is_same_v<O, bfloat16>) {
        detail::gemm_bf16_dot(packed[g], Trans::No, cols, M(1), dyg, M(beta), dg);
      } else {
        cpu_gemm<M>(ta, tb, rows, cols, inner, M(1), wg, dyg, M(beta), dg);
      }
    };
    for (size_t i = 0; i < top.size(); ++i) {
      const bool do_x = i < propagate_down.size() && propagate_down[i];
      if (!do_w && !do_b && !do_x) continue;
      const O* td = top[i]->template cpu_diff<O>();
      const O* x = do_w ? bottom[i]->template cpu_data<O>() : nullptr;
      std::optional<MathBuffer<Btype>> xd;
      if (do_x) xd.emplace(bottom[i]->template mutable_cpu_diff<Btype>(), bottom[i]->count(), false);
      cpu_parallel_for(num_, [&](int chunk, int n0, int n1) {
        O* col = do_w ? thread_scratch<O>(0, cols) : nullptr;
        M* col_diff = do_x ? thread_scratch<M>(1, cols) : nullptr;
        M* w_acc = do_w ? w_sum(chunk) : nullptr;
        M* b_acc = do_b ? b_sum(chunk) : nullptr;
        for (int n = n0; n < n1; ++n) {
          const O* tdn = td + n * top_image;
          if (do_b) add_row_sums(num_output_, ohw, tdn, b_acc);
          if constexpr (std::is_same_v<O, M>) {
            if (depthwise_) {
              if (do_w || do_x)
                depthwise_backward_cpu<M>(depthwise_geometry(), do_w ? x + n * chw : nullptr, w, tdn, w_acc,
                                          do_x ? xd->get() + n * chw : nullptr);
              continue;
            }
          }
          if (do_w) {
            const O* c = x + n * chw;
            if (!is_1x1_) {
              im.im2col_cpu(c, col);
              c = col;
            }
            gm.Weight(weight, tdn, c, w_acc);
          }
          if (do_x) {
            M* xdn = xd->get() + n * chw;
            M* dst = is_1x1_ ? xdn : col_diff;
            gm.Backward(data, w, tdn, dst);
            if (!is_1x1_) im.col2im_cpu(col_diff, xdn);
          }
        }
      });
      if (xd) xd->store();
    }
  };
  with_gemm_operands<Btype>(run, !depthwise_);
  for (int chunk = 1; chunk < chunks; ++chunk) {
    if (do_w) cpu_axpy<M>(static_cast<int64_t>(w_count), M(1), w_sum(chunk), wd->get());
    if (do_b) cpu_axpy<M>(static_cast<int64_t>(b_count), M(1), b_sum(chunk), bd->get());
  }
  if (wd) wd->store();
  if (bd) bd->store();
}

#ifdef CORTADO_USE_CUDA
namespace {
using DeviceScratch = std::unique_ptr<void, void (*)(void*)>;
// Scratch from the caching allocator; freed blocks are reused by later work
// on the same stream, so no synchronization is needed.
DeviceScratch scratch(size_t bytes) { return DeviceScratch(cuda::device_alloc(bytes), &cuda::device_free); }
}  // namespace

template <typename Ftype, typename Btype>
void ConvolutionLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (nchw_.Use(bottom, top)) {
    nchw_.Forward(bottom, top, type_of<Ftype>(), true, this->context().stream(),
                  [&](const BlobVec& b, const BlobVec& t) { Forward_gpu(b, t); });
    return;
  }
  const ConvGemm gm = gemm();
  const ConvImage im = col_image();
  const int ohw = gm.n;
  const int64_t chw = bottom_size(), top_image = top_size();
  gpu_stream stream = this->context().stream();
  cublasContext* handle = this->context().cublas();
  const Ftype* w = this->blobs_[0]->template gpu_data<Ftype>();
  const Ftype* b = bias_term_ ? this->blobs_[1]->template gpu_data<Ftype>() : nullptr;
  DeviceScratch col = scratch(is_1x1_ || depthwise_ ? 0 : col_size() * sizeof(Ftype));
  Ftype* colp = static_cast<Ftype*>(col.get());
  // (mg, ohw) = (mg, kg) x (kg, ohw) per group
  auto multiply = [&](int, Trans ta, Trans tb, int rows, int cols, int inner, const Ftype* a, const Ftype* bm,
                      float beta, Ftype* c) {
    gpu_gemm<Ftype>(handle, ta, tb, rows, cols, inner, 1.f, a, bm, beta, c, forward_math_);
  };
  for (size_t i = 0; i < bottom.size(); ++i) {
    const Ftype* x = bottom[i]->template gpu_data<Ftype>();
    Ftype* y = top[i]->template mutable_gpu_data<Ftype>();
    if (depthwise_) {
      gpu::depthwise_forward<Ftype>(depthwise_geometry(), x, w, y, stream);
      if (b) gpu::bias_forward<Ftype>(num_, num_output_, ohw, y, b, y, stream);
      continue;
    }
    for (int n = 0; n < num_; ++n) {
      const Ftype* c = x + n * chw;
      if (!is_1x1_) {
        im.im2col_gpu(c, colp, stream);
        c = colp;
      }
      gm.Forward(multiply, w, c, y + n * top_image);
    }
    if (b) gpu::bias_forward<Ftype>(num_, num_output_, ohw, y, b, y, stream);
  }
}

template <typename Ftype, typename Btype>
void ConvolutionLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                  const BlobVec& bottom) {
  if (nchw_.Use(bottom, top)) {
    nchw_.Backward(top, propagate_down, bottom, type_of<Ftype>(), type_of<Btype>(), true, this->context().stream(),
                   [&](const BlobVec& t, const BlobVec& b) { Backward_gpu(t, propagate_down, b); });
    return;
  }
  const ConvGemm gm = gemm();
  const ConvImage im = col_image();
  const int ohw = gm.n;
  const int64_t chw = bottom_size(), top_image = top_size();
  gpu_stream stream = this->context().stream();
  cublasContext* handle = this->context().cublas();
  const bool do_w = this->param_propagate_down(0);
  const bool do_b = bias_term_ && this->param_propagate_down(1);
  // 16-bit diffs with FLOAT math: the weight gradient of a bottom sums in FP32.
  constexpr bool kHalf = is_half_v<Btype>;
  const bool f32_acc = kHalf && backward_math_ == FLOAT;
  const size_t wcount = this->blobs_[0]->count();
  Btype* wd = do_w ? this->blobs_[0]->template mutable_gpu_diff<Btype>() : nullptr;
  Btype* bd = do_b ? this->blobs_[1]->template mutable_gpu_diff<Btype>() : nullptr;
  const Btype* w = this->blobs_[0]->template gpu_data<Btype>();
  DeviceScratch col = scratch(is_1x1_ || depthwise_ ? 0 : col_size() * sizeof(Btype));
  DeviceScratch wacc = scratch(do_w && f32_acc && !depthwise_ ? wcount * sizeof(float) : 0);
  Btype* colp = static_cast<Btype*>(col.get());
  float* waccp = static_cast<float*>(wacc.get());
  // dW_g (mg, kg) += dY_g (mg, ohw) x col_g^T (ohw, kg), in FP32 (waccp) or the diff's type (wd);
  // dcol_g (kg, ohw) = W_g^T (kg, mg) x dY_g (mg, ohw).
  auto multiply = [&](int, Trans ta, Trans tb, int rows, int cols, int inner, const Btype* a, const Btype* bm,
                      float beta, auto* c) {
    if constexpr (std::is_same_v<decltype(c), float*> && kHalf) {
      gpu::gemm_accumulate_f32<Btype>(handle, ta, tb, rows, cols, inner, a, bm, c);
    } else {
      gpu_gemm<Btype>(handle, ta, tb, rows, cols, inner, 1.f, a, bm, beta, c, backward_math_);
    }
  };
  for (size_t i = 0; i < top.size(); ++i) {
    const bool do_x = i < propagate_down.size() && propagate_down[i];
    if (!do_w && !do_b && !do_x) continue;
    const Btype* td = top[i]->template gpu_diff<Btype>();
    if (do_b) gpu::bias_backward<Btype>(num_, num_output_, ohw, td, true, bd, stream);
    const Btype* x = do_w ? bottom[i]->template gpu_data<Btype>() : nullptr;
    Btype* xd = do_x ? bottom[i]->template mutable_gpu_diff<Btype>() : nullptr;
    if (depthwise_) {  // the weight kernel sums the batch in float itself
      if (do_w) gpu::depthwise_backward_weight<Btype>(depthwise_geometry(), x, td, wd, stream);
      if (do_x) gpu::depthwise_backward_data<Btype>(depthwise_geometry(), w, td, xd, stream);
      continue;
    }
    if (waccp) CORTADO_CUDA_CHECK(cudaMemsetAsync(waccp, 0, wcount * sizeof(float), stream));
    for (int n = 0; n < num_; ++n) {
      const Btype* tdn = td + n * top_image;
      if (do_w) {
        const Btype* c = x + n * chw;
        if (!is_1x1_) {
          im.im2col_gpu(c, colp, stream);
          c = colp;
        }
        if constexpr (kHalf) {
          if (waccp) {
            gm.Weight(multiply, tdn, c, waccp);
          } else {
            gm.Weight(multiply, tdn, c, wd);
          }
        } else {
          gm.Weight(multiply, tdn, c, wd);
        }
      }
      if (do_x) {
        Btype* xdn = xd + n * chw;
        gm.Backward(multiply, w, tdn, is_1x1_ ? xdn : colp);
        if (!is_1x1_) im.col2im_gpu(colp, xdn, stream);
      }
    }
    if (waccp) gpu::add_f32<Btype>(static_cast<int64_t>(wcount), waccp, wd, stream);
  }
}
#endif  // CORTADO_USE_CUDA

CORTADO_INSTANTIATE_LAYER(ConvolutionLayer);

}  // namespace cortado
