#include "cortado/layers/batch_reindex_layer.hpp"

#include <algorithm>
#include <cmath>

#include "cortado/util/math.hpp"

namespace cortado {

// ---- RowGather ----------------------------------------------------------------

void RowGather::Build(int num, const std::vector<int>& index) {
  rows_ = static_cast<int>(index.size());
  num_ = num;
  const size_t bytes = (2 * index.size() + static_cast<size_t>(num) + 1) * sizeof(int);
  if (!mem_ || mem_->size() < bytes) mem_ = std::make_unique<SyncedMemory>(bytes, /*pinned_host=*/true);
  int* idx = static_cast<int*>(mem_->mutable_cpu_data());
  int* begin = idx + rows_;
  int* source = begin + num_ + 1;
  std::copy(index.begin(), index.end(), idx);
  // A counting sort by row keeps each row's list in ascending i: the order
  // both backward paths sum in.
  std::fill(begin, begin + num_ + 1, 0);
  for (int j : index) ++begin[j + 1];
  for (int j = 0; j < num_; ++j) begin[j + 1] += begin[j];
  std::vector<int> next(begin, begin + num_);
  for (int i = 0; i < rows_; ++i) source[next[index[i]]++] = i;
}

template <typename T>
void RowGather::Forward_cpu(int64_t inner, const T* x, T* y) const {
  if (rows_ == 0) return;
  const int* idx = host();
  for (int i = 0; i < rows_; ++i) {
    const T* src = x + idx[i] * inner;
    std::copy(src, src + inner, y + i * inner);
  }
}

template <typename T>
void RowGather::Backward_cpu(int64_t inner, const T* dy, T* dx) const {
  using M = math_t<T>;
  const int* begin = host() + rows_;
  const int* source = begin + num_ + 1;
  std::vector<M> acc(static_cast<size_t>(inner));
  for (int j = 0; j < num_; ++j) {
    std::fill(acc.begin(), acc.end(), M(0));
    for (int e = begin[j]; e < begin[j + 1]; ++e) {
      const T* row = dy + source[e] * inner;
      for (int64_t k = 0; k < inner; ++k) acc[k] += static_cast<M>(row[k]);
    }
    T* out = dx + j * inner;
    for (int64_t k = 0; k < inner; ++k) out[k] = static_cast<T>(acc[k]);
  }
}

#ifdef CORTADO_USE_CUDA
template <typename T>
void RowGather::Forward_gpu(int64_t inner, const T* x, T* y, CUstream_st* stream) {
  CORTADO_CHECK(mem_ != nullptr) << "RowGather used before Build";
  const int* idx = static_cast<const int*>(mem_->gpu_data());
  gpu::gather_rows(static_cast<int64_t>(rows_) * inner, inner, idx, x, y, stream);
}

template <typename T>
void RowGather::Backward_gpu(int64_t inner, const T* dy, T* dx, CUstream_st* stream) {
  CORTADO_CHECK(mem_ != nullptr) << "RowGather used before Build";
  const int* begin = static_cast<const int*>(mem_->gpu_data()) + rows_;
  gpu::gather_rows_backward(static_cast<int64_t>(num_) * inner, inner, begin, begin + num_ + 1, dy, dx, stream);
}
#define CORTADO_INSTANTIATE_ROW_GATHER_GPU(T)                                              \
  template void RowGather::Forward_gpu<T>(int64_t, const T*, T*, CUstream_st*);          \
  template void RowGather::Backward_gpu<T>(int64_t, const T*, T*, CUstream_st*);
#else
#define CORTADO_INSTANTIATE_ROW_GATHER_GPU(T)
#endif

#define CORTADO_INSTANTIATE_ROW_GATHER(T)                                   \
  template void RowGather::Forward_cpu<T>(int64_t, const T*, T*) const;   \
  template void RowGather::Backward_cpu<T>(int64_t, const T*, T*) const;  \
  CORTADO_INSTANTIATE_ROW_GATHER_GPU(T)
CORTADO_INSTANTIATE_ROW_GATHER(double)
CORTADO_INSTANTIATE_ROW_GATHER(float)
CORTADO_INSTANTIATE_ROW_GATHER(float16)
CORTADO_INSTANTIATE_ROW_GATHER(bfloat16)

// ---- BatchReindexLayer ----------------------------------------------------------

template <typename Ftype, typename Btype>
void BatchReindexLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->num_axes() < 1) this->field_error("bottom", "data (bottom[0]) needs at least one axis, got a scalar");
  if (bottom[1]->num_axes() != 1) {
    this->field_error("bottom", "permut (bottom[1]) must have one axis (M), got shape ", bottom[1]->shape_string());
  }
  if (top[0] == bottom[0]) this->field_error("top", "BatchReindex cannot be computed in place");
  std::vector<int> shape = bottom[0]->shape();
  shape[0] = bottom[1]->shape(0);
  top[0]->Reshape(shape);
  inner_ = static_cast<int64_t>(bottom[0]->count(1));
}

template <typename Ftype, typename Btype>
void BatchReindexLayer<Ftype, Btype>::ReadIndex(const BlobVec& bottom) {
  const int num = bottom[0]->shape(0);
  const int m = bottom[1]->shape(0);
  const float* p = bottom[1]->cpu_data<float>();
  std::vector<int> index(static_cast<size_t>(m));
  for (int i = 0; i < m; ++i) {
    const float v = p[i];
    if (!(v >= 0.f && v < static_cast<float>(num)) || v != std::floor(v)) {
      this->field_error("bottom[1]", "permut value ", v, " at position ", i,
                        " is not a row index of data: expected an integer in [0, ", num, ")");
    }
    index[i] = static_cast<int>(v);
  }
  gather_.Build(num, index);
}

template <typename Ftype, typename Btype>
bool BatchReindexLayer<Ftype, Btype>::CheckPropagate(const std::vector<bool>& propagate_down) const {
  if (propagate_down.size() > 1 && propagate_down[1]) {
    this->field_error("bottom[1]", "BatchReindex cannot back-propagate to permut (its indexes)");
  }
  return !propagate_down.empty() && propagate_down[0];
}

template <typename Ftype, typename Btype>
void BatchReindexLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  ReadIndex(bottom);
  gather_.Forward_cpu(inner_, bottom[0]->cpu_data<Ftype>(), top[0]->mutable_cpu_data<Ftype>());
}

template <typename Ftype, typename Btype>
void BatchReindexLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                   const BlobVec& bottom) {
  if (!CheckPropagate(propagate_down)) return;
  gather_.Backward_cpu(inner_, top[0]->cpu_diff<Btype>(), bottom[0]->mutable_cpu_diff<Btype>());
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void BatchReindexLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  ReadIndex(bottom);
  gather_.Forward_gpu(inner_, bottom[0]->gpu_data<Ftype>(), top[0]->mutable_gpu_data<Ftype>(),
                      this->context().stream());
}

template <typename Ftype, typename Btype>
void BatchReindexLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                   const BlobVec& bottom) {
  if (!CheckPropagate(propagate_down)) return;
  gather_.Backward_gpu(inner_, top[0]->gpu_diff<Btype>(), bottom[0]->mutable_gpu_diff<Btype>(),
                       this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(BatchReindexLayer);

}  // namespace cortado
