#include "cortado/layers/inner_product_layer.hpp"

#include <climits>
#include <optional>

#include "cortado/layers/param_blobs.hpp"
#include "cortado/util/gemm_bf16.hpp"
#include "cortado/util/math.hpp"
#include "cortado/util/math_buffer.hpp"
#ifdef CORTADO_USE_CUDA
#include "cortado/util/gpu_math.hpp"
#endif

namespace cortado {

template <typename Ftype, typename Btype>
int InnerProductLayer<Ftype, Btype>::CheckedAxis(const Blob& bottom) const {
  const int axis = this->layer_param().inner_product_param().axis();
  const int n = bottom.num_axes();
  if (axis < -n || axis >= n) {
    this->field_error("inner_product_param.axis", "= ", axis, " is out of range for a bottom of shape ",
                      bottom.shape_string());
  }
  return axis < 0 ? axis + n : axis;
}

template <typename Ftype, typename Btype>
void InnerProductLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const InnerProductParameter& p = this->layer_param().inner_product_param();
  if (!p.has_num_output()) this->field_error("inner_product_param.num_output", "is required");
  if (p.num_output() == 0 || p.num_output() > static_cast<uint32_t>(INT_MAX)) {
    this->field_error("inner_product_param.num_output", "must be in 1..", INT_MAX, ", got ", p.num_output());
  }
  CheckFiller(*this, p.weight_filler(), "inner_product_param.weight_filler");
  if (p.bias_term()) CheckFiller(*this, p.bias_filler(), "inner_product_param.bias_filler");
  num_output_ = static_cast<int>(p.num_output());
  bias_term_ = p.bias_term();
  transpose_ = p.transpose();
  const LayerParameter& lp = this->layer_param();
  forward_math_ = gpu_math_type(type_of<Ftype>(), lp.has_forward_math(), lp.forward_math());
  backward_math_ = gpu_math_type(type_of<Btype>(), lp.has_backward_math(), lp.backward_math());
  axis_ = CheckedAxis(*bottom[0]);
  k_ = static_cast<int>(bottom[0]->count(axis_));
  const std::vector<int> wshape = transpose_ ? std::vector<int>{k_, num_output_}
                                             : std::vector<int>{num_output_, k_};
  SetUpWeightAndBias(*this, &this->blobs_, wshape,
                     str_cat(" (num_output ", num_output_, ", input size ", k_, ", transpose ", transpose_, ")"),
                     bias_term_, {num_output_}, p.weight_filler(), p.bias_filler(), "inner_product_param",
                     [this](const std::vector<int>& shape) { return this->make_param(shape); });
  this->param_propagate_down_.assign(this->blobs_.size(), true);
}

template <typename Ftype, typename Btype>
void InnerProductLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const int axis = CheckedAxis(*bottom[0]);
  const size_t k = bottom[0]->count(axis);
  if (axis != axis_ || k != static_cast<size_t>(k_)) {
    this->field_error("bottom", "bottom shape ", bottom[0]->shape_string(), " gives ", k,
                      " inputs per row; the layer was set up for ", k_);
  }
  m_ = static_cast<int>(bottom[0]->count(0, axis_));
  std::vector<int> shape(bottom[0]->shape().begin(), bottom[0]->shape().begin() + axis_);
  shape.push_back(num_output_);
  top[0]->Reshape(shape);
}

template <typename Ftype, typename Btype>
void InnerProductLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  using M = math_t<Ftype>;
  MathBuffer<Ftype> y(top[0]->template mutable_cpu_data<Ftype>(), top[0]->count(), false);
  // O: the type of the GEMM operands, bfloat16 itself where the CPU
  // multiplies bfloat16 pairs (gemm_bf16.hpp), the math type otherwise.
  auto run = [&](auto operand) {
    using O = decltype(operand);
    const O* x = bottom[0]->template cpu_data<O>();
    const O* w = this->blobs_[0]->template cpu_data<O>();
    // (M, N) = (M, K) x op(W) (K, N)
    cpu_gemm_to_math<O>(Trans::No, transpose_ ? Trans::No : Trans::Yes, m_, num_output_, k_, M(1), x, w, M(0), y.get());
  };
  with_gemm_operands<Ftype>(run);
  if (bias_term_) {
    const M* b = this->blobs_[1]->template cpu_data<M>();
    M* yp = y.get();
    for (int i = 0; i < m_; ++i) {
      for (int j = 0; j < num_output_; ++j) yp[static_cast<size_t>(i) * num_output_ + j] += b[j];
    }
  }
  y.store();
}

