#include "cortado/layers/silence_layer.hpp"

#include <algorithm>

#include "cortado/util/gpu_math.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void SilenceLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                              const BlobVec& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    Btype* dx = bottom[i]->mutable_cpu_diff<Btype>();
    std::fill(dx, dx + bottom[i]->count(), static_cast<Btype>(0.f));
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void SilenceLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                              const BlobVec& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    gpu_set(static_cast<int64_t>(bottom[i]->count()), 0.f, bottom[i]->mutable_gpu_diff<Btype>(),
            this->context().stream());
  }
}
#endif

CORTADO_INSTANTIATE_LAYER(SilenceLayer);

}  // namespace cortado
