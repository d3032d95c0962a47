#include "cortado/layers/layout_stand_in.hpp"

#include "cortado/layers/permute_layer.hpp"

namespace cortado {

const std::vector<Blob*>& NchwStandIns::Reshape(const std::vector<Blob*>& blobs) {
  own_.resize(blobs.size());
  view_.resize(blobs.size());
  for (size_t i = 0; i < blobs.size(); ++i) {
    if (!blobs[i]->channels_last()) {
      own_[i].reset();
      view_[i] = blobs[i];
      continue;
    }
    if (!own_[i]) own_[i] = std::make_unique<Blob>(blobs[i]->data_type());
    own_[i]->Reshape(blobs[i]->shape());  // NCHW
    view_[i] = own_[i].get();
  }
  return view_;
}

bool NchwStandIns::any() const {
  for (const auto& b : own_)
    if (b) return true;
  return false;
}

void NchwStandIns::Copy(const Blob& from, Blob* to, Part part, Type t, bool gpu, CUstream_st* stream) {
  const Tensor& src = part == kData ? from.data() : from.diff();
  Tensor& dst = part == kData ? to->data() : to->diff();
  const void* x = gpu ? src.gpu_data_raw(t) : src.data_raw(t);
  void* y = gpu ? dst.mutable_gpu_data_raw(t) : dst.mutable_data_raw(t);
  CopyLayout(from.shape(), from.layout(), to->layout(), t, x, y, gpu, stream);
}

void NchwStandIns::In(const std::vector<Blob*>& blobs, Part part, Type t, bool gpu, CUstream_st* stream,
                      const std::vector<bool>* which) {
  for (size_t i = 0; i < own_.size() && i < blobs.size(); ++i) {
    if (which && (i >= which->size() || !(*which)[i])) continue;
    if (own_[i]) Copy(*blobs[i], own_[i].get(), part, t, gpu, stream);
  }
}

bool NchwPasses::Use(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  bool channels_last = false;
  for (const std::vector<Blob*>* v : {&bottom, &top})
    for (const Blob* b : *v) channels_last = channels_last || b->channels_last();
  if (!channels_last) return false;
  bottoms_.Reshape(bottom);
  tops_.Reshape(top);
  return true;
}

void NchwStandIns::Out(const std::vector<Blob*>& blobs, Part part, Type t, bool gpu, CUstream_st* stream,
                       const std::vector<bool>* which) {
  for (size_t i = 0; i < own_.size() && i < blobs.size(); ++i) {
    if (which && (i >= which->size() || !(*which)[i])) continue;
    if (own_[i]) Copy(*own_[i], blobs[i], part, t, gpu, stream);
  }
}

}  // namespace cortado
