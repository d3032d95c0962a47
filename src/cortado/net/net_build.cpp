// The Net's staged build (net.hpp): the include/exclude filter, the Split
// layers, then Init's stages below. The passes and accessors are in net.cpp.
#include "cortado/net/net.hpp"

#include <algorithm>
#include <cmath>
#include <new>
#include <set>

#include "cortado/layer_registry.hpp"
#include "cortado/layer_traits.hpp"
#include "cortado/net/net_fusion.hpp"
#include "cortado/net/net_layout.hpp"
#include "cortado/net/net_memory.hpp"
#include "cortado/switches.hpp"
#include "cortado/util/cpu_parallel.hpp"
#include "cortado/util/logging.hpp"

namespace cortado {

// ---- filtering ----------------------------------------------------------------

bool Net::StateMeetsRule(const NetState& state, const NetStateRule& rule, const std::string& layer) {
  if (rule.has_phase() && rule.phase() != state.phase()) return false;
  if (rule.has_min_level() && state.level() < rule.min_level()) return false;
  if (rule.has_max_level() && state.level() > rule.max_level()) return false;
  const std::set<std::string> stages(state.stage().begin(), state.stage().end());
  for (const std::string& s : rule.stage())
    if (!stages.count(s)) return false;
  for (const std::string& s : rule.not_stage())
    if (stages.count(s)) return false;
  return true;
}

NetParameter Net::FilterNet(const NetParameter& param, std::vector<int>* kept_index) {
  NetParameter out(param);
  out.clear_layer();
  if (kept_index) kept_index->clear();
  for (int i = 0; i < param.layer_size(); ++i) {
    const LayerParameter& lp = param.layer(i);
    if (lp.include_size() && lp.exclude_size())
      fail("layer '", lp.name(), "': specify either include or exclude rules, not both");
    bool keep = lp.include_size() == 0;
    for (const NetStateRule& r : lp.exclude())
      if (StateMeetsRule(param.state(), r, lp.name())) keep = false;
    for (const NetStateRule& r : lp.include())
      if (StateMeetsRule(param.state(), r, lp.name())) keep = true;
    if (!keep) continue;
    *out.add_layer() = lp;
    if (kept_index) kept_index->push_back(i);
  }
  return out;
}

// ---- split insertion ------------------------------------------------------------

namespace {
std::string split_layer_name(const std::string& layer, const std::string& blob, int top) {
  return str_cat(blob, "_", layer, "_", top, "_split");
}
std::string split_blob_name(const std::string& layer, const std::string& blob, int top, int k) {
  return str_cat(blob, "_", layer, "_", top, "_split_", k);
}
}  // namespace

NetParameter InsertSplits(const NetParameter& in, std::vector<int>* origin) {
  using Idx = std::pair<int, int>;  // (layer, top or bottom index)
  std::map<std::string, Idx> last_top;
  std::map<Idx, Idx> bottom_source;
  std::map<Idx, int> consumers;
  std::map<Idx, float> loss_weight;
  for (int i = 0; i < in.layer_size(); ++i) {
    const LayerParameter& lp = in.layer(i);
    for (int j = 0; j < lp.bottom_size(); ++j) {
      auto it = last_top.find(lp.bottom(j));
      if (it == last_top.end()) continue;  // reported by Net::Init
      bottom_source[{i, j}] = it->second;
      ++consumers[it->second];
    }
    for (int j = 0; j < lp.top_size(); ++j) {
      last_top[lp.top(j)] = {i, j};
      if (j < lp.loss_weight_size() && lp.loss_weight(j) != 0) loss_weight[{i, j}] = lp.loss_weight(j);
    }
  }
  NetParameter out(in);
  out.clear_layer();
  origin->clear();
  std::map<Idx, int> used;
  for (int i = 0; i < in.layer_size(); ++i) {
    LayerParameter* lp = out.add_layer();
    *lp = in.layer(i);
    origin->push_back(i);
    for (int j = 0; j < lp->bottom_size(); ++j) {
      auto it = bottom_source.find({i, j});
      if (it == bottom_source.end()) continue;
      const Idx src = it->second;
      const bool has_loss = loss_weight.count(src) > 0;
      if (consumers[src] + (has_loss ? 1 : 0) <= 1) continue;
      const LayerParameter& producer = in.layer(src.first);
      lp->set_bottom(j, split_blob_name(producer.name(), producer.top(src.second), src.second, used[src]++));
    }
    for (int j = 0; j < lp->top_size(); ++j) {
      const Idx me{i, j};
      const bool has_loss = loss_weight.count(me) > 0;
      const int n = consumers.count(me) ? consumers[me] : 0;
      if (n + (has_loss ? 1 : 0) <= 1 || n == 0) continue;
      LayerParameter* split = out.add_layer();
      origin->push_back(i);
      const std::string& blob = lp->top(j);
      split->set_name(split_layer_name(lp->name(), blob, j));
      split->set_type("Split");
      split->add_bottom(blob);
      split->set_forward_type(lp->forward_type());
      split->set_backward_type(lp->backward_type());
      split->set_forward_math(lp->forward_math());
      split->set_backward_math(lp->backward_math());
      const int tops = n + (has_loss ? 1 : 0);
      for (int k = 0; k < tops; ++k) {
        split->add_top(split_blob_name(lp->name(), blob, j, k));
        if (has_loss) split->add_loss_weight(k == 0 ? loss_weight[me] : 0.f);
      }
      if (has_loss) {
        // The loss now flows through the split's first top.
        lp->set_loss_weight(j, 0.f);
        used[me] = 1;
      }
    }
  }
  return out;
}

// ---- construction ---------------------------------------------------------------
//
// Init builds a net in stages:
// 1. Prepare: the net's own fields, the include/exclude filter (a net left
//    with no layers is an error naming the file), each layer's types from the
//    net's defaults, the Split layers.
// 2. SetUpLayers: every layer is checked (name, type and pair, the producers
//    of its bottoms, its tops), wired to its blobs and set up: LayerSetUp
//    checks its fields, Reshape shapes its tops from its bottoms' shapes
//    (SyncedMemory allocates nothing until touched), the fillers fill its
//    parameters. Each error is recorded with its file:line, layer and field,
//    and the check goes on: a layer with an error leaves its tops unknown and
//    the layers fed by an unknown blob are not checked, so one mistake gives
//    one message. The errors are thrown together, in one Error.
// 3. ShareParameters, AnalyseBackward: shared parameters get their owner's
//    buffers; backward is planned (which layers and bottoms need it, and after
//    which layer each learnable parameter's gradient is complete).

Net::Net(const NetParameter& param, const SourceInfo& info, std::shared_ptr<const Context> ctx)
    : info_(info), ctx_(ctx ? std::move(ctx) : Context::Cpu()) {
  Init(param);
}

Net::Net(const std::string& path, Phase phase, int level, const std::vector<std::string>& stages,
         std::shared_ptr<const Context> ctx)
    : ctx_(ctx ? std::move(ctx) : Context::Cpu()) {
  NetParameter param;
  ReadTextProto(path, &param, &info_);
  param.mutable_state()->set_phase(phase);
  param.mutable_state()->set_level(level);
  for (const std::string& s : stages) param.mutable_state()->add_stage(s);
  Init(param);
}

namespace {
// The errors of a build in one Error: one error alone is thrown as it is;
// several follow one another, one a line, the net's own fields first and then
// the layers in file order, and a last line counts them.
[[noreturn]] void ThrowBuildErrors(const std::vector<std::string>& errors, const std::string& file,
                                   const std::string& net) {
  if (errors.size() == 1) throw Error(errors[0]);
  std::string all;
  for (const std::string& e : errors) all += e + "\n";
  throw Error(str_cat(all, errors.size(), " errors in ", file.empty() ? "net '" + net + "'" : file,
                      " (a layer fed by a layer with an error is not checked)"));
}

std::string state_string(const NetState& s) {
  std::string out = str_cat("phase ", s.phase() == TRAIN ? "TRAIN" : "TEST");
  if (s.level() != 0) out += str_cat(", level ", s.level());
  for (int i = 0; i < s.stage_size(); ++i) out += str_cat(i ? ", " : ", stages ", "'", s.stage(i), "'");
  return out;
}

// FLOAT16 math is FP16 storage's choice; a BF16 layer always computes in
// FLOAT (types.hpp, gpu_math_type). Said once instead of ignored quietly, for
// the layers whose math type matters (layer_traits' gemm).
void WarnIgnoredMath(const NetParameter& param) {
  std::string ignored;
  for (const LayerParameter& lp : param.layer()) {
    if (layer_traits(lp.type()).gemm && ((lp.forward_math() == FLOAT16 && lp.forward_type() == BFLOAT16) ||
                                         (lp.backward_math() == FLOAT16 && lp.backward_type() == BFLOAT16)))
      ignored += (ignored.empty() ? "" : ", ") + lp.name();
  }
  if (!ignored.empty())
    LOG(WARNING) << "forward_math/backward_math FLOAT16 is for FP16 storage; these BFLOAT16 layers compute in "
                 << "FLOAT: " << ignored;
}
}  // namespace

void Net::Init(const NetParameter& in_param) {
  cpu_threads();  // settles the CPU thread count (and OpenBLAS's, see cpu_parallel.hpp) before any GEMM
  WarnRetiredVariables();  // switches.hpp: an old script's CORTADO_NHWC=1, say, is named once
  std::vector<std::string> errors;
  const NetParameter param = Prepare(in_param, &errors);
  if (param.layer_size() > 0) SetUpLayers(param, &errors);
  if (!errors.empty()) ThrowBuildErrors(errors, info_.file(), name_);
  AnalyseBackward(in_param.force_backward());
  ShareParameters();
  // net_fusion.hpp: an execution detail, the values unchanged.
  const std::vector<FusedChain> chains = in_param.fuse_layers() ? FuseLayers(*this) : std::vector<FusedChain>();
  PlanParamReadiness(chains);
  // net_memory.hpp: likewise.
  const DiffSharingStats shared = in_param.share_diffs() ? ShareDiffBuffers(*this) : DiffSharingStats();
  if (shared.buffers < shared.groups) INFO_LOG << "Network '" << name_ << "': " << DiffSharingSummary(shared);
  const DataSharingStats computed_in = in_param.share_data() ? ShareDataBuffers(*this) : DataSharingStats();
  if (computed_in.blobs > 0) INFO_LOG << "Network '" << name_ << "': " << DataSharingSummary(computed_in);
  INFO_LOG << "Network '" << name_ << "' (" << (phase_ == TRAIN ? "TRAIN" : "TEST") << "): " << layers_.size()
           << " layers, " << learnable_params_.size() << " learnable parameter blobs";
}

NetParameter Net::Prepare(const NetParameter& in_param, std::vector<std::string>* errors) {
  name_ = in_param.name();
  phase_ = in_param.state().phase();
  auto net_error = [&](const char* field, const std::string& msg) {
    errors->push_back(info_.where(info_.net_field_line(field)) + msg);
  };
  if (in_param.global_grad_scale_adaptive())
    net_error("global_grad_scale_adaptive", "global_grad_scale_adaptive: NVCaffe's adaptive scaling is not "
                                            "implemented; use dynamic_loss_scale: true in the solver");
  if (!(in_param.global_grad_scale() > 0) || !std::isfinite(in_param.global_grad_scale()))
    net_error("global_grad_scale", str_cat("global_grad_scale: must be positive and finite, got ",
                                           in_param.global_grad_scale()));
  global_grad_scale_ = in_param.global_grad_scale();
  // The switches (switches.hpp) the parser lets through.
  for (const auto& [field, msg] : CheckNetSwitches(in_param)) net_error(field.c_str(), field + ": " + msg);
  sync_layers_ = in_param.sync_layers();
  cudnn_ = in_param.cudnn();
  if (in_param.input_size() > 0)
    net_error("input", "the deprecated net-level 'input' fields are not supported; use an Input layer");
  // A layer with both kinds of rules is an error (FilterNet would say it
  // without the line); the check goes on as if it had neither.
  NetParameter ruled(in_param);
  for (int i = 0; i < ruled.layer_size(); ++i) {
    LayerParameter& lp = *ruled.mutable_layer(i);
    if (!lp.include_size() || !lp.exclude_size()) continue;
    errors->push_back(str_cat(info_.where(info_.field_line(i, "exclude")), "layer '", lp.name(), "' (", lp.type(),
                              "): exclude: specify either include or exclude rules, not both"));
    lp.clear_include();
    lp.clear_exclude();
  }
  std::vector<int> kept;
  NetParameter filtered = FilterNet(ruled, &kept);
  if (filtered.layer_size() == 0) {
    const std::string net = str_cat(info_.where(0), "net", name_.empty() ? "" : " '" + name_ + "'", " has no layers");
    errors->push_back(in_param.layer_size() == 0
                          ? net + ": the file defines none, so there is nothing to build or run"
                          : str_cat(net, " in ", state_string(in_param.state()), ": the include/exclude rules leave "
                                    "out all ", in_param.layer_size(), " of them"));
    return filtered;
  }
  for (LayerParameter& lp : *filtered.mutable_layer()) {
    if (!lp.has_forward_type()) lp.set_forward_type(in_param.default_forward_type());
    if (!lp.has_backward_type()) lp.set_backward_type(in_param.default_backward_type());
    if (!lp.has_forward_math()) lp.set_forward_math(in_param.default_forward_math());
    if (!lp.has_backward_math()) lp.set_backward_math(in_param.default_backward_math());
    if (!lp.has_phase()) lp.set_phase(phase_);
  }
  WarnIgnoredMath(filtered);
  std::vector<int> origin;
  NetParameter param = InsertSplits(filtered, &origin);
  for (int o : origin) source_index_.push_back(kept[o]);
  // net_memory.hpp: an in-place BatchNorm then keeps no copy of its input.
  if (phase_ == TRAIN && in_param.batch_norm_out_of_place()) BatchNormOutOfPlace(&param);
  // net_layout.hpp: channels-last blobs where the layers gain from them.
  bool half_only = true;
  if (LayoutPlanWanted(in_param.channels_last(), ctx_->on_gpu(), &half_only)) {
    std::vector<int> from;
    const LayoutPlan plan = PlanLayouts(&param, half_only, &from);
    std::vector<int> source;
    for (int f : from) source.push_back(source_index_[f]);
    source_index_ = source;
    nhwc_blobs_ = plan.nhwc;
    if (!plan.nhwc.empty()) INFO_LOG << "Network '" << name_ << "': " << LayoutPlanSummary(plan);
  }
  return param;
}

void Net::SetUpLayers(const NetParameter& param, std::vector<std::string>* errors) {
  ctx_->Activate();
  const int n = param.layer_size();
  layer_params_.assign(param.layer().begin(), param.layer().end());
  bottom_vecs_.resize(n);
  top_vecs_.resize(n);
  bottom_id_vecs_.resize(n);
  top_id_vecs_.resize(n);
  bottom_need_backward_.resize(n);
  std::map<std::string, int> available;  // blobs produced and not consumed yet: the net's outputs
  std::set<std::string> unknown;         // tops of layers with an error
  for (int layer_id = 0; layer_id < n; ++layer_id) {
    const LayerParameter& lp = param.layer(layer_id);
    const size_t before = errors->size();
    const bool fed = CheckLayer(lp, layer_id, available, unknown, errors);
    if (!(fed && errors->size() == before && SetUpLayer(lp, layer_id, &available, errors))) {
      layer_need_backward_.push_back(false);
      unknown.insert(lp.top().begin(), lp.top().end());
    }
  }
  for (const auto& [name, id] : available) {
    net_output_blobs_.push_back(blobs_[id].get());
    net_output_blob_indices_.push_back(id);
  }
}

// What needs no shapes: the name, propagate_down, the type and the pair, the
// producers of the bottoms, the names of the tops. Creates the layer (null
// for a type that cannot be made); returns false when a bottom is an unknown
// blob (so the layer is not set up).
bool Net::CheckLayer(const LayerParameter& lp, int layer_id, const std::map<std::string, int>& available,
                     const std::set<std::string>& unknown, std::vector<std::string>* errors) {
  auto fail = [&](const std::string& field, const std::string& msg) {
    errors->push_back(LayerError(layer_id, field, msg));
  };
  if (lp.name().empty()) {
    fail("name", "every layer needs a name");
  } else if (layer_index_.count(lp.name())) {
    fail("name", "a layer of this name already exists");
  } else {
    layer_index_[lp.name()] = layer_id;
  }
  layer_names_.push_back(lp.name());
  if (lp.propagate_down_size() > 0 && lp.propagate_down_size() != lp.bottom_size())
    fail("propagate_down", str_cat("has ", lp.propagate_down_size(), " values for ", lp.bottom_size(), " bottoms"));
  layers_.emplace_back();
  try {
    layers_.back() = CreateLayer(lp, ctx_.get());
    layers_.back()->set_context(ctx_);
    layers_.back()->set_cudnn_param(cudnn_);
  } catch (const FieldError& e) {
    fail(e.field(), e.message());
  }
  bool fed = true;
  for (int b = 0; b < lp.bottom_size(); ++b) {
    const std::string& name = lp.bottom(b);
    if (unknown.count(name)) {
      fed = false;
    } else if (!available.count(name)) {
      fail(str_cat("bottom[", b, "]"),
           str_cat("bottom blob '", name, "' (bottom #", b, ") is not produced by any earlier layer in this phase"));
    }
  }
  std::set<std::string> tops;
  for (int t = 0; t < lp.top_size(); ++t) {
    const std::string& name = lp.top(t);
    const bool in_place = t < lp.bottom_size() && lp.bottom(t) == name;
    if (!in_place && (blob_index_.count(name) || tops.count(name)))
      fail(str_cat("top[", t, "]"), str_cat("top blob '", name, "' is already produced by another layer"));
    tops.insert(name);
  }
  return fed;
}

// Wires a checked layer to its blobs and sets it up; records its errors.
// Returns false when the layer could not be set up (its tops are unknown).
bool Net::SetUpLayer(const LayerParameter& lp, int layer_id, std::map<std::string, int>* available,
                     std::vector<std::string>* errors) {
  bool need_backward = false;
  for (int b = 0; b < lp.bottom_size(); ++b) {
    const int blob_id = AppendBottom(lp, layer_id, b, available);
    need_backward |= blob_need_backward_[blob_id];
  }
  for (int t = 0; t < lp.top_size(); ++t) AppendTop(lp, layer_id, t, available);
  LayerBase* layer = layers_[layer_id].get();
  if (layer->AutoTopBlobs()) {
    const int needed = std::max(layer->MinTopBlobs(), layer->ExactNumTopBlobs());
    for (int t = lp.top_size(); t < needed; ++t) AppendTop(lp, layer_id, -1, available);
  }
  try {
    layer->SetUp(bottom_vecs_[layer_id], top_vecs_[layer_id]);
  } catch (const FieldError& e) {
    errors->push_back(LayerError(layer_id, e.field(), e.message()));
    return false;
  } catch (const Error& e) {
    errors->push_back(LayerError(layer_id, "", e.what()));
    return false;
  } catch (const std::bad_alloc&) {
    // No point in going on: the next layers would need memory too.
    errors->push_back(OutOfMemoryError(layer_id, "setting up the layer"));
    ThrowBuildErrors(*errors, info_.file(), name_);
  }
  VLOG(1) << "Created layer " << lp.name() << " (" << lp.type() << ", " << type_name(lp.forward_type()) << "/"
          << type_name(lp.backward_type()) << ")";
  for (size_t t = 0; t < top_vecs_[layer_id].size(); ++t) {
    const int blob_id = top_id_vecs_[layer_id][t];
    blob_loss_weights_[blob_id] = layer->loss(static_cast<int>(t));
    VLOG(1) << "Top shape: " << blob_names_[blob_id] << " " << top_vecs_[layer_id][t]->shape_string();
  }
  // ParamSpecs as the layer left them: a layer may add some in LayerSetUp
  // (BatchNorm freezes its statistics with lr_mult 0, as in Caffe).
  const LayerParameter& specs = layer->layer_param();
  const int num_params = static_cast<int>(layer->blobs().size());
  if (specs.param_size() > num_params)
    errors->push_back(LayerError(layer_id, "param", str_cat("has ", specs.param_size(), " ParamSpecs for ", num_params,
                                                            " parameter blobs")));
  for (int p = 0; p < num_params; ++p) {
    const bool learn = p < specs.param_size() ? specs.param(p).lr_mult() != 0 : true;
    need_backward |= learn;
    layer->set_param_propagate_down(p, learn);
  }
  for (int p = 0; p < num_params; ++p) AppendParam(layer_id, p, errors);
  layer_need_backward_.push_back(need_backward);
  if (need_backward)
    for (int id : top_id_vecs_[layer_id]) blob_need_backward_[id] = true;
  return true;
}

// Backward only where a loss depends on it (Caffe's rule), or everywhere a
// layer allows with force_backward.
void Net::AnalyseBackward(bool force_backward) {
  const int n = static_cast<int>(layers_.size());
  std::set<std::string> under_loss, skip_backprop;
  for (int layer_id = n - 1; layer_id >= 0; --layer_id) {
    bool contributes = false, skip = true;
    for (size_t t = 0; t < top_vecs_[layer_id].size(); ++t) {
      const std::string& blob = blob_names_[top_id_vecs_[layer_id][t]];
      if (layers_[layer_id]->loss(static_cast<int>(t)) != 0 || under_loss.count(blob)) contributes = true;
      if (!skip_backprop.count(blob)) skip = false;
      if (contributes && !skip) break;
    }
    if (layer_need_backward_[layer_id] && skip) {
      layer_need_backward_[layer_id] = false;
      std::fill(bottom_need_backward_[layer_id].begin(), bottom_need_backward_[layer_id].end(), false);
    }
    if (!contributes) layer_need_backward_[layer_id] = false;
    for (size_t b = 0; b < bottom_vecs_[layer_id].size(); ++b) {
      const std::string& blob = blob_names_[bottom_id_vecs_[layer_id][b]];
      if (contributes) {
        under_loss.insert(blob);
      } else {
        bottom_need_backward_[layer_id][b] = false;
      }
      if (!bottom_need_backward_[layer_id][b]) skip_backprop.insert(blob);
    }
  }
  if (!force_backward) return;
  for (int layer_id = 0; layer_id < n; ++layer_id) {
    layer_need_backward_[layer_id] = true;
    for (size_t b = 0; b < bottom_need_backward_[layer_id].size(); ++b) {
      const bool need = bottom_need_backward_[layer_id][b] || layers_[layer_id]->AllowForceBackward(static_cast<int>(b));
      bottom_need_backward_[layer_id][b] = need;
      blob_need_backward_[bottom_id_vecs_[layer_id][b]] = blob_need_backward_[bottom_id_vecs_[layer_id][b]] || need;
    }
    for (size_t p = 0; p < layers_[layer_id]->blobs().size(); ++p)
      layers_[layer_id]->set_param_propagate_down(static_cast<int>(p), true);
  }
}

void Net::ShareParameters() {
  // Shared parameters use their owner's buffers.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (param_owners_[i] < 0) continue;
    params_[i]->ShareData(*params_[param_owners_[i]]);
    params_[i]->ShareDiff(*params_[param_owners_[i]]);
  }
}

