#pragma once
// BatchReindex: picks items (rows along axis 0) of the data bottom by index.
//
//   top[i, ...] = data[permut[i], ...]                      for i in [0, M);
//   ddata[j, ...] = sum over i with permut[i] == j of dtop[i, ...]
//                  (0 for a row no index picks), summed in ascending i.
//   permut gets no gradient: back-propagating to it is an error (as in Caffe).
//
// Bottoms: 2: data (N, ...) and permut (M), a 1-axis blob of row indexes,
// integer values in [0, N) read as float. Tops: 1, (M, ...) with data's other
// axes. No fields. In place: no. Anything in permut that is not an integer in
// [0, N) is a field error on bottom[1] naming its value and position.
//
// Types: forward copies rows in Ftype; backward sums the rows that picked
// each data row in math_t<Btype> (float for float16 and bfloat16) and stores
// once in Btype (overwritten).
//
// Host reads: every Forward reads permut on the host (CPU and GPU paths; on
// a GPU this waits for the stream, as Caffe's BatchReindex does) to check the
// indexes and to build the inverse lists the backward gathers with. The GPU
// path uploads them with one asynchronous copy; its Backward reads nothing
// on the host.
// GPU (batch_reindex_layer.cu): forward one thread per top element; backward
// one thread per data element summing its rows' diffs in the CPU's order
// (deterministic, no atomics).
//
// RowGather is that machinery on its own (Filter uses it too): a gather of
// rows by index and its adjoint.

#include <cstdint>
#include <memory>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/layer.hpp"
#include "cortado/synced_memory.hpp"

struct CUstream_st;

namespace cortado {

/// The gather y[i, :] = x[index[i], :] of M rows out of `num` (each row
/// `inner` values) and its adjoint dx[j, :] = sum_{i : index[i] == j} dy[i, :]
/// in ascending i, summed in math_t<T> and rounded once (0 where no i picks
/// j). Build() lays out the index and its inverse lists (CSR: the i that pick
/// row j are source[begin[j] .. begin[j+1]), ascending) in one host buffer;
/// the _gpu calls upload it on the current stream the first time after a
/// Build (asynchronously, from pinned memory where there is a device).
class RowGather {
 public:
  /// index: M values, each in [0, num) (the caller validated them).
  void Build(int num, const std::vector<int>& index);
  int rows() const { return rows_; }  // M
  int num() const { return num_; }

  template <typename T>
  void Forward_cpu(int64_t inner, const T* x, T* y) const;
  /// dx (num, inner) is overwritten.
  template <typename T>
  void Backward_cpu(int64_t inner, const T* dy, T* dx) const;
#ifdef CORTADO_USE_CUDA
  template <typename T>
  void Forward_gpu(int64_t inner, const T* x, T* y, CUstream_st* stream);
  template <typename T>
  void Backward_gpu(int64_t inner, const T* dy, T* dx, CUstream_st* stream);
#endif

 private:
  const int* host() const { return static_cast<const int*>(mem_->cpu_data()); }
  int rows_ = 0, num_ = 0;
  // [index (rows_) | begin (num_ + 1) | source (rows_)], int.
  std::unique_ptr<SyncedMemory> mem_;
};

template <typename Ftype, typename Btype>
class BatchReindexLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "BatchReindex", BlobRules().Bottoms(2).Tops(1).ForcedBackwardOnlyTo(0))
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  CORTADO_LAYER_PASSES

 private:
  /// Reads and checks permut on the host and rebuilds gather_.
  void ReadIndex(const BlobVec& bottom);
  /// Whether to back-propagate to data; an error if asked for permut.
  bool CheckPropagate(const std::vector<bool>& propagate_down) const;

  int64_t inner_ = 0;
  RowGather gather_;
};

#ifdef CORTADO_USE_CUDA
namespace gpu {
/// y[i, k] = x[index[i], k]; n = rows * inner top elements (device pointers).
template <typename T>
void gather_rows(int64_t n, int64_t inner, const int* index, const T* x, T* y, CUstream_st* stream);
/// dx[j, k] = sum over e in [begin[j], begin[j+1]) of dy[source[e], k], in
/// dmath_t and stored once; n = num * inner data elements.
template <typename T>
void gather_rows_backward(int64_t n, int64_t inner, const int* begin, const int* source, const T* dy, T* dx,
                          CUstream_st* stream);
}  // namespace gpu
#endif

}  // namespace cortado
