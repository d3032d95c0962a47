// InfogainLoss kernels (the softmax itself is gpu::softmax_forward).
//
// infogain_matrix: one thread per row of H (K x K, small): converts the row
// to math_t and sums it in column order, exactly as the CPU path does.
//
// infogain_forward: one thread per (outer, inner) position in a grid-stride
// loop over cuda::blocks_for(outer * inner) blocks. The thread checks its
// label (read as float) and adds -H[l, c] log(max(p_c, FLT_MIN)) over the K
// classes in math_t (float for float16; one rounding per operation, as on the
// CPU); positions and the valid count (double) are summed per block
// (loss_sum.cuh) and loss_finish divides by the normalizer. A label that is
// not a class index and not ignore_label counts as ignored and is recorded
// with atomicMin in a pinned host word.
//
// infogain_backward: one thread per element of (outer, K, inner); the
// gradient p * rowsum - H is computed in math_t and multiplied by the scale
// formed in double from the loss weight and the normalizer on the device,
// as the CPU path rounds it.
#include <cfloat>

#include "cortado/layers/infogain_loss_layer.hpp"
#include "cortado/storage_types.hpp"
#include "device_values.cuh"
#include "loss_sum.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename S, typename M>
__global__ void infogain_matrix_kernel(int k, const S* src, M* h, M* row_sum) {
  CORTADO_KERNEL_LOOP(r, k) {
    M sum = 0;
    for (int c = 0; c < k; ++c) {
      const M v = static_cast<M>(src[r * k + c]);
      h[r * k + c] = v;
      sum = add_rn(sum, v);
    }
    row_sum[r] = sum;
  }
}

template <typename M>
__global__ void infogain_forward_kernel(int64_t positions, int channels, int inner, const M* prob,
                                        const float* label, bool has_ignore_label, int ignore_label, const M* h,
                                        M* partial, double* valid_partial, unsigned long long* error) {
  const M floor = static_cast<M>(FLT_MIN);
  M sum = 0;
  double valid = 0;
  CORTADO_KERNEL_LOOP(p, positions) {
    const float v = label[p];
    const int l = class_of(v, channels, has_ignore_label, ignore_label);
    if (l < 0) {
      if (l == -2) atomicMin(error, bad_label_key(p, v));
      continue;
    }
    const M* column = prob + (p / inner) * int64_t(channels) * inner + p % inner;
    const M* row = h + int64_t(l) * channels;
    for (int c = 0; c < channels; ++c) {
      const M q = column[int64_t(c) * inner];
      sum = add_rn(sum, -mul_rn(row[c], log_of(q < floor ? floor : q)));  // the CPU's loss -= H log(max(q, floor))
    }
    valid += 1;
  }
  write_block_sums(sum, valid, partial, valid_partial);
}

template <typename M, typename B>
__global__ void infogain_backward_kernel(int64_t count, int channels, int inner, const M* prob, const float* label,
                                         bool has_ignore_label, int ignore_label, const M* h, const M* row_sum,
                                         const double* weight, const double* normalizer, B* dx) {
  using MB = dmath_t<B>;
  const MB scale = static_cast<MB>(weight[0] / normalizer[0]);
  const int64_t dim = int64_t(channels) * inner;
  CORTADO_KERNEL_LOOP(k, count) {
    const int64_t o = k / dim, c = (k % dim) / inner, i = k % inner;
    const int l = class_of(label[o * inner + i], channels, has_ignore_label, ignore_label);
    MB g = 0;
    if (l >= 0) {
      const M r = add_rn(mul_rn(prob[k], row_sum[l]), -h[int64_t(l) * channels + c]);
      g = mul_rn(static_cast<MB>(r), scale);
    }
    store(dx, k, g);
  }
}

}  // namespace

namespace gpu {

template <typename S, typename M>
void infogain_matrix(int k, const S* src, M* h, M* row_sum, CUstream_st* stream) {
  if (k == 0) return;
  infogain_matrix_kernel<<<cuda::blocks_for(k), cuda::kThreads, 0, stream>>>(k, src, h, row_sum);
  CORTADO_KERNEL_CHECK();
}

template <typename M>
void infogain_loss_forward(int outer, int channels, int inner, const M* prob, const float* label,
                           bool has_ignore_label, int ignore_label, const M* h, double fixed_normalizer, M* partial,
                           double* valid, float* top, double* normalizer_out, unsigned long long* error,
                           CUstream_st* stream) {
  // Launched even when there are no positions: the top and the normalizer must still be written.
  const int64_t positions = int64_t(outer) * inner;
  const int blocks = cuda::blocks_for(positions);
  infogain_forward_kernel<<<blocks, cuda::kThreads, 0, stream>>>(positions, channels, inner, prob, label,
                                                                 has_ignore_label, ignore_label, h, partial, valid,
                                                                 error);
  CORTADO_KERNEL_CHECK();
  loss_finish<M>(blocks, partial, valid, fixed_normalizer, top, normalizer_out, stream);
}

template <typename M, typename B>
void infogain_loss_backward(int outer, int channels, int inner, const M* prob, const float* label,
                            bool has_ignore_label, int ignore_label, const M* h, const M* row_sum,
                            const double* weight, const double* normalizer, B* dx, CUstream_st* stream) {
  const int64_t count = int64_t(outer) * channels * inner;
  if (count == 0) return;
  infogain_backward_kernel<<<cuda::blocks_for(count), cuda::kThreads, 0, stream>>>(
      count, channels, inner, prob, label, has_ignore_label, ignore_label, h, row_sum, weight, normalizer, dev(dx));
  CORTADO_KERNEL_CHECK();
}

template void infogain_matrix<float, float>(int, const float*, float*, float*, CUstream_st*);
template void infogain_matrix<float, double>(int, const float*, double*, double*, CUstream_st*);
template void infogain_matrix<double, double>(int, const double*, double*, double*, CUstream_st*);
template void infogain_loss_forward<double>(int, int, int, const double*, const float*, bool, int, const double*,
                                            double, double*, double*, float*, double*, unsigned long long*,
                                            CUstream_st*);
template void infogain_loss_forward<float>(int, int, int, const float*, const float*, bool, int, const float*, double,
                                           float*, double*, float*, double*, unsigned long long*, CUstream_st*);
#define CORTADO_INSTANTIATE_INFOGAIN_BACKWARD(M, B)                                                           \
  template void infogain_loss_backward<M, B>(int, int, int, const M*, const float*, bool, int, const M*,     \
                                             const M*, const double*, const double*, B*, CUstream_st*);
#define CORTADO_INSTANTIATE_INFOGAIN_BACKWARD_T(T) CORTADO_INSTANTIATE_INFOGAIN_BACKWARD(math_t<T>, T)
CORTADO_FOR_EACH_STORAGE_TYPE(CORTADO_INSTANTIATE_INFOGAIN_BACKWARD_T)

}  // namespace gpu
}  // namespace cortado
