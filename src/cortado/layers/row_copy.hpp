#pragma once
// Slice and Concat move the same pieces in opposite directions: the whole
// blob is `outer` rows of `row` values and piece i holds the columns
// [offset_i, offset_i + width_i) of every row, packed (width_i: the piece's
// size along the axis times inner; offset_i: the widths before it). One piece
// is one strided copy of `rows` rows of `width` values, from rows
// `src_pitch` apart to rows `dst_pitch` apart: on the host row by row, on the
// device one 2D copy enqueued on `stream`.

#include <algorithm>
#include <cstdint>

#include "cortado/util/cuda.hpp"

namespace cortado {

template <typename T>
void copy_rows_cpu(int64_t rows, int64_t width, const T* src, int64_t src_pitch, T* dst, int64_t dst_pitch) {
  for (int64_t o = 0; o < rows; ++o) std::copy(src + o * src_pitch, src + o * src_pitch + width, dst + o * dst_pitch);
}

#ifdef CORTADO_USE_CUDA
template <typename T>
void copy_rows_gpu(int64_t rows, int64_t width, const T* src, int64_t src_pitch, T* dst, int64_t dst_pitch,
                   cudaStream_t stream) {
  if (width <= 0 || rows <= 0) return;
  CORTADO_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch * sizeof(T), src, src_pitch * sizeof(T), width * sizeof(T),
                                       rows, cudaMemcpyDeviceToDevice, stream));
}
#endif

}  // namespace cortado
