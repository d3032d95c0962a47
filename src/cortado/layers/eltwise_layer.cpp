#include "cortado/layers/eltwise_layer.hpp"

#include <cmath>

#include "cortado/layers/relu_layer.hpp"
#include "cortado/util/cpu_parallel.hpp"

namespace cortado {

namespace {
// Values per range of the CPU loops: arrays smaller than two ranges stay on
// the calling thread.
constexpr int64_t kEltwiseGrain = int64_t{1} << 16;
}  // namespace

template <typename Ftype, typename Btype>
void EltwiseLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const EltwiseParameter& p = this->layer_param().eltwise_param();
  op_ = p.operation();
  const int nb = static_cast<int>(bottom.size());
  if (p.coeff_size() > 0 && op_ != EltwiseParameter::SUM) {
    this->field_error("eltwise_param.coeff", "applies to operation SUM only, got operation ",
                      EltwiseParameter::EltwiseOp_Name(op_));
  }
  if (p.coeff_size() > 0 && p.coeff_size() != nb) {
    this->field_error("eltwise_param.coeff", "has ", p.coeff_size(), " values for ", nb, " bottoms");
  }
  // The GPU kernels take the bottoms' pointers as one kernel argument.
  if (this->on_gpu() && nb > 64) this->field_error("bottom", "Eltwise on the GPU takes at most 64 bottoms, got ", nb);
  coeff_.assign(nb, 1.0);
  for (int i = 0; i < p.coeff_size(); ++i) coeff_[i] = p.coeff(i);
  stable_prod_grad_ = p.stable_prod_grad();
}

template <typename Ftype, typename Btype>
bool EltwiseLayer<Ftype, Btype>::AbsorbTail(FusionRole role, LayerBase*) {
  if (role != FusionRole::kReLU || op_ != EltwiseParameter::SUM || relu_) return false;
  relu_ = true;
  return true;
}

template <typename Ftype, typename Btype>
FusionRole EltwiseLayer<Ftype, Btype>::fusion_role() const {
  if (op_ != EltwiseParameter::SUM || coeff_.size() != 2 || relu_) return FusionRole::kNone;
  return coeff_[0] == 1.0 && coeff_[1] == 1.0 ? FusionRole::kResidualAdd : FusionRole::kNone;
}

template <typename Ftype, typename Btype>
void EltwiseLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (bottom[i]->shape() != bottom[0]->shape()) {
      this->field_error(str_cat("bottom[", i, "]"), "shape ", bottom[i]->shape_string(), " differs from bottom[0]'s ",
                        bottom[0]->shape_string(), "; Eltwise needs equal shapes");
    }
    if (bottom[i] == top[0]) this->field_error("top", "Eltwise cannot be computed in place");
  }
  top[0]->ReshapeLike(*bottom[0]);
  if (op_ == EltwiseParameter::MAX) argmax_.resize(bottom[0]->count());
}

template <typename Ftype, typename Btype>
void EltwiseLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if (fused_away()) return;  // the BatchNorm chain before it computes the sum
  using M = math_t<Ftype>;
  const int64_t n = static_cast<int64_t>(top[0]->count());
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  std::vector<const Ftype*> x(bottom.size());
  for (size_t i = 0; i < bottom.size(); ++i) x[i] = bottom[i]->cpu_data<Ftype>();
  const ReLUOp relu{};
  const bool fused_relu = relu_;
  // Each op in a loop of its own, split over the cores (the ranges change
  // nothing: every value is computed alone, by the same expressions).
  switch (op_) {
    case EltwiseParameter::SUM: {
      std::vector<M> c(coeff_.size());
      for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<M>(coeff_[i]);
      cpu_parallel_range(n, kEltwiseGrain, [&](int64_t lo, int64_t hi) {
        if (x.size() == 2) {  // the residual sum
          const Ftype *a = x[0], *b = x[1];
          const M c0 = c[0], c1 = c[1];
          for (int64_t k = lo; k < hi; ++k) {
            M acc = static_cast<M>(a[k]) * c0;
            acc += c1 * static_cast<M>(b[k]);
            Ftype v = static_cast<Ftype>(acc);
            if (fused_relu) v = static_cast<Ftype>(relu.forward(static_cast<M>(v)));  // the fused ReLU, as it computes
            y[k] = v;
          }
          return;
        }
        for (int64_t k = lo; k < hi; ++k) {
          M acc = static_cast<M>(x[0][k]) * c[0];
          for (size_t i = 1; i < x.size(); ++i) acc += c[i] * static_cast<M>(x[i][k]);
          Ftype v = static_cast<Ftype>(acc);
          if (fused_relu) v = static_cast<Ftype>(relu.forward(static_cast<M>(v)));
          y[k] = v;
        }
      });
      break;
    }
    case EltwiseParameter::PROD:
      cpu_parallel_range(n, kEltwiseGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t k = lo; k < hi; ++k) {
          M acc = static_cast<M>(x[0][k]);
          for (size_t i = 1; i < x.size(); ++i) acc *= static_cast<M>(x[i][k]);
          Ftype v = static_cast<Ftype>(acc);
          if (fused_relu) v = static_cast<Ftype>(relu.forward(static_cast<M>(v)));
          y[k] = v;
        }
      });
      break;
    case EltwiseParameter::MAX:
      cpu_parallel_range(n, kEltwiseGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t k = lo; k < hi; ++k) {
          M acc = static_cast<M>(x[0][k]);
          int arg = 0;
          for (size_t i = 1; i < x.size(); ++i) {
            const M v = static_cast<M>(x[i][k]);
            if (v > acc) {
              acc = v;
              arg = static_cast<int>(i);
            }
          }
          Ftype v = static_cast<Ftype>(acc);
          if (fused_relu) v = static_cast<Ftype>(relu.forward(static_cast<M>(v)));
          y[k] = v;
          argmax_[k] = arg;
        }
      });
      break;
  }
}

