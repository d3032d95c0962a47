#pragma once
// How the loss layers' kernels sum a loss on the device (.cu files only).
//
// Two stages, nothing atomic, so the loss is the same run after run:
// - Stage 1 is a layer's own kernel, launched with cuda::blocks_for(n) blocks
//   of cuda::kThreads threads over its n items (elements, samples or
//   positions). Each thread accumulates its grid-stride share in the
//   accumulation type A (math_t of the forward type: float, or double for the
//   (double, double) pair), block_sum() adds the block's threads in a
//   shared-memory tree, and thread 0 writes the block's partial sum. Layers
//   that normalize by the count of non-ignored items sum that count the same
//   way, in double (exact); write_block_sums() ends such a kernel.
// - Stage 2, loss_finish(), is one block: it sums the partials in a fixed
//   order, picks the normalizer and writes loss / normalizer to the float top,
//   and the normalizer (double) to device memory for the backward.
// The grid depends only on n, so the caller sizes the partial buffers with
// cuda::blocks_for(n) too.

#include "device_values.cuh"

namespace cortado {
namespace kernels {

/// The sum of v over the threads of the calling block, which must have
/// cuda::kThreads threads that all call it; every thread gets the sum.
template <typename A>
__device__ A block_sum(A v) {
  __shared__ A part[cuda::kThreads];
  __syncthreads();  // an earlier call's readers are done with part
  part[threadIdx.x] = v;
  __syncthreads();
  for (int w = cuda::kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  return part[0];
}

/// The end of a stage-1 kernel: thread 0 writes the block's sum of v to
/// partial[blockIdx.x] (and of valid to valid_partial[blockIdx.x]). Every
/// thread of the block must call it.
template <typename A>
__device__ void write_block_sums(A v, A* partial) {
  v = block_sum(v);
  if (threadIdx.x == 0) partial[blockIdx.x] = v;
}
template <typename A>
__device__ void write_block_sums(A v, double valid, A* partial, double* valid_partial) {
  v = block_sum(v);
  valid = block_sum(valid);
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = v;
    valid_partial[blockIdx.x] = valid;
  }
}

template <typename A>
__global__ void loss_finish_kernel(int64_t blocks, const A* partial, const double* valid_partial,
                                   double fixed_normalizer, float* top, double* normalizer_out) {
  A loss = 0;
  double valid = 0;
  for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x) {
    loss += partial[b];
    if (valid_partial) valid += valid_partial[b];
  }
  loss = block_sum(loss);
  valid = block_sum(valid);
  if (threadIdx.x == 0) {
    const double normalizer = fmax(1.0, fixed_normalizer >= 0 ? fixed_normalizer : valid);
    top[0] = static_cast<float>(loss / static_cast<A>(normalizer));
    if (normalizer_out) normalizer_out[0] = normalizer;
  }
}

/// Stage 2 on `stream`: top[0] = float(sum(partial) / A(normalizer)), where
/// normalizer = max(1, fixed_normalizer), or max(1, sum(valid_partial)) when
/// fixed_normalizer < 0; *normalizer_out = normalizer unless it is null.
/// partial and valid_partial (null when unused) hold `blocks` values.
template <typename A>
void loss_finish(int64_t blocks, const A* partial, const double* valid_partial, double fixed_normalizer, float* top,
                 double* normalizer_out, cudaStream_t stream) {
  loss_finish_kernel<A><<<1, cuda::kThreads, 0, stream>>>(blocks, partial, valid_partial, fixed_normalizer, top,
                                                         normalizer_out);
  CORTADO_KERNEL_CHECK();
}

/// The class index label value v names among `classes`: -1 if it is the
/// ignore_label (has_ignore_label), -2 if it is not an integer in
/// [0, classes): the test of Layer::ClassLabel.
__device__ __forceinline__ int class_of(float v, int classes, bool has_ignore_label = false, int ignore_label = 0) {
  if (has_ignore_label && v == static_cast<float>(ignore_label)) return -1;
  if (!(v >= 0.f) || !(v < static_cast<float>(classes))) return -2;
  const int l = static_cast<int>(v);
  return static_cast<float>(l) == v ? l : -2;
}

/// log in the type of its argument (logf for float).
__device__ __forceinline__ float log_of(float v) { return logf(v); }
__device__ __forceinline__ double log_of(double v) { return log(v); }

/// The pinned-word key of a bad label (the first one wins with atomicMin):
/// its position in the high half, the float's bits in the low half.
__device__ __forceinline__ unsigned long long bad_label_key(int64_t position, float v) {
  return (static_cast<unsigned long long>(position) << 32) | __float_as_uint(v);
}

}  // namespace kernels
}  // namespace cortado
