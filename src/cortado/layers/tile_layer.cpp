#include "cortado/layers/tile_layer.hpp"

#include <algorithm>

namespace cortado {

template <typename Ftype, typename Btype>
void TileLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const TileParameter& p = this->layer_param().tile_param();
  const int n = bottom[0]->num_axes();
  if (!p.has_tiles() || p.tiles() <= 0) {
    this->field_error("tile_param.tiles", "must be set and positive, got ", p.has_tiles() ? p.tiles() : 0);
  }
  if (p.axis() < -n || p.axis() >= n) {
    this->field_error("tile_param.axis", "must be in [", -n, ", ", n, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", p.axis());
  }
  axis_ = bottom[0]->CanonicalAxisIndex(p.axis());
  tiles_ = p.tiles();
}

template <typename Ftype, typename Btype>
void TileLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0] == top[0]) this->field_error("top", "Tile cannot be computed in place");
  std::vector<int> shape = bottom[0]->shape();
  shape[axis_] *= tiles_;
  top[0]->Reshape(shape);
  outer_ = static_cast<int64_t>(bottom[0]->count(0, axis_));
  inner_ = static_cast<int64_t>(bottom[0]->count(axis_));
}

template <typename Ftype, typename Btype>
void TileLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->cpu_data<Ftype>();
  Ftype* y = top[0]->mutable_cpu_data<Ftype>();
  for (int64_t o = 0; o < outer_; ++o) {
    for (int t = 0; t < tiles_; ++t) {
      std::copy(x + o * inner_, x + (o + 1) * inner_, y + (o * tiles_ + t) * inner_);
    }
  }
}

template <typename Ftype, typename Btype>
void TileLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  using M = math_t<Btype>;
  const Btype* dy = top[0]->cpu_diff<Btype>();
  Btype* dx = bottom[0]->mutable_cpu_diff<Btype>();
  for (int64_t o = 0; o < outer_; ++o) {
    for (int64_t i = 0; i < inner_; ++i) {
      M sum = 0;
      for (int t = 0; t < tiles_; ++t) sum += static_cast<M>(dy[(o * tiles_ + t) * inner_ + i]);
      dx[o * inner_ + i] = static_cast<Btype>(sum);
    }
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void TileLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Ftype* x = bottom[0]->gpu_data<Ftype>();
  Ftype* y = top[0]->mutable_gpu_data<Ftype>();
  gpu::tile_forward(top[0]->count(), tiles_, inner_, x, y, this->context().stream());
}

template <typename Ftype, typename Btype>
void TileLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Btype* dy = top[0]->gpu_diff<Btype>();
  Btype* dx = bottom[0]->mutable_gpu_diff<Btype>();
  gpu::tile_backward(bottom[0]->count(), tiles_, inner_, dy, dx, this->context().stream());
}
#endif

CORTADO_INSTANTIATE_LAYER(TileLayer);

}  // namespace cortado