template <typename Ftype, typename Btype>
void InnerProductLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                   const BlobVec& bottom) {
  using M = math_t<Btype>;
  // O: the type of the GEMM operands, as in Forward_cpu; the gradients are
  // summed in M.
  auto run = [&](auto operand) {
    using O = decltype(operand);
    const O* dy = top[0]->template cpu_diff<O>();
    if (this->param_propagate_down(0)) {
      const O* x = bottom[0]->template cpu_data<O>();
      MathBuffer<Btype> dw(this->blobs_[0]->template mutable_cpu_diff<Btype>(), this->blobs_[0]->count(), true);
      if (transpose_) {
        // (K, N) += X^T (K, M) x dY (M, N)
        cpu_gemm_to_math<O>(Trans::Yes, Trans::No, k_, num_output_, m_, M(1), x, dy, M(1), dw.get());
      } else {
        // (N, K) += dY^T (N, M) x X (M, K)
        cpu_gemm_to_math<O>(Trans::Yes, Trans::No, num_output_, k_, m_, M(1), dy, x, M(1), dw.get());
      }
      dw.store();
    }
    if (bias_term_ && this->param_propagate_down(1)) {
      MathBuffer<Btype> db(this->blobs_[1]->template mutable_cpu_diff<Btype>(), this->blobs_[1]->count(), true);
      M* d = db.get();
      for (int i = 0; i < m_; ++i) {
        for (int j = 0; j < num_output_; ++j) d[j] += M(dy[static_cast<size_t>(i) * num_output_ + j]);
      }
      db.store();
    }
    if (!propagate_down.empty() && propagate_down[0]) {
      const O* w = this->blobs_[0]->template cpu_data<O>();
      MathBuffer<Btype> dx(bottom[0]->template mutable_cpu_diff<Btype>(), bottom[0]->count(), false);
      // (M, K) = dY (M, N) x op(W) (N, K)
      cpu_gemm_to_math<O>(Trans::No, transpose_ ? Trans::Yes : Trans::No, m_, k_, num_output_, M(1), dy, w, M(0),
                          dx.get());
      dx.store();
    }
  };
  with_gemm_operands<Btype>(run);
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void InnerProductLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  cublasContext* handle = this->context().cublas();
  const Ftype* x = bottom[0]->template gpu_data<Ftype>();
  const Ftype* w = this->blobs_[0]->template gpu_data<Ftype>();
  Ftype* y = top[0]->template mutable_gpu_data<Ftype>();
  // (M, N) = (M, K) x op(W) (K, N)
  gpu_gemm<Ftype>(handle, Trans::No, transpose_ ? Trans::No : Trans::Yes, m_, num_output_, k_, 1.f, x, w, 0.f, y,
                  forward_math_);
  if (bias_term_) {
    gpu::ip_add_bias<Ftype>(m_, num_output_, this->blobs_[1]->template gpu_data<Ftype>(), y,
                            this->context().stream());
  }
}

template <typename Ftype, typename Btype>
void InnerProductLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                   const BlobVec& bottom) {
  cublasContext* handle = this->context().cublas();
  const Btype* dy = top[0]->template gpu_diff<Btype>();
  if (this->param_propagate_down(0)) {
    const Btype* x = bottom[0]->template gpu_data<Btype>();
    Btype* dw = this->blobs_[0]->template mutable_gpu_diff<Btype>();
    if (transpose_) {
      // (K, N) += X^T (K, M) x dY (M, N)
      gpu_gemm<Btype>(handle, Trans::Yes, Trans::No, k_, num_output_, m_, 1.f, x, dy, 1.f, dw, backward_math_);
    } else {
      // (N, K) += dY^T (N, M) x X (M, K)
      gpu_gemm<Btype>(handle, Trans::Yes, Trans::No, num_output_, k_, m_, 1.f, dy, x, 1.f, dw, backward_math_);
    }
  }
  if (bias_term_ && this->param_propagate_down(1)) {
    gpu::ip_bias_grad<Btype>(m_, num_output_, dy, this->blobs_[1]->template mutable_gpu_diff<Btype>(),
                             this->context().stream());
  }
  if (!propagate_down.empty() && propagate_down[0]) {
    const Btype* w = this->blobs_[0]->template gpu_data<Btype>();
    Btype* dx = bottom[0]->template mutable_gpu_diff<Btype>();
    // (M, K) = dY (M, N) x op(W) (N, K)
    gpu_gemm<Btype>(handle, Trans::No, transpose_ ? Trans::Yes : Trans::No, m_, k_, num_output_, 1.f, dy, w, 0.f, dx,
                    backward_math_);
  }
}
#endif  // CORTADO_USE_CUDA

CORTADO_INSTANTIATE_LAYER(InnerProductLayer);

}  // namespace cortado