template <typename Ftype, typename Btype>
void EltwiseLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                              const BlobVec& bottom) {
  if (fused_away()) return;
  using M = math_t<Btype>;
  const int64_t n = static_cast<int64_t>(top[0]->count());
  const Btype* dy = top[0]->cpu_diff<Btype>();
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    Btype* dx = bottom[i]->mutable_cpu_diff<Btype>();
    switch (op_) {
      case EltwiseParameter::SUM: {
        const M c = static_cast<M>(coeff_[i]);
        if (relu_) {
          // The fused ReLU's gradient, as ReLU's backward stores it, then the sum's.
          const Ftype* y = top[0]->cpu_data<Ftype>();
          const ReLUOp relu{};
          cpu_parallel_range(n, kEltwiseGrain, [&](int64_t lo, int64_t hi) {
            for (int64_t k = lo; k < hi; ++k) {
              const Btype g = static_cast<Btype>(
                  relu.backward(static_cast<M>(static_cast<Btype>(y[k])), M(0), static_cast<M>(dy[k])));
              dx[k] = static_cast<Btype>(c * static_cast<M>(g));
            }
          });
          break;
        }
        cpu_parallel_range(n, kEltwiseGrain, [&](int64_t lo, int64_t hi) {
          for (int64_t k = lo; k < hi; ++k) dx[k] = static_cast<Btype>(c * static_cast<M>(dy[k]));
        });
        break;
      }
      case EltwiseParameter::PROD: {
        if (stable_prod_grad_) {
          std::vector<const Btype*> x(bottom.size());
          for (size_t j = 0; j < bottom.size(); ++j) x[j] = bottom[j]->cpu_data<Btype>();
          for (int64_t k = 0; k < n; ++k) {
            M prod = static_cast<M>(dy[k]);
            for (size_t j = 0; j < x.size(); ++j) {
              if (j != i) prod *= static_cast<M>(x[j][k]);
            }
            dx[k] = static_cast<Btype>(prod);
          }
        } else {
          const Btype* y = top[0]->cpu_data<Btype>();
          const Btype* xi = bottom[i]->cpu_data<Btype>();
          for (int64_t k = 0; k < n; ++k) {
            dx[k] = static_cast<Btype>(static_cast<M>(dy[k]) * static_cast<M>(y[k]) / static_cast<M>(xi[k]));
          }
        }
        break;
      }
      case EltwiseParameter::MAX:
        for (int64_t k = 0; k < n; ++k) {
          dx[k] = static_cast<Btype>(argmax_[k] == static_cast<int>(i) ? static_cast<M>(dy[k]) : M(0));
        }
        break;
    }
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void EltwiseLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (fused_away()) return;
  const int64_t n = static_cast<int64_t>(top[0]->count());
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  std::vector<const Ftype*> x(bottom.size());
  for (size_t i = 0; i < bottom.size(); ++i) x[i] = bottom[i]->gpu_data<Ftype>();
  if (relu_) {
    gpu::eltwise_sum_relu_forward(n, x.data(), static_cast<int>(x.size()), coeff_.data(), y, this->context().stream());
    return;
  }
  int* argmax = nullptr;
  if (op_ == EltwiseParameter::MAX) {
    const size_t bytes = static_cast<size_t>(n) * sizeof(int);
    if (!argmax_gpu_ || argmax_gpu_->size() != bytes) argmax_gpu_ = std::make_unique<SyncedMemory>(bytes);
    argmax = static_cast<int*>(argmax_gpu_->mutable_gpu_data());
  }
  gpu::eltwise_forward(n, static_cast<int>(op_), x.data(), static_cast<int>(x.size()), coeff_.data(), y, argmax,
                       this->context().stream());
}

template <typename Ftype, typename Btype>
void EltwiseLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                              const BlobVec& bottom) {
  if (fused_away()) return;
  const int64_t n = static_cast<int64_t>(top[0]->count());
  const Btype* dy = top[0]->gpu_diff<Btype>();
  if (relu_) {
    const Ftype* y = top[0]->gpu_data<Ftype>();
    std::vector<Btype*> dx(bottom.size(), nullptr);
    for (size_t i = 0; i < bottom.size(); ++i)
      if (propagate_down[i]) dx[i] = bottom[i]->mutable_gpu_diff<Btype>();
    gpu::eltwise_sum_relu_backward(n, static_cast<int>(bottom.size()), coeff_.data(), y, dy, dx.data(),
                                   this->context().stream());
    return;
  }
  std::vector<const Btype*> x;
  const Btype* y = nullptr;
  if (op_ == EltwiseParameter::PROD) {
    for (Blob* b : bottom) x.push_back(b->gpu_data<Btype>());
    if (!stable_prod_grad_) y = top[0]->gpu_data<Btype>();
  }
  const int* argmax = nullptr;
  if (op_ == EltwiseParameter::MAX) {
    CORTADO_CHECK(argmax_gpu_ != nullptr) << "Eltwise MAX backward before forward";
    argmax = static_cast<const int*>(argmax_gpu_->gpu_data());
  }
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    gpu::eltwise_backward(n, static_cast<int>(op_), static_cast<int>(i), x.data(), static_cast<int>(x.size()),
                          coeff_[i], stable_prod_grad_, y, dy, argmax, bottom[i]->mutable_gpu_diff<Btype>(),
                          this->context().stream());
  }
}
#endif

CORTADO_INSTANTIATE_LAYER(EltwiseLayer);

}  // namespace cortado