void Net::PlanParamReadiness(const std::vector<FusedChain>& chains) {
  // The layer whose backward computes each layer's parameter gradients: its
  // own, or the head of the fused chain it is a tail of (the head writes a
  // fused Scale's gradients; the Scale's own backward does nothing).
  std::vector<int> computed_by(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) computed_by[i] = static_cast<int>(i);
  for (const FusedChain& c : chains)
    for (int t : c.tails) computed_by[static_cast<size_t>(t)] = c.head;
  // A learnable parameter's gradient is complete after the backward of the
  // first layer (in net order) that computes a part of it: backward runs
  // last to first.
  std::vector<int> first_user(learnable_params_.size(), static_cast<int>(layers_.size()));
  for (size_t p = 0; p < params_.size(); ++p) {
    int& f = first_user[static_cast<size_t>(learnable_param_ids_[p])];
    f = std::min(f, computed_by[static_cast<size_t>(param_layer_indices_[p].first)]);
  }
  ready_after_layer_.assign(layers_.size(), {});
  for (size_t k = 0; k < first_user.size(); ++k)
    ready_after_layer_[static_cast<size_t>(first_user[k])].push_back(static_cast<int>(k));
}

int Net::AppendBottom(const LayerParameter& lp, int layer_id, int bottom_id, std::map<std::string, int>* available) {
  const std::string& name = lp.bottom(bottom_id);
  const int blob_id = blob_index_.at(name);  // CheckLayer found its producer
  bottom_vecs_[layer_id].push_back(blobs_[blob_id].get());
  bottom_id_vecs_[layer_id].push_back(blob_id);
  available->erase(name);
  const bool propagate = bottom_id < lp.propagate_down_size() ? lp.propagate_down(bottom_id) : true;
  bottom_need_backward_[layer_id].push_back(propagate && blob_need_backward_[blob_id]);
  return blob_id;
}

