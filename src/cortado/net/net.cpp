// The Net's passes, accessors and weights (net.hpp); its build is in
// net_build.cpp.
#include "cortado/net/net.hpp"

#include <new>

#include "cortado/io/hdf5.hpp"
#include "cortado/layer_traits.hpp"
#include "cortado/util/gpu_faults.hpp"
#include "cortado/util/logging.hpp"

namespace cortado {

// ---- errors -------------------------------------------------------------------------

std::string Net::LayerError(int layer_id, const std::string& field, const std::string& msg) const {
  const int src = layer_id < static_cast<int>(source_index_.size()) ? source_index_[layer_id] : -1;
  const LayerParameter& lp = layer_params_[layer_id];
  const int line = info_.field_line(src, field);
  return str_cat(info_.where(line), "layer '", lp.name(), "' (", lp.type(), "): ", field.empty() ? "" : field + ": ",
                 msg);
}

void Net::LayerFail(int layer_id, const std::string& field, const std::string& msg) const {
  throw Error(LayerError(layer_id, field, msg));
}

std::string Net::OutOfMemoryError(int layer_id, const char* doing) const {
  std::string shapes;
  for (size_t t = 0; t < top_vecs_[layer_id].size(); ++t)
    shapes += str_cat(t ? ", " : "", "'", blob_names_[top_id_vecs_[layer_id][t]], "' ",
                      top_vecs_[layer_id][t]->shape_string());
  return LayerError(layer_id, "", str_cat("out of memory while ", doing, shapes.empty() ? "" : " (tops: " + shapes + ")"));
}

void Net::OutOfMemory(int layer_id, const char* doing) const { throw Error(OutOfMemoryError(layer_id, doing)); }

// ---- running ----------------------------------------------------------------------

// A FieldError found while running (a label out of range, a shape that
// changed, a corrupt record) gets the prototxt line like one found in Init.
double Net::Forward() {
  ctx_->Activate();
  double loss = 0;
  size_t i = 0;
  try {
    const bool sync = sync_layers_ && ctx_->on_gpu();
    for (; i < layers_.size(); ++i) {
      loss += layers_[i]->Forward(bottom_vecs_[i], top_vecs_[i]);
      if (sync) CheckLayerRan(static_cast<int>(i), "forward");
    }
  } catch (const FieldError& e) {
    LayerFail(static_cast<int>(i), e.field(), e.message());
  } catch (const std::bad_alloc&) {
    OutOfMemory(static_cast<int>(i), "running forward");
  }
  return loss;
}

void Net::Backward() {
  ctx_->Activate();
  int i = static_cast<int>(layers_.size()) - 1;
  try {
    const bool sync = sync_layers_ && ctx_->on_gpu();
    for (; i >= 0; --i) {
      if (layer_need_backward_[i]) layers_[i]->Backward(top_vecs_[i], bottom_need_backward_[i], bottom_vecs_[i]);
      if (ready_listener_ && !ready_after_layer_[i].empty()) ready_listener_(ready_after_layer_[i]);
      if (backward_hook_) backward_hook_(i);
      if (sync && layer_need_backward_[i]) CheckLayerRan(i, "backward");
    }
  } catch (const FieldError& e) {
    LayerFail(i, e.field(), e.message());
  } catch (const std::bad_alloc&) {
    OutOfMemory(i, "running backward");
  }
}

// sync_layers (gpu_faults.hpp): what layer `layer_id`'s pass queued
// has run, or it names the layer.
void Net::CheckLayerRan(int layer_id, const char* pass) const {
  const std::string error = SynchronizeAndTakeError(*ctx_);
  if (!error.empty())
    LayerFail(layer_id, "", str_cat("CUDA error after its ", pass, " on GPU ", ctx_->device(), " (sync_layers ",
                                    "synchronizes after every layer, so this layer's work raised it): ", error));
}

double Net::ForwardBackward() {
  const double loss = Forward();
  Backward();
  return loss;
}

void Net::Reshape() {
  size_t i = 0;
  try {
    for (; i < layers_.size(); ++i) layers_[i]->Reshape(bottom_vecs_[i], top_vecs_[i]);
  } catch (const FieldError& e) {
    LayerFail(static_cast<int>(i), e.field(), e.message());
  }
}

void Net::ClearParamDiffs() {
  for (Blob* b : learnable_params_) b->diff().set_zero();
}

std::vector<std::pair<Blob*, double>> Net::loss_tops() const {
  std::vector<std::pair<Blob*, double>> tops;
  for (size_t i = 0; i < layers_.size(); ++i)
    for (size_t t = 0; t < top_vecs_[i].size(); ++t)
      if (const double w = layers_[i]->loss(static_cast<int>(t))) tops.emplace_back(top_vecs_[i][t], w);
  return tops;
}

void Net::SetLossScale(float scale) {
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->ScaleLossGradients(top_vecs_[i], scale);
}

void Net::SeekData(int64_t batches) {
  for (auto& l : layers_) l->Seek(batches);
}

std::shared_ptr<Blob> Net::blob_by_name(const std::string& name) const {
  auto it = blob_index_.find(name);
  return it == blob_index_.end() ? nullptr : blobs_[it->second];
}

LayerBase* Net::layer_by_name(const std::string& name) const {
  auto it = layer_index_.find(name);
  return it == layer_index_.end() ? nullptr : layers_[it->second].get();
}

// ---- weights ------------------------------------------------------------------------

void Net::CopyTrainedLayersFrom(const NetParameter& param, const std::string& source) {
  for (const LayerParameter& src : param.layer()) {
    auto it = layer_index_.find(src.name());
    if (it == layer_index_.end()) {
      VLOG(1) << "Ignoring source layer " << src.name();
      continue;
    }
    auto& blobs = layers_[it->second]->blobs();
    if (src.blobs_size() == 0) continue;
    if (static_cast<int>(blobs.size()) != src.blobs_size())
      fail(source, ": layer '", src.name(), "' has ", src.blobs_size(), " parameter blobs in the file and ",
           blobs.size(), " in the net");
    for (int j = 0; j < src.blobs_size(); ++j) {
      if (!blobs[j]->ShapeEquals(src.blobs(j))) {
        std::vector<int> file_shape(src.blobs(j).shape().dim().begin(), src.blobs(j).shape().dim().end());
        fail(source, ": layer '", src.name(), "' parameter ", j, " has shape ", shape_string(file_shape),
             " in the file and ", blobs[j]->shape_string(), " in the net");
      }
      blobs[j]->FromProto(src.blobs(j), false, str_cat(source, ": layer '", src.name(), "' parameter ", j));
    }
  }
}

void Net::CopyTrainedLayersFrom(const std::string& path) {
  NetParameter param;
  if (hdf5::IsHdf5Name(path)) {  // snapshot_format: HDF5
    hdf5::ReadWeights(path, &param);
  } else {
    ReadBinaryProto(path, &param);
  }
  CopyTrainedLayersFrom(param, path);
}

void Net::ShareTrainedLayersWith(const Net& other) {
  for (size_t i = 0; i < other.layers_.size(); ++i) {
    auto it = layer_index_.find(other.layer_names_[i]);
    if (it == layer_index_.end()) continue;
    auto& mine = layers_[it->second]->blobs();
    const auto& theirs = other.layers_[i]->blobs();
    if (mine.size() != theirs.size())
      fail("layer '", other.layer_names_[i], "' has ", mine.size(), " parameter blobs in net '", name_, "' (",
           phase_ == TRAIN ? "TRAIN" : "TEST", ") and ", theirs.size(), " in the training net");
    for (size_t j = 0; j < mine.size(); ++j) {
      if (mine[j]->shape() != theirs[j]->shape())
        fail("layer '", other.layer_names_[i], "' parameter ", j, " has shape ", mine[j]->shape_string(),
             " in the test net and ", theirs[j]->shape_string(), " in the training net");
      mine[j]->ShareData(*theirs[j]);
    }
  }
}

void Net::ToProto(NetParameter* param, bool write_diff) const {
  param->Clear();
  param->set_name(name_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    LayerParameter* lp = param->add_layer();
    *lp = layers_[i]->layer_param();
    lp->clear_blobs();
    // BVLC Caffe uses field numbers 145-148 for other messages; keep the
    // weights file readable there by leaving the type fields out.
    lp->clear_forward_type();
    lp->clear_backward_type();
    lp->clear_forward_math();
    lp->clear_backward_math();
    for (const auto& b : layers_[i]->blobs()) b->ToProto(lp->add_blobs(), write_diff);
  }
}

int SetBatchSize(NetParameter* param, int batch) {
  if (batch <= 0) fail("batch size ", batch, ": must be positive");
  int changed = 0;
  for (LayerParameter& l : *param->mutable_layer()) changed += SetLayerBatch(&l, batch) ? 1 : 0;
  return changed;
}

}  // namespace cortado
