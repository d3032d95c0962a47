#pragma once
// A Net is a DAG of layers built from a NetParameter, as in Caffe:
// - layers are kept or dropped by their include/exclude rules against the
//   NetState (phase, level, stages);
// - a Split layer is inserted wherever one top feeds several bottoms;
// - a layer whose top has the name of its bottom computes in place;
// - parameters with the same ParamSpec name are shared (shapes checked:
//   STRICT equal shapes, PERMISSIVE equal counts);
// - backward runs only where a loss depends on a learnable parameter or
//   force_backward asks for it;
// - each layer's types come from its own forward_type/backward_type fields,
//   else the net's default_forward_type/default_backward_type.
// Building runs in stages (net_build.cpp): the net's fields and the filter
// (a net left with no layers is an error naming the file), then every layer
// checked, wired and set up against its bottoms' shapes, then backward
// planned. It reports user errors as one Error holding every error found,
// each with the prototxt file and line, the layer, and the field; a layer fed
// by a layer with an error is not checked. Layer types are told apart by
// their traits (layer_traits.hpp), not by name. The passes, accessors and
// weights are in net.cpp.

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cortado/io/proto_io.hpp"
#include "cortado/layer.hpp"

namespace cortado {

struct FusedChain;  // net_fusion.hpp

class Net {
 public:
  /// `info` locates fields in the prototxt for error messages (may be empty);
  /// `ctx` is where the net runs (null: the CPU).
  explicit Net(const NetParameter& param, const SourceInfo& info = SourceInfo(),
               std::shared_ptr<const Context> ctx = nullptr);
  /// Reads the prototxt at `path`, sets its state's phase (and level/stages).
  Net(const std::string& path, Phase phase, int level = 0, const std::vector<std::string>& stages = {},
      std::shared_ptr<const Context> ctx = nullptr);
  const Context& context() const { return *ctx_; }
  std::shared_ptr<const Context> context_ptr() const { return ctx_; }

  /// Forward through every layer; returns the total weighted loss. On a GPU
  /// with the net's sync_layers: true, Forward and Backward wait for the
  /// device after each layer and name the layer a CUDA error follows
  /// (gpu_faults.hpp).
  double Forward();
  /// Backward through the layers that need it. With a listener set, after
  /// each layer it is called with the learnable parameters (indices into
  /// learnable_params()) whose gradients that layer completed: those of no
  /// layer run later in this backward (a shared parameter, after the first
  /// layer that uses it), so that their sum across ranks can start while
  /// backward goes on.
  void Backward();
  void set_param_ready_listener(std::function<void(const std::vector<int>&)> f) { ready_listener_ = std::move(f); }
  /// Element i: what the listener is called with after layer i's backward
  /// (empty: not called). Every learnable parameter is in exactly one.
  const std::vector<std::vector<int>>& params_ready_after_layer() const { return ready_after_layer_; }
  /// Called after each layer's backward with its index (the Solver's
  /// injected faults, comm/injected_fault.hpp); empty: none.
  void set_backward_hook(std::function<void(int)> f) { backward_hook_ = std::move(f); }
  /// Forward, then Backward; returns the loss.
  double ForwardBackward();
  void Reshape();
  void ClearParamDiffs();

  /// Copies the parameters of layers with matching names from a trained net
  /// (.caffemodel); layers absent from `param` keep their values. Shape
  /// mismatches are Errors naming `source`, the layer and both shapes.
  void CopyTrainedLayersFrom(const NetParameter& param, const std::string& source = "weights");
  void CopyTrainedLayersFrom(const std::string& path);
  /// Makes this net's layers use the parameter buffers of the layers of
  /// `other` with the same names (a test net sharing the train net's weights).
  void ShareTrainedLayersWith(const Net& other);
  /// Writes every layer with its parameters (data as float; diffs optional).
  void ToProto(NetParameter* param, bool write_diff = false) const;

  /// Tells data layers that `batches` batches were already consumed.
  void SeekData(int64_t batches);
  /// Multiplies the gradient of the total loss by `scale` from the next
  /// backward on (every top with a loss weight, whatever the layer type).
  void SetLossScale(float scale);
  /// The net's global_grad_scale (the static loss scale it asks for).
  float global_grad_scale() const { return global_grad_scale_; }

  const std::string& name() const { return name_; }
  Phase phase() const { return phase_; }
  /// The net's sync_layers field (Forward and Backward wait after each layer on a GPU).
  bool sync_layers() const { return sync_layers_; }
  const std::vector<std::string>& layer_names() const { return layer_names_; }
  const std::vector<std::string>& blob_names() const { return blob_names_; }
  const std::vector<std::shared_ptr<Blob>>& blobs() const { return blobs_; }
  const std::vector<std::unique_ptr<LayerBase>>& layers() const { return layers_; }
  const std::vector<BlobVec>& bottom_vecs() const { return bottom_vecs_; }
  const std::vector<BlobVec>& top_vecs() const { return top_vecs_; }
  const std::vector<std::vector<bool>>& bottom_need_backward() const { return bottom_need_backward_; }
  const std::vector<bool>& layer_need_backward() const { return layer_need_backward_; }
  const BlobVec& output_blobs() const { return net_output_blobs_; }
  const std::vector<int>& output_blob_indices() const { return net_output_blob_indices_; }
  const BlobVec& input_blobs() const { return net_input_blobs_; }
  bool has_blob(const std::string& name) const { return blob_index_.count(name) > 0; }
  std::shared_ptr<Blob> blob_by_name(const std::string& name) const;
  bool has_layer(const std::string& name) const { return layer_index_.count(name) > 0; }
  LayerBase* layer_by_name(const std::string& name) const;
  double blob_loss_weight(int blob_index) const { return blob_loss_weights_[blob_index]; }
  /// Every layer top with a loss weight, in layer order, with its weight:
  /// the loss is the sum over them of weight * sum(top).
  std::vector<std::pair<Blob*, double>> loss_tops() const;

