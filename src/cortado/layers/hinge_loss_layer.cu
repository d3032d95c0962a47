// HingeLoss kernels.
//
// hinge_forward: one thread per score (n, d) in a grid-stride loop (64-bit
// indexes) over cuda::blocks_for(N * D) blocks. The thread reads its sample's
// label (float), writes the margin m = max(0, 1 -+ x) in math_t (float for
// float16) for the backward and accumulates m or m^2 in math_t; block sums go
// to the partial buffer (loss_sum.cuh) and loss_finish divides by N. A label
// that is not a class index zeroes its sample's margins and is recorded, once
// per sample (by the thread of d = 0), with atomicMin in a pinned host word.
//
// hinge_backward: one thread per score; the scale w / N is formed in double
// from the loss weight on the device and rounded to math_t of the diff type,
// as the CPU path does.
#include "cortado/layers/hinge_loss_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"
#include "loss_sum.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void hinge_forward_kernel(int64_t count, int dim, const T* x, const float* label, bool l2,
                                     dmath_t<T>* margin, dmath_t<T>* partial, unsigned long long* error) {
  using M = dmath_t<T>;
  M sum = 0;
  CORTADO_KERNEL_LOOP(k, count) {
    const int64_t n = k / dim;
    const int d = static_cast<int>(k % dim);
    const float v = label[n];
    const int l = class_of(v, dim);
    if (l < 0) {
      if (d == 0) atomicMin(error, bad_label_key(n, v));
      margin[k] = 0;
      continue;
    }
    const M xv = load(x, k);
    const M r = d == l ? M(1) - xv : M(1) + xv;  // 1 - s x with s = +-1: the product is exact
    const M m = M(0) < r ? r : M(0);             // std::max(M(0), r)
    margin[k] = m;
    sum = add_rn(sum, l2 ? mul_rn(m, m) : m);
  }
  write_block_sums(sum, partial);
}

template <typename M, typename B>
__global__ void hinge_backward_kernel(int64_t count, int dim, int num, const M* margin, const float* label, bool l2,
                                      const double* weight, B* dx) {
  using MB = dmath_t<B>;
  const MB scale = static_cast<MB>(weight[0] / num);
  CORTADO_KERNEL_LOOP(k, count) {
    const int d = static_cast<int>(k % dim);
    const int l = class_of(label[k / dim], dim);
    if (l < 0) {
      store(dx, k, MB(0));
      continue;
    }
    const MB m = static_cast<MB>(margin[k]);
    const MB g = l2 ? mul_rn(MB(2), m) : (m > MB(0) ? MB(1) : MB(0));
    store(dx, k, mul_rn(d == l ? -scale : scale, g));
  }
}

}  // namespace

namespace gpu {

template <typename T>
void hinge_loss_forward(int num, int dim, const T* x, const float* label, bool l2, math_t<T>* margin,
                        math_t<T>* partial, float* top, unsigned long long* error, CUstream_st* stream) {
  // Launched even when there is nothing to sum: the top must still be written.
  const int64_t count = int64_t(num) * dim;
  const int blocks = cuda::blocks_for(count);
  hinge_forward_kernel<<<blocks, cuda::kThreads, 0, stream>>>(count, dim, dev(x), label, l2, margin, partial, error);
  CORTADO_KERNEL_CHECK();
  loss_finish<math_t<T>>(blocks, partial, nullptr, num > 1 ? num : 1, top, nullptr, stream);
}

template <typename M, typename B>
void hinge_loss_backward(int num, int dim, const M* margin, const float* label, bool l2, const double* weight,
                         B* dx, CUstream_st* stream) {
  const int64_t count = int64_t(num) * dim;
  if (count == 0) return;
  hinge_backward_kernel<<<cuda::blocks_for(count), cuda::kThreads, 0, stream>>>(count, dim, num, margin, label, l2,
                                                                               weight, dev(dx));
  CORTADO_KERNEL_CHECK();
}

#define CORTADO_INSTANTIATE_HINGE_FORWARD(T)                                                                    \
  template void hinge_loss_forward<T>(int, int, const T*, const float*, bool, math_t<T>*, math_t<T>*, float*, \
                                      unsigned long long*, CUstream_st*);
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_HINGE_FORWARD)
#define CORTADO_INSTANTIATE_HINGE_BACKWARD(M, B)                                                               \
  template void hinge_loss_backward<M, B>(int, int, const M*, const float*, bool, const double*, B*, \
                                          CUstream_st*);
#define CORTADO_INSTANTIATE_HINGE_BACKWARD_T(T) CORTADO_INSTANTIATE_HINGE_BACKWARD(math_t<T>, T)
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_HINGE_BACKWARD_T)

}  // namespace gpu
}  // namespace cortado
