// EuclideanLoss kernels.
//
// euclidean_forward: one thread per element in a grid-stride loop (64-bit
// indexes) over cuda::blocks_for(n) blocks; d = a - b is computed in math_t
// (float for float16) and kept for the backward, d^2 is accumulated in math_t
// per thread, then per block (loss_sum.cuh); loss_finish adds the block sums
// and writes sum / (2 N) to the float top. Products and sums are rounded one
// at a time (no fused multiply-add), as the CPU path rounds them; only the
// order of the sum differs.
//
// euclidean_backward: one thread per element writes both bottom diffs; the
// scale +-w / N is formed in double from the loss weight on the device and
// rounded to math_t of the diff type before the product, as on the CPU.
#include "cortado/layers/euclidean_loss_layer.hpp"
#include "device_values.cuh"
#include "loss_sum.cuh"

namespace cortado {
namespace {

using namespace kernels;

template <typename T>
__global__ void euclidean_forward_kernel(int64_t n, const T* a, const T* b, dmath_t<T>* diff, dmath_t<T>* partial) {
  using M = dmath_t<T>;
  M sum = 0;
  CORTADO_KERNEL_LOOP(i, n) {
    const M d = M(load(a, i)) - M(load(b, i));
    diff[i] = d;
    sum = add_rn(sum, mul_rn(d, d));
  }
  write_block_sums(sum, partial);
}

template <typename M, typename B>
__global__ void euclidean_backward_kernel(int64_t n, const M* diff, const double* weight, int num, B* da, B* db) {
  using MB = dmath_t<B>;
  const double w = weight[0];
  const MB alpha_a = static_cast<MB>(w / num);
  const MB alpha_b = static_cast<MB>(-w / num);
  CORTADO_KERNEL_LOOP(i, n) {
    const MB d = static_cast<MB>(diff[i]);
    if (da) store(da, i, mul_rn(alpha_a, d));
    if (db) store(db, i, mul_rn(alpha_b, d));
  }
}

}  // namespace

namespace gpu {

template <typename T>
void euclidean_loss_forward(int64_t n, const T* a, const T* b, math_t<T>* diff, math_t<T>* partial, double divisor,
                            float* top, CUstream_st* stream) {
  // Launched even for n == 0: the top must still be written (0).
  const int blocks = cuda::blocks_for(n);
  euclidean_forward_kernel<<<blocks, cuda::kThreads, 0, stream>>>(n, dev(a), dev(b), diff, partial);
  CORTADO_KERNEL_CHECK();
  loss_finish<math_t<T>>(blocks, partial, nullptr, divisor, top, nullptr, stream);
}

template <typename M, typename B>
void euclidean_loss_backward(int64_t n, const M* diff, const double* weight, int num, B* da, B* db,
                             CUstream_st* stream) {
  if (n == 0) return;
  euclidean_backward_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, diff, weight, num, dev(da),
                                                                               dev(db));
  CORTADO_KERNEL_CHECK();
}

template void euclidean_loss_forward<double>(int64_t, const double*, const double*, double*, double*, double, float*,
                                             CUstream_st*);
template void euclidean_loss_forward<float>(int64_t, const float*, const float*, float*, float*, double, float*,
                                            CUstream_st*);
template void euclidean_loss_forward<float16>(int64_t, const float16*, const float16*, float*, float*, double, float*,
                                              CUstream_st*);
template void euclidean_loss_forward<bfloat16>(int64_t, const bfloat16*, const bfloat16*, float*, float*, double,
                                               float*, CUstream_st*);
template void euclidean_loss_backward<double, double>(int64_t, const double*, const double*, int, double*, double*,
                                                      CUstream_st*);
template void euclidean_loss_backward<float, float>(int64_t, const float*, const double*, int, float*, float*,
                                                    CUstream_st*);
template void euclidean_loss_backward<float, float16>(int64_t, const float*, const double*, int, float16*, float16*,
                                                      CUstream_st*);
template void euclidean_loss_backward<float, bfloat16>(int64_t, const float*, const double*, int, bfloat16*,
                                                       bfloat16*, CUstream_st*);

}  // namespace gpu
}  // namespace cortado
