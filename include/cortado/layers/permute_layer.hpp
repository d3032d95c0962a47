#pragma once
// Permute: reorders the axes of the bottom, as the SSD fork of Caffe's
// PermuteLayer.
//
//   top axis i = bottom axis order[i]; axes that `order` does not list follow
//   in their own order. top[j0, j1, ...] = bottom at the index whose axis
//   order[i] is j_i. Backward applies the inverse permutation to the diff.
//
// Uses: time-major sequences for RNN/LSTM from batch-major data
// (order: 1 order: 0), NCHW to NHWC (order: 0 order: 2 order: 3 order: 1).
// Bottoms: 1. Tops: 1. Fields: permute_param.order (each axis at most once,
// each < num_axes; at most 8 axes). In place: no. An identity order copies.
// Types: a copy in Ftype forward and Btype backward: exact.
// GPU (permute_layer.cu): one thread per element, the strides passed by value.

#include "cortado/layer.hpp"

namespace cortado {

/// A gather over n elements: y[k] = x[sum_i j_i * in_stride[i]] where
/// (j_0, ...) is k split by the row-major out_stride of y. The backward's
/// scatter is the gather of the inverse permutation.
struct PermuteStrides {
  int axes = 0;
  int64_t out_stride[8] = {};
  int64_t in_stride[8] = {};
};

template <typename Ftype, typename Btype>
class PermuteLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Permute", BlobRules().Bottoms(1).Tops(1))
  static constexpr int kMaxAxes = 8;

  CORTADO_LAYER_SETUP

 protected:
  CORTADO_LAYER_PASSES

 private:
  std::vector<int> order_;
  PermuteStrides forward_, backward_;
};

/// The gather that moves the values of a blob of `shape` from layout `from`
/// to layout `to` (blob.hpp: NHWC keeps axis 1 last); the identity when
/// both are the same.
PermuteStrides LayoutStrides(const std::vector<int>& shape, Layout from, Layout to);

/// y = x in another order in memory (CPU; a gather, each value copied
/// bit for bit), for any element type: by size.
void GatherValues(int64_t n, const PermuteStrides& s, Type t, const void* x, void* y);

// LayoutConvert: top = bottom with the same shape and values, stored in the
// top's layout (the Net's layout plan, net_layout.hpp, inserts these where
// an NCHW-only layer meets channels-last blobs and sets the layouts). Either
// direction, read from the blobs' layouts at Reshape; equal layouts copy.
// Bottoms: 1. Tops: 1. No fields. In place: no. Exact (a copy in Ftype forward
// and Btype backward).
// GPU: a batched tiled transpose (N matrices of C x S, or S x C), the
// strided gather where the sizes do not fit its grid.
template <typename Ftype, typename Btype>
class LayoutConvertLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "LayoutConvert", BlobRules().Bottoms(1).Tops(1))

  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  CORTADO_LAYER_PASSES
};

/// Copies the `count` values of a blob of `shape` from layout `from` (at x)
/// to layout `to` (at y), as type t (a bit copy by its size), on the host or
/// on the device on `stream` (a batched transpose there, or the gather).
void CopyLayout(const std::vector<int>& shape, Layout from, Layout to, Type t, const void* x, void* y, bool gpu,
                CUstream_st* stream);

/// Channel padding for channels-last operands (cuDNN's NHWC Tensor Core
/// convolutions want channel counts in multiples of 4 or 8; an RGB batch has
/// 3). PadChannels moves `outer` blocks of (c, inner) values, channels first,
/// to (inner, cp) channels last, cp >= c, with zeros in channels c to cp - 1:
/// with inner 1 it widens the rows of an NHWC batch, with inner R*S it makes
/// Caffe's KCRS filter cuDNN's KRSC one with padded channels. UnpadChannels
/// is its inverse (the pad channels dropped). Bit copies of `bytes`-byte
/// values (2, 4 or 8; all-zero bits are 0 in every type), on the host or on
/// the device on `stream`.
void PadChannels(int64_t outer, int c, int64_t inner, int cp, size_t bytes, const void* x, void* y, bool gpu,
                 CUstream_st* stream);
void UnpadChannels(int64_t outer, int c, int64_t inner, int cp, size_t bytes, const void* x, void* y, bool gpu,
                   CUstream_st* stream);

#ifdef CORTADO_USE_CUDA
namespace gpu {
template <typename T>
void permute_gather(int64_t n, const PermuteStrides& s, const T* x, T* y, CUstream_st* stream);
/// y = x transposed for each of `batch` (rows, cols) matrices of `bytes`-byte
/// elements (a bit copy through shared-memory tiles). False, doing nothing,
/// where the sizes exceed the grid (batch above 65535, a matrix of 2^31
/// values or more) or the element size is not 2, 4 or 8.
bool transpose_batched(int64_t batch, int64_t rows, int64_t cols, size_t bytes, const void* x, void* y,
                       CUstream_st* stream);
/// The device side of PadChannels (pad true) and UnpadChannels (pad false).
void pad_channels(bool pad, int64_t outer, int c, int64_t inner, int cp, size_t bytes, const void* x, void* y,
                  CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
