#include "cortado/layers/filter_layer.hpp"

#include <numeric>

namespace cortado {

template <typename Ftype, typename Btype>
void FilterLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  if (top.size() + 1 != bottom.size()) {
    this->field_error("top", "Filter needs one top per data bottom: ", bottom.size() - 1,
                      " data bottom(s) and the selector, got ", top.size(), " top(s)");
  }
  setup_reshape_ = true;
}

template <typename Ftype, typename Btype>
void FilterLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const size_t k = bottom.size() - 1;
  const Blob& sel = *bottom[k];
  bool singleton = sel.num_axes() >= 1;
  for (int a = 1; a < sel.num_axes(); ++a) singleton = singleton && sel.shape(a) == 1;
  if (!singleton) {
    this->field_error("bottom", "the selector (bottom[", k, "]) must have shape (N) or (N, 1), got ",
                      sel.shape_string());
  }
  const int num = sel.shape(0);
  for (size_t t = 0; t < k; ++t) {
    if (bottom[t]->num_axes() < 1 || bottom[t]->shape(0) != num) {
      this->field_error("bottom", "bottom[", t, "] has shape ", bottom[t]->shape_string(),
                        "; every data bottom needs the selector's ", num, " items along axis 0");
    }
    if (top[t] == bottom[t]) this->field_error("top", "Filter cannot be computed in place");
  }
  std::vector<int> selected;
  if (setup_reshape_) {
    setup_reshape_ = false;
    selected.resize(static_cast<size_t>(num));
    std::iota(selected.begin(), selected.end(), 0);
  } else {
    const float* s = sel.cpu_data<float>();
    for (int i = 0; i < num; ++i) {
      if (s[i] != 0.f) selected.push_back(i);
    }
  }
  gather_.Build(num, selected);
  for (size_t t = 0; t < k; ++t) {
    std::vector<int> shape = bottom[t]->shape();
    shape[0] = static_cast<int>(selected.size());
    top[t]->Reshape(shape);
  }
}

template <typename Ftype, typename Btype>
void FilterLayer<Ftype, Btype>::CheckPropagate(const std::vector<bool>& propagate_down, size_t num_bottoms) const {
  if (propagate_down.size() == num_bottoms && propagate_down.back()) {
    this->field_error(str_cat("bottom[", num_bottoms - 1, "]"), "Filter cannot back-propagate to its selector");
  }
}

template <typename Ftype, typename Btype>
void FilterLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  for (size_t t = 0; t < top.size(); ++t) {
    gather_.Forward_cpu(static_cast<int64_t>(bottom[t]->count(1)), bottom[t]->cpu_data<Ftype>(),
                        top[t]->mutable_cpu_data<Ftype>());
  }
}

template <typename Ftype, typename Btype>
void FilterLayer<Ftype, Btype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  CheckPropagate(propagate_down, bottom.size());
  for (size_t t = 0; t < top.size() && t < propagate_down.size(); ++t) {
    if (!propagate_down[t]) continue;
    gather_.Backward_cpu(static_cast<int64_t>(bottom[t]->count(1)), top[t]->cpu_diff<Btype>(),
                         bottom[t]->mutable_cpu_diff<Btype>());
  }
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void FilterLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  for (size_t t = 0; t < top.size(); ++t) {
    gather_.Forward_gpu(static_cast<int64_t>(bottom[t]->count(1)), bottom[t]->gpu_data<Ftype>(),
                        top[t]->mutable_gpu_data<Ftype>(), this->context().stream());
  }
}

template <typename Ftype, typename Btype>
void FilterLayer<Ftype, Btype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  CheckPropagate(propagate_down, bottom.size());
  for (size_t t = 0; t < top.size() && t < propagate_down.size(); ++t) {
    if (!propagate_down[t]) continue;
    gather_.Backward_gpu(static_cast<int64_t>(bottom[t]->count(1)), top[t]->gpu_diff<Btype>(),
                         bottom[t]->mutable_gpu_diff<Btype>(), this->context().stream());
  }
}
#endif

CORTADO_INSTANTIATE_LAYER(FilterLayer);

}  // namespace cortado