  /// Learnable parameters: every owned parameter blob once (shared ones by
  /// their owner), with lr_mult and decay_mult.
  const std::vector<Blob*>& learnable_params() const { return learnable_params_; }
  const std::vector<float>& params_lr() const { return params_lr_; }
  const std::vector<float>& params_weight_decay() const { return params_weight_decay_; }
  /// All parameter blobs in layer order, shared ones repeated.
  const std::vector<std::shared_ptr<Blob>>& params() const { return params_; }
  const std::vector<int>& param_owners() const { return param_owners_; }
  const std::vector<std::string>& param_display_names() const { return param_display_names_; }

  /// Whether a layer is kept under the given state (Caffe's rules).
  static bool StateMeetsRule(const NetState& state, const NetStateRule& rule, const std::string& layer);
  /// The layers of `param` kept under its state, with their original indexes.
  static NetParameter FilterNet(const NetParameter& param, std::vector<int>* kept_index = nullptr);

 private:
  // The stages of Init; the errors found are appended to `errors`.
  void Init(const NetParameter& param);
  NetParameter Prepare(const NetParameter& in_param, std::vector<std::string>* errors);
  void SetUpLayers(const NetParameter& param, std::vector<std::string>* errors);
  bool CheckLayer(const LayerParameter& lp, int layer_id, const std::map<std::string, int>& available,
                  const std::set<std::string>& unknown, std::vector<std::string>* errors);
  bool SetUpLayer(const LayerParameter& lp, int layer_id, std::map<std::string, int>* available,
                  std::vector<std::string>* errors);
  void AnalyseBackward(bool force_backward);
  void ShareParameters();
  // Which layer's backward completes each learnable parameter's gradient
  // (ready_after_layer_), after fusion: a fused tail's by its head.
  void PlanParamReadiness(const std::vector<FusedChain>& chains);
  /// "file:line: layer 'name' (Type): field: msg".
  std::string LayerError(int layer_id, const std::string& field, const std::string& msg) const;
  [[noreturn]] void LayerFail(int layer_id, const std::string& field, const std::string& msg) const;
  std::string OutOfMemoryError(int layer_id, const char* doing) const;
  [[noreturn]] void OutOfMemory(int layer_id, const char* doing) const;
  /// Waits for the device and names layer `layer_id` and `pass` in an Error
  /// when a CUDA error is pending (sync_layers).
  void CheckLayerRan(int layer_id, const char* pass) const;
  void AppendTop(const LayerParameter& lp, int layer_id, int top_id, std::map<std::string, int>* available);
  int AppendBottom(const LayerParameter& lp, int layer_id, int bottom_id, std::map<std::string, int>* available);
  void AppendParam(int layer_id, int param_id, std::vector<std::string>* errors);

  std::string name_;
  Phase phase_ = TRAIN;
  float global_grad_scale_ = 1;
  bool sync_layers_ = false;
  CuDNNParameter cudnn_;  // given to every layer (LayerBase::cudnn_param)
  SourceInfo info_;
  std::shared_ptr<const Context> ctx_;
  std::vector<int> source_index_;  // layer id -> index in the prototxt as written (-1: inserted)
  std::set<std::string> nhwc_blobs_;  // the layout plan's NHWC blobs (net_layout.hpp)
  std::vector<LayerParameter> layer_params_;
  std::vector<std::unique_ptr<LayerBase>> layers_;
  std::vector<std::string> layer_names_;
  std::map<std::string, int> layer_index_;
  std::vector<std::shared_ptr<Blob>> blobs_;
  std::vector<std::string> blob_names_;
  std::map<std::string, int> blob_index_;
  std::vector<bool> blob_need_backward_;
  std::vector<double> blob_loss_weights_;
  std::vector<BlobVec> bottom_vecs_, top_vecs_;
  std::vector<std::vector<int>> bottom_id_vecs_, top_id_vecs_;
  std::vector<std::vector<bool>> bottom_need_backward_;
  std::vector<bool> layer_need_backward_;
  std::vector<int> net_input_blob_indices_, net_output_blob_indices_;
  BlobVec net_input_blobs_, net_output_blobs_;
  std::vector<std::shared_ptr<Blob>> params_;
  std::vector<int> param_owners_;
  std::vector<std::string> param_display_names_;
  std::vector<std::pair<int, int>> param_layer_indices_;
  std::map<std::string, int> param_names_index_;
  std::vector<Blob*> learnable_params_;
  std::vector<int> learnable_param_ids_;
  std::vector<float> params_lr_, params_weight_decay_;
  std::vector<std::vector<int>> ready_after_layer_;  // layer -> learnable params complete after its backward
  std::function<void(const std::vector<int>&)> ready_listener_;
  std::function<void(int)> backward_hook_;
};

/// Inserts Split layers where a top feeds several bottoms (Caffe's naming:
/// "<top>_<layer>_<index>_split"). `origin` maps each output layer to its
/// index in `in` (the consumer's index for inserted splits).
NetParameter InsertSplits(const NetParameter& in, std::vector<int>* origin);

/// Sets the batch (the first dimension) of every data source in `param`:
/// Data's batch_size, and the first dimension of each DummyData and Input
/// shape. Returns how many layers it changed. For benchmarks (trainer time
/// --batch_size) that run a model file at another batch than it was written
/// for; nothing else in the net is touched.
int SetBatchSize(NetParameter* param, int batch);

}  // namespace cortado
