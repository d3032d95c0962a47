#include "cortado/layers/split_layer.hpp"

#include <algorithm>
#include <vector>

#include "cortado/util/gpu_math.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void SplitLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  for (size_t k = 0; k < top.size(); ++k) {
    if (top[k] == bottom[0]) this->field_error("top", "Split cannot be computed in place (top ", k, ")");
    top[k]->ReshapeLike(*bottom[0]);
    top[k]->ShareData(*bottom[0]);
  }
}

template <typename Ftype, typename Btype>
void SplitLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  // The tops share the bottom's data (Reshape): nothing to copy.
  for (Blob* t : top) CORTADO_CHECK(&t->data() == &bottom[0]->data()) << "split top does not share its bottom";
}

template <typename Ftype, typename Btype>
void SplitLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using M = math_t<Btype>;
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  if (top.size() == 1) {
    const Btype* dy = top[0]->cpu_diff<Btype>();
    std::copy(dy, dy + n, dx);
    return;
  }
  std::vector<M> acc(n, M(0));
  for (Blob* t : top) {
    const Btype* dy = t->cpu_diff<Btype>();
    for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<M>(dy[i]);
  }
  for (int64_t i = 0; i < n; ++i) dx[i] = static_cast<Btype>(acc[i]);
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void SplitLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  Forward_cpu(bottom, top);  // checks the sharing; touches no data
}

template <typename Ftype, typename Btype>
void SplitLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int64_t n = static_cast<int64_t>(bottom[0]->count());
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  if (top.size() == 1) {
    gpu_copy(n, top[0]->gpu_diff<Btype>(), dx, this->context().stream());
    return;
  }
  std::vector<const Btype*> dy(top.size());
  for (size_t k = 0; k < top.size(); ++k) dy[k] = top[k]->gpu_diff<Btype>();
  gpu::split_backward(n, dy.data(), static_cast<int>(dy.size()), dx, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(SplitLayer);

}  // namespace cortado