void Net::AppendTop(const LayerParameter& lp, int layer_id, int top_id, std::map<std::string, int>* available) {
  const std::string name = top_id >= 0 ? lp.top(top_id) : str_cat("(automatic top of ", lp.name(), ")");
  if (top_id >= 0 && top_id < lp.bottom_size() && lp.bottom(top_id) == name) {
    const int id = blob_index_.at(name);  // in place
    top_vecs_[layer_id].push_back(blobs_[id].get());
    top_id_vecs_[layer_id].push_back(id);
  } else {
    CORTADO_CHECK(!blob_index_.count(name)) << name;  // CheckLayer reported a second producer
    const int id = static_cast<int>(blobs_.size());
    blobs_.push_back(std::make_shared<Blob>(lp.forward_type()));
    if (nhwc_blobs_.count(name)) blobs_.back()->set_layout(Layout::NHWC);
    blob_names_.push_back(name);
    blob_index_[name] = id;
    blob_need_backward_.push_back(false);
    blob_loss_weights_.push_back(0);
    top_vecs_[layer_id].push_back(blobs_[id].get());
    top_id_vecs_[layer_id].push_back(id);
    if (layer_traits(lp.type()).net_input) {
      net_input_blob_indices_.push_back(id);
      net_input_blobs_.push_back(blobs_[id].get());
    }
  }
  (*available)[name] = blob_index_[name];
}

void Net::AppendParam(int layer_id, int param_id, std::vector<std::string>* errors) {
  const LayerParameter& lp = layers_[layer_id]->layer_param();
  const ParamSpec spec = param_id < lp.param_size() ? lp.param(param_id) : ParamSpec();
  const std::string& pname = spec.name();
  param_display_names_.push_back(pname.empty() ? std::to_string(param_id) : pname);
  const int net_param_id = static_cast<int>(params_.size());
  params_.push_back(layers_[layer_id]->blobs()[param_id]);
  param_layer_indices_.push_back({layer_id, param_id});
  if (pname.empty() || !param_names_index_.count(pname)) {
    param_owners_.push_back(-1);
    if (!pname.empty()) param_names_index_[pname] = net_param_id;
    learnable_param_ids_.push_back(static_cast<int>(learnable_params_.size()));
    learnable_params_.push_back(params_[net_param_id].get());
    params_lr_.push_back(spec.lr_mult());
    params_weight_decay_.push_back(spec.decay_mult());
    return;
  }
  const int owner = param_names_index_[pname];
  param_owners_.push_back(owner);
  const Blob& mine = *params_[net_param_id];
  const Blob& theirs = *params_[owner];
  const std::string& owner_layer = layer_names_[param_layer_indices_[owner].first];
  const std::string field = str_cat("param[", param_id, "]");
  if (spec.share_mode() == ParamSpec::PERMISSIVE) {
    if (mine.count() != theirs.count())
      errors->push_back(LayerError(layer_id, field, str_cat("shared parameter '", pname, "' has ", mine.count(),
                                                            " values here and ", theirs.count(), " in its owner layer '",
                                                            owner_layer, "'")));
  } else if (mine.shape() != theirs.shape()) {
    errors->push_back(LayerError(layer_id, field, str_cat("shared parameter '", pname, "' has shape ",
                                                          mine.shape_string(), " here and ", theirs.shape_string(),
                                                          " in its owner layer '", owner_layer,
                                                          "' (share_mode PERMISSIVE compares counts only)")));
  }
  const int learnable_id = learnable_param_ids_[owner];
  learnable_param_ids_.push_back(learnable_id);
  if (spec.has_lr_mult()) params_lr_[learnable_id] = spec.lr_mult();
  if (spec.has_decay_mult()) params_weight_decay_[learnable_id] = spec.decay_mult();
}

}  // namespace cortado
