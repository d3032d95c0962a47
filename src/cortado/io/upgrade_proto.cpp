#include "cortado/io/upgrade_proto.hpp"

#include <map>
#include <utility>

#include "cortado/common.hpp"
#include "cortado/util/logging.hpp"

namespace cortado {

namespace pb = google::protobuf;
using Tree = pb::TextFormat::ParseInfoTree;

namespace {

// ---- tables -----------------------------------------------------------------------

struct V1Name {
  V1LayerParameter::LayerType type;
  const char* name;
};
// V1's enum and the type strings it stands for (BVLC Caffe's names).
constexpr V1Name kV1Names[] = {
    {V1LayerParameter::NONE, ""},
    {V1LayerParameter::ABSVAL, "AbsVal"},
    {V1LayerParameter::ACCURACY, "Accuracy"},
    {V1LayerParameter::ARGMAX, "ArgMax"},
    {V1LayerParameter::BNLL, "BNLL"},
    {V1LayerParameter::CONCAT, "Concat"},
    {V1LayerParameter::CONTRASTIVE_LOSS, "ContrastiveLoss"},
    {V1LayerParameter::CONVOLUTION, "Convolution"},
    {V1LayerParameter::DATA, "Data"},
    {V1LayerParameter::DECONVOLUTION, "Deconvolution"},
    {V1LayerParameter::DROPOUT, "Dropout"},
    {V1LayerParameter::DUMMY_DATA, "DummyData"},
    {V1LayerParameter::EUCLIDEAN_LOSS, "EuclideanLoss"},
    {V1LayerParameter::ELTWISE, "Eltwise"},
    {V1LayerParameter::EXP, "Exp"},
    {V1LayerParameter::FLATTEN, "Flatten"},
    {V1LayerParameter::HDF5_DATA, "HDF5Data"},
    {V1LayerParameter::HDF5_OUTPUT, "HDF5Output"},
    {V1LayerParameter::HINGE_LOSS, "HingeLoss"},
    {V1LayerParameter::IM2COL, "Im2col"},
    {V1LayerParameter::IMAGE_DATA, "ImageData"},
    {V1LayerParameter::INFOGAIN_LOSS, "InfogainLoss"},
    {V1LayerParameter::INNER_PRODUCT, "InnerProduct"},
    {V1LayerParameter::LRN, "LRN"},
    {V1LayerParameter::MEMORY_DATA, "MemoryData"},
    {V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS, "MultinomialLogisticLoss"},
    {V1LayerParameter::MVN, "MVN"},
    {V1LayerParameter::POOLING, "Pooling"},
    {V1LayerParameter::POWER, "Power"},
    {V1LayerParameter::RELU, "ReLU"},
    {V1LayerParameter::SIGMOID, "Sigmoid"},
    {V1LayerParameter::SIGMOID_CROSS_ENTROPY_LOSS, "SigmoidCrossEntropyLoss"},
    {V1LayerParameter::SILENCE, "Silence"},
    {V1LayerParameter::SOFTMAX, "Softmax"},
    {V1LayerParameter::SOFTMAX_LOSS, "SoftmaxWithLoss"},
    {V1LayerParameter::SPLIT, "Split"},
    {V1LayerParameter::SLICE, "Slice"},
    {V1LayerParameter::TANH, "TanH"},
    {V1LayerParameter::WINDOW_DATA, "WindowData"},
    {V1LayerParameter::THRESHOLD, "Threshold"},
};

struct V0Name {
  const char* v0;
  V1LayerParameter::LayerType type;
};
// V0's type strings (the ones BVLC Caffe upgrades).
constexpr V0Name kV0Names[] = {
    {"accuracy", V1LayerParameter::ACCURACY},
    {"bnll", V1LayerParameter::BNLL},
    {"concat", V1LayerParameter::CONCAT},
    {"conv", V1LayerParameter::CONVOLUTION},
    {"data", V1LayerParameter::DATA},
    {"dropout", V1LayerParameter::DROPOUT},
    {"euclidean_loss", V1LayerParameter::EUCLIDEAN_LOSS},
    {"flatten", V1LayerParameter::FLATTEN},
    {"hdf5_data", V1LayerParameter::HDF5_DATA},
    {"hdf5_output", V1LayerParameter::HDF5_OUTPUT},
    {"im2col", V1LayerParameter::IM2COL},
    {"images", V1LayerParameter::IMAGE_DATA},
    {"infogain_loss", V1LayerParameter::INFOGAIN_LOSS},
    {"innerproduct", V1LayerParameter::INNER_PRODUCT},
    {"lrn", V1LayerParameter::LRN},
    {"multinomial_logistic_loss", V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS},
    {"pool", V1LayerParameter::POOLING},
    {"relu", V1LayerParameter::RELU},
    {"sigmoid", V1LayerParameter::SIGMOID},
    {"softmax", V1LayerParameter::SOFTMAX},
    {"softmax_loss", V1LayerParameter::SOFTMAX_LOSS},
    {"split", V1LayerParameter::SPLIT},
    {"tanh", V1LayerParameter::TANH},
    {"window_data", V1LayerParameter::WINDOW_DATA},
};

// The parameters of layer types of Caffe, NVCaffe and the SSD fork that
// Cortado does not have, by field name.
constexpr std::pair<const char*, const char*> kUnavailable[] = {
    {"annotated_data_param", "AnnotatedData"},
    {"detection_evaluate_param", "DetectionEvaluate"},
    {"detection_output_param", "DetectionOutput"},
    {"detectnet_augmentation_param", "DetectNetTransformation"},
    {"detectnet_groundtruth_param", "DetectNetTransformation"},
    {"memory_data_param", "MemoryData"},
    {"multibox_loss_param", "MultiBoxLoss"},
    {"norm_param", "Normalize"},
    {"prior_box_param", "PriorBox"},
    {"python_param", "Python"},
    {"trt_param", "TRT"},
    {"video_data_param", "VideoData"},
    {"window_data_param", "WindowData"},
};

// ---- where things are -------------------------------------------------------------

// The file being upgraded, and where the net being upgraded sits inside it
// (a net file: at the root; a solver: under net_param, test_net_param[i], ...).
struct Where {
  std::string file;
  const SourceInfo* info = nullptr;
  const pb::Descriptor* root = nullptr;  // the file's message type
  std::string prefix;                    // the net's path from the root, "" or "net_param."

  // "file:line: " of a field path relative to the net (or the solver).
  std::string at(const std::string& path) const {
    const int line = info && root ? info->root_field_line(root, prefix + path) : 0;
    return line > 0 ? str_cat(file, ":", line, ": ") : file + ": ";
  }
};

std::string v0_layer_label(const V1LayerParameter& l) {
  const std::string& name = l.has_layer() ? l.layer().name() : l.name();
  const std::string& type = l.has_layer() ? l.layer().type() : std::string();
  return str_cat("layer '", name, "'", type.empty() ? "" : " (" + type + ")");
}

// ---- V0 ---------------------------------------------------------------------------

bool needs_v0(const NetParameter& net) {
  for (const V1LayerParameter& l : net.layers())
    if (l.has_layer()) return true;
  return false;
}

// Folds V0 "padding" layers into the convolution or pooling layer each feeds.
// `kept` gets, for each layer left, its index in the input.
void fold_padding(const Where& w, NetParameter* net, std::vector<int>* kept) {
  std::map<std::string, int> producer;  // blob -> the last layer writing it (-1: a net input)
  for (const std::string& in : net->input()) producer[in] = -1;
  const NetParameter in = *net;
  net->clear_layers();
  for (int i = 0; i < in.layers_size(); ++i) {
    const V1LayerParameter& l = in.layers(i);
    const bool padding = l.has_layer() && l.layer().type() == "padding";
    V1LayerParameter* out = nullptr;
    if (!padding) {
      out = net->add_layers();
      *out = l;
      kept->push_back(i);
    }
    for (int j = 0; j < l.bottom_size(); ++j) {
      const auto it = producer.find(l.bottom(j));
      if (it == producer.end() || it->second < 0) continue;
      const V1LayerParameter& src = in.layers(it->second);
      if (!src.has_layer() || src.layer().type() != "padding") continue;
      const std::string path = str_cat("layers[", i, "].bottom[", j, "]");
      if (padding || (l.layer().type() != "conv" && l.layer().type() != "pool"))
        fail(w.at(path), v0_layer_label(l), ": takes the output of padding layer '", src.layer().name(),
             "'; only a conv or pool layer can (its pad is set from the padding layer)");
      if (l.bottom_size() != 1)
        fail(w.at(path), v0_layer_label(l), ": a layer fed by padding layer '", src.layer().name(),
             "' must have one bottom, has ", l.bottom_size());
      if (src.bottom_size() != 1 || src.top_size() != 1)
        fail(w.at(str_cat("layers[", it->second, "]")), v0_layer_label(src),
             ": a padding layer must have one bottom and one top");
      out->mutable_layer()->set_pad(src.layer().pad());
      out->set_bottom(j, src.bottom(0));
    }
    for (const std::string& t : l.top()) producer[t] = i;
  }
}

// One V0 layer (inside `l`) as a V1 layer; `path` is its path ("layers[3]").
void upgrade_v0_layer(const Where& w, const std::string& path, V1LayerParameter* l) {
  const V0LayerParameter v0 = l->layer();
  const std::string label = v0_layer_label(*l);
  l->clear_layer();
  const std::string& type = v0.type();
  const auto bad = [&](const char* field) {
    fail(w.at(path + ".layer." + field), label, ": V0 field '", field, "' does not apply to type '", type, "'");
  };
  // A field that applies to one type: set() where it does, an error elsewhere.
  const auto only = [&](bool applies, const char* field, auto set) {
    if (applies) set();
    else bad(field);
  };
  if (v0.has_name()) l->set_name(v0.name());
  if (v0.has_type()) {
    bool found = false;
    for (const V0Name& n : kV0Names) {
      if (type == n.v0) {
        l->set_type(n.type);
        found = true;
      }
    }
    if (!found) fail(w.at(path + ".layer.type"), "layer '", v0.name(), "': unknown V0 layer type '", type, "'");
  }
  const bool conv = type == "conv", ip = type == "innerproduct", pool = type == "pool", lrn = type == "lrn";
  // window_data's own fields have nowhere to go: Cortado has no WindowData
  // layer, and the layer factory says so for the upgraded type.
  const bool window = type == "window_data";
  for (const BlobProto& b : v0.blobs()) *l->add_blobs() = b;
  for (float v : v0.blobs_lr()) l->add_blobs_lr(v);
  for (float v : v0.weight_decay()) l->add_weight_decay(v);
  // The fields of both a convolution and an inner product: set(p) on the layer's parameter.
  const auto conv_or_ip = [&](const char* field, auto set) {
    if (conv) set(l->mutable_convolution_param());
    else if (ip) set(l->mutable_inner_product_param());
    else bad(field);
  };
  if (v0.has_num_output()) conv_or_ip("num_output", [&](auto* p) { p->set_num_output(v0.num_output()); });
  if (v0.has_biasterm()) conv_or_ip("biasterm", [&](auto* p) { p->set_bias_term(v0.biasterm()); });
  if (v0.has_weight_filler()) {
    conv_or_ip("weight_filler", [&](auto* p) { *p->mutable_weight_filler() = v0.weight_filler(); });
  }
  if (v0.has_bias_filler()) conv_or_ip("bias_filler", [&](auto* p) { *p->mutable_bias_filler() = v0.bias_filler(); });
  if (v0.has_pad()) {
    if (conv) l->mutable_convolution_param()->add_pad(v0.pad());
    else if (pool) l->mutable_pooling_param()->set_pad(v0.pad());
    else bad("pad");
  }
  if (v0.has_kernelsize()) {
    if (conv) l->mutable_convolution_param()->add_kernel_size(v0.kernelsize());
    else if (pool) l->mutable_pooling_param()->set_kernel_size(v0.kernelsize());
    else bad("kernelsize");
  }
  if (v0.has_group()) only(conv, "group", [&] { l->mutable_convolution_param()->set_group(v0.group()); });
  if (v0.has_stride()) {
    if (conv) l->mutable_convolution_param()->add_stride(v0.stride());
    else if (pool) l->mutable_pooling_param()->set_stride(v0.stride());
    else bad("stride");
  }
  if (v0.has_pool()) {
    if (!pool) bad("pool");
    // The two enums number MAX, AVE and STOCHASTIC alike.
    l->mutable_pooling_param()->set_pool(static_cast<PoolingParameter::PoolMethod>(v0.pool()));
  }
  if (v0.has_dropout_ratio()) {
    if (type == "dropout") l->mutable_dropout_param()->set_dropout_ratio(v0.dropout_ratio());
    else bad("dropout_ratio");
  }
  if (v0.has_local_size()) only(lrn, "local_size", [&] { l->mutable_lrn_param()->set_local_size(v0.local_size()); });
  if (v0.has_alpha()) only(lrn, "alpha", [&] { l->mutable_lrn_param()->set_alpha(v0.alpha()); });
  if (v0.has_beta()) only(lrn, "beta", [&] { l->mutable_lrn_param()->set_beta(v0.beta()); });
  if (v0.has_k()) only(lrn, "k", [&] { l->mutable_lrn_param()->set_k(v0.k()); });
  if (v0.has_source()) {
    if (type == "data") l->mutable_data_param()->set_source(v0.source());
    else if (type == "hdf5_data") l->mutable_hdf5_data_param()->set_source(v0.source());
    else if (type == "images") l->mutable_image_data_param()->set_source(v0.source());
    else if (type == "infogain_loss") l->mutable_infogain_loss_param()->set_source(v0.source());
    else if (!window) bad("source");
  }
  // The transformation fields go to transform_param whatever the type (as in Caffe).
  if (v0.has_scale()) l->mutable_transform_param()->set_scale(v0.scale());
  if (v0.has_meanfile()) l->mutable_transform_param()->set_mean_file(v0.meanfile());
  if (v0.has_cropsize()) l->mutable_transform_param()->set_crop_size(v0.cropsize());
  if (v0.has_mirror()) l->mutable_transform_param()->set_mirror(v0.mirror());
  if (v0.has_batchsize()) {
    if (type == "data") l->mutable_data_param()->set_batch_size(v0.batchsize());
    else if (type == "hdf5_data") l->mutable_hdf5_data_param()->set_batch_size(v0.batchsize());
    else if (type == "images") l->mutable_image_data_param()->set_batch_size(v0.batchsize());
    else if (!window) bad("batchsize");
  }
  if (v0.has_rand_skip()) {
    if (type == "data") l->mutable_data_param()->set_rand_skip(v0.rand_skip());
    else if (type == "images") l->mutable_image_data_param()->set_rand_skip(v0.rand_skip());
    else bad("rand_skip");
  }
  if (v0.has_shuffle_images()) {
    only(type == "images", "shuffle_images", [&] { l->mutable_image_data_param()->set_shuffle(v0.shuffle_images()); });
  }
  if (v0.has_new_height()) {
    only(type == "images", "new_height", [&] { l->mutable_image_data_param()->set_new_height(v0.new_height()); });
  }
  if (v0.has_new_width()) {
    only(type == "images", "new_width", [&] { l->mutable_image_data_param()->set_new_width(v0.new_width()); });
  }
  if (v0.has_new_num()) bad("new_num");
  if (v0.has_new_channels()) bad("new_channels");
  if (v0.has_concat_dim()) {
    only(type == "concat", "concat_dim", [&] { l->mutable_concat_param()->set_concat_dim(v0.concat_dim()); });
  }
  if (!window) {
    if (v0.has_det_fg_threshold()) bad("det_fg_threshold");
    if (v0.has_det_bg_threshold()) bad("det_bg_threshold");
    if (v0.has_det_fg_fraction()) bad("det_fg_fraction");
    if (v0.has_det_context_pad()) bad("det_context_pad");
    if (v0.has_det_crop_mode()) bad("det_crop_mode");
  }
  if (v0.has_hdf5_output_param()) {
    only(type == "hdf5_output", "hdf5_output_param", [&] { *l->mutable_hdf5_output_param() = v0.hdf5_output_param(); });
  }
}

// ---- V1 ---------------------------------------------------------------------------

// The legacy transformation fields of a V1 DATA or IMAGE_DATA layer move to
// its transform_param. Returns whether any moved.
template <typename P>
bool move_transform_fields(const Where& w, const std::string& path, const char* pname, const std::string& layer,
                           P* p, TransformationParameter* tp) {
  bool moved = false;
  const auto conflict = [&](const char* field) {
    fail(w.at(path + "." + pname + "." + field), "layer '", layer, "': ", pname, ".", field,
         " and transform_param.", field, " are both set, to different values");
  };
  if (p->has_scale()) {
    if (tp->has_scale() && tp->scale() != p->scale()) conflict("scale");
    tp->set_scale(p->scale());
    p->clear_scale();
    moved = true;
  }
  if (p->has_mean_file()) {
    if (tp->has_mean_file() && tp->mean_file() != p->mean_file()) conflict("mean_file");
    tp->set_mean_file(p->mean_file());
    p->clear_mean_file();
    moved = true;
  }
  if (p->has_crop_size()) {
    if (tp->has_crop_size() && tp->crop_size() != p->crop_size()) conflict("crop_size");
    tp->set_crop_size(p->crop_size());
    p->clear_crop_size();
    moved = true;
  }
  if (p->has_mirror()) {
    if (tp->has_mirror() && tp->mirror() != p->mirror()) conflict("mirror");
    tp->set_mirror(p->mirror());
    p->clear_mirror();
    moved = true;
  }
  return moved;
}

bool needs_data_upgrade(const V1LayerParameter& l) {
  const auto legacy = [](const auto& p) {
    return p.has_scale() || p.has_mean_file() || p.has_crop_size() || p.has_mirror();
  };
  return (l.type() == V1LayerParameter::DATA && legacy(l.data_param())) ||
         (l.type() == V1LayerParameter::IMAGE_DATA && legacy(l.image_data_param()));
}

// One V1 layer as a layer of today's format.
void upgrade_v1_layer(const V1LayerParameter& v1, LayerParameter* l) {
  *l->mutable_bottom() = v1.bottom();
  *l->mutable_top() = v1.top();
  if (v1.has_name()) l->set_name(v1.name());
  *l->mutable_include() = v1.include();
  *l->mutable_exclude() = v1.exclude();
  if (v1.has_type()) l->set_type(V1LayerTypeName(v1.type()));
  *l->mutable_blobs() = v1.blobs();
  const auto spec = [l](int i) {
    while (l->param_size() <= i) l->add_param();
    return l->mutable_param(i);
  };
  for (int i = 0; i < v1.param_size(); ++i) spec(i)->set_name(v1.param(i));
  for (int i = 0; i < v1.blob_share_mode_size(); ++i)
    spec(i)->set_share_mode(v1.blob_share_mode(i) == V1LayerParameter::PERMISSIVE ? ParamSpec::PERMISSIVE
                                                                                   : ParamSpec::STRICT);
  for (int i = 0; i < v1.blobs_lr_size(); ++i) spec(i)->set_lr_mult(v1.blobs_lr(i));
  for (int i = 0; i < v1.weight_decay_size(); ++i) spec(i)->set_decay_mult(v1.weight_decay(i));
  *l->mutable_loss_weight() = v1.loss_weight();
  // Every *_param of V1 (transform_param and loss_param included) has a
  // field of the same name and message type in LayerParameter.
  const pb::Descriptor* d = V1LayerParameter::descriptor();
  const pb::Reflection* from = v1.GetReflection();
  const pb::Reflection* to = l->GetReflection();
  for (int k = 0; k < d->field_count(); ++k) {
    const pb::FieldDescriptor* f = d->field(k);
    if (f->type() != pb::FieldDescriptor::TYPE_MESSAGE || f->is_repeated() || !from->HasField(v1, f)) continue;
    const pb::FieldDescriptor* g = LayerParameter::descriptor()->FindFieldByName(f->name());
    if (!g || g->message_type() != f->message_type()) continue;  // `layer` (V0): upgraded before
    to->MutableMessage(l, g)->CopyFrom(from->GetMessage(v1, f));
  }
}

// ---- the whole net ------------------------------------------------------------------

struct NetChanges {
  bool v0 = false, v1 = false, data = false, input = false, batch_norm = false;
  bool any() const { return v0 || v1 || data || input || batch_norm; }
  std::string what() const {
    std::string s;
    const auto add = [&s](bool on, const char* w) {
      if (on) s += (s.empty() ? "" : ", ") + std::string(w);
    };
    add(v0, "V0 layers");
    add(v1 && !v0, "V1 layers");
    add(data, "data layers' transformation fields");
    add(input, "net input fields");
    add(batch_norm, "BatchNorm ParamSpecs");
    return s;
  }
};

bool needs_input(const NetParameter& n) {
  return n.input_size() > 0 || n.input_shape_size() > 0 || n.input_dim_size() > 0;
}

bool needs_batch_norm(const LayerParameter& l) {
  if (l.type() != "BatchNorm" || l.param_size() != 3) return false;
  for (const ParamSpec& p : l.param())
    if (p.lr_mult() != 0.f || p.decay_mult() != 0.f) return true;
  return false;
}

// The net-level inputs as an Input layer, first in the net.
void upgrade_input(const Where& w, NetParameter* net, std::vector<LayerOrigin>* origins) {
  const int n = net->input_size();
  const bool shapes = net->input_shape_size() > 0, dims = net->input_dim_size() > 0;
  if (shapes && dims) fail(w.at("input_dim"), "input_shape and input_dim are both set; give one of them");
  if (shapes && net->input_shape_size() != n)
    fail(w.at("input_shape"), n, " inputs and ", net->input_shape_size(), " input_shape entries; give one per input");
  if (dims && net->input_dim_size() != 4 * n)
    fail(w.at("input_dim"), n, " inputs and ", net->input_dim_size(),
         " input_dim values; give 4 per input (N, C, H, W)");
  if (shapes || dims) {
    LayerParameter input;
    input.set_name("input");
    input.set_type("Input");
    for (int i = 0; i < n; ++i) {
      input.add_top(net->input(i));
      BlobShape* s = input.mutable_input_param()->add_shape();
      if (shapes) {
        *s = net->input_shape(i);
      } else {
        for (int k = 0; k < 4; ++k) s->add_dim(net->input_dim(4 * i + k));
      }
    }
    net->mutable_layer()->Add(std::move(input));
    for (int i = net->layer_size() - 1; i > 0; --i) net->mutable_layer()->SwapElements(i, i - 1);
    origins->insert(origins->begin(), LayerOrigin{LayerOrigin::kNetInput, 0});
  }
  net->clear_input();
  net->clear_input_shape();
  net->clear_input_dim();
}

NetChanges upgrade_net(const Where& w, NetParameter* net, std::vector<LayerOrigin>* origins) {
  NetChanges c;
  origins->clear();
  for (int i = 0; i < net->layer_size(); ++i) origins->push_back({LayerOrigin::kLayer, i});
  if (net->layers_size() > 0) {
    if (net->layer_size() > 0)
      fail(w.at("layers"), "the net has both 'layer' entries and the older 'layers' (V1) entries; write all "
           "layers in one format (upgrade_net_proto_text converts a V1 net)");
    std::vector<int> kept;  // V1 index of each layer left after folding the padding layers
    if (needs_v0(*net)) {
      c.v0 = true;
      fold_padding(w, net, &kept);
      for (int i = 0; i < net->layers_size(); ++i) {
        if (net->layers(i).has_layer())
          upgrade_v0_layer(w, str_cat("layers[", kept[i], "]"), net->mutable_layers(i));
      }
    } else {
      for (int i = 0; i < net->layers_size(); ++i) kept.push_back(i);
    }
    for (int i = 0; i < net->layers_size(); ++i) {
      V1LayerParameter* l = net->mutable_layers(i);
      if (!needs_data_upgrade(*l)) continue;
      c.data = true;
      const std::string path = str_cat("layers[", kept[i], "]");
      if (l->type() == V1LayerParameter::DATA)
        move_transform_fields(w, path, "data_param", l->name(), l->mutable_data_param(), l->mutable_transform_param());
      else
        move_transform_fields(w, path, "image_data_param", l->name(), l->mutable_image_data_param(),
                              l->mutable_transform_param());
    }
    c.v1 = true;
    origins->clear();
    for (int i = 0; i < net->layers_size(); ++i) {
      upgrade_v1_layer(net->layers(i), net->add_layer());
      origins->push_back({LayerOrigin::kV1Layer, kept[i]});
    }
    net->clear_layers();
  }
  if (needs_input(*net)) {
    c.input = true;
    upgrade_input(w, net, origins);
  }
  for (LayerParameter& l : *net->mutable_layer()) {
    if (!needs_batch_norm(l)) continue;
    c.batch_norm = true;
    for (ParamSpec& p : *l.mutable_param()) {
      p.set_lr_mult(0.f);
      p.set_decay_mult(0.f);
    }
  }
  return c;
}

const char* solver_type_name(SolverParameter::SolverType t) {
  switch (t) {
    case SolverParameter::SGD: return "SGD";
    case SolverParameter::NESTEROV: return "Nesterov";
    case SolverParameter::ADAGRAD: return "AdaGrad";
    case SolverParameter::RMSPROP: return "RMSProp";
    case SolverParameter::ADADELTA: return "AdaDelta";
    case SolverParameter::ADAM: return "Adam";
  }
  return "SGD";
}

const Tree* nested_tree(const SourceInfo* info, const pb::Descriptor* d, const char* field, int index) {
  if (!info || !info->root_tree()) return nullptr;
  return info->root_tree()->GetTreeForNested(d->FindFieldByName(field), index);
}

void log_upgrade(const std::string& file, const std::string& what, bool text, const char* tool) {
  if (text)
    INFO_LOG << "upgraded " << what << " in " << file << "; run " << tool << " to write the upgraded file";
  else
    INFO_LOG << "upgraded " << what << " in " << file;
}

// ---- notes ----------------------------------------------------------------------------

// "name (what Cortado does instead)" items of one note line.
class Note {
 public:
  void add(const std::string& item) { items_ += (items_.empty() ? "" : "; ") + item; }
  // A per-layer field set in `count` layers.
  void add_layers(int count, const std::string& field, const std::string& instead) {
    if (count > 0) add(str_cat(field, " in ", count, count == 1 ? " layer" : " layers", " (", instead, ")"));
  }
  std::string line(const std::string& file) const {
    if (items_.empty()) return "";
    const std::string s = str_cat(file, ": accepted and not used by Cortado: ", items_);
    INFO_LOG << s;
    return s;
  }

 private:
  std::string items_;
};

}  // namespace

// ---- public -----------------------------------------------------------------------------

std::string V1LayerTypeName(V1LayerParameter::LayerType type) {
  for (const V1Name& n : kV1Names)
    if (n.type == type) return n.name;
  return "";
}

const char* UnavailableLayerType(const std::string& field) {
  for (const auto& u : kUnavailable)
    if (field == u.first) return u.second;
  return nullptr;
}

bool NetNeedsUpgrade(const NetParameter& net) {
  if (net.layers_size() > 0 || needs_input(net)) return true;
  for (const LayerParameter& l : net.layer())
    if (needs_batch_norm(l)) return true;
  return false;
}

bool SolverNeedsUpgrade(const SolverParameter& s) {
  if (s.has_solver_type()) return true;
  if (s.has_net_param() && NetNeedsUpgrade(s.net_param())) return true;
  if (s.has_train_net_param() && NetNeedsUpgrade(s.train_net_param())) return true;
  for (const NetParameter& n : s.test_net_param())
    if (NetNeedsUpgrade(n)) return true;
  return false;
}

bool UpgradeNet(const std::string& file, NetParameter* net, std::vector<LayerOrigin>* origins,
                const SourceInfo* info) {
  Where w{file, info, NetParameter::descriptor(), ""};
  std::vector<LayerOrigin> o;
  const bool changed = upgrade_net(w, net, &o).any();
  if (origins) *origins = std::move(o);
  return changed;
}

namespace {

// Upgrades the solver; `changes` gets what changed, for the log line.
bool upgrade_solver(const std::string& file, SolverParameter* s, SourceInfo* info, std::string* changes) {
  const pb::Descriptor* d = SolverParameter::descriptor();
  if (s->has_solver_type()) {
    const std::string type = solver_type_name(s->solver_type());
    if (s->has_type() && s->type() != type)
      fail(Where{file, info, d, ""}.at("solver_type"), "solver_type: ",
           SolverParameter::SolverType_Name(s->solver_type()), " and type: \"", s->type(),
           "\" name different solvers; give only type (solver_type is Caffe's deprecated enum for it)");
    s->set_type(type);
    s->clear_solver_type();
    *changes = "solver_type";
  }
  const auto net = [&](NetParameter* n, const char* field, int index) {
    const std::string prefix = index < 0 ? str_cat(field, ".") : str_cat(field, "[", index, "].");
    std::vector<LayerOrigin> origins;
    const NetChanges c = upgrade_net(Where{file, info, d, prefix}, n, &origins);
    if (!c.any()) return;
    *changes += (changes->empty() ? "" : ", ") + c.what() + " of " + prefix.substr(0, prefix.size() - 1);
    if (const Tree* t = nested_tree(info, d, field, index)) info->set_layer_origins(t, std::move(origins));
  };
  if (s->has_net_param()) net(s->mutable_net_param(), "net_param", -1);
  if (s->has_train_net_param()) net(s->mutable_train_net_param(), "train_net_param", -1);
  for (int i = 0; i < s->test_net_param_size(); ++i) net(s->mutable_test_net_param(i), "test_net_param", i);
  return !changes->empty();
}

}  // namespace

bool UpgradeSolver(const std::string& file, SolverParameter* solver, const SourceInfo* info) {
  // Origins are recorded only in a SourceInfo the caller lets us change.
  SourceInfo copy = info ? *info : SourceInfo();
  std::string changes;
  return upgrade_solver(file, solver, info ? &copy : nullptr, &changes);
}

void UpgradeOnRead(const std::string& file, pb::Message* msg, SourceInfo* info, bool text) {
  if (auto* net = dynamic_cast<NetParameter*>(msg)) {
    std::vector<LayerOrigin> origins;
    const NetChanges c = upgrade_net(Where{file, info, NetParameter::descriptor(), ""}, net, &origins);
    if (c.any()) {
      log_upgrade(file, c.what(), text, "upgrade_net_proto_text");
      if (info && info->root_tree()) info->set_layer_origins(info->root_tree(), std::move(origins));
    }
    if (text) NoteAcceptedFields(file, *net);
  } else if (auto* solver = dynamic_cast<SolverParameter*>(msg)) {
    std::string changes;
    if (upgrade_solver(file, solver, info, &changes)) log_upgrade(file, changes, text, "upgrade_solver_proto_text");
    if (text) {
      NoteAcceptedFields(file, *solver);
      if (solver->has_net_param()) NoteAcceptedFields(file + " (net_param)", solver->net_param());
      if (solver->has_train_net_param()) NoteAcceptedFields(file + " (train_net_param)", solver->train_net_param());
      for (int i = 0; i < solver->test_net_param_size(); ++i)
        NoteAcceptedFields(str_cat(file, " (test_net_param[", i, "])"), solver->test_net_param(i));
    }
  }
}

std::string NoteAcceptedFields(const std::string& file, const NetParameter& net) {
  Note note;
  if (net.has_eltwise_mem_sharing())
    note.add("eltwise_mem_sharing (NVCaffe's buffer sharing between Eltwise layers; each Eltwise top has its own "
             "memory here)");
  if (net.has_default_conv_algos_override())
    note.add("default_conv_algos_override (cuDNN convolutions measure their algorithms with cudnnFind)");
  if (net.has_default_cudnn_math_override())
    note.add("default_cudnn_math_override (cuDNN math follows forward_math and backward_math)");
  if (net.has_reduce_buckets())
    note.add("reduce_buckets of the net (the gradients are summed in the solver's reduce_buckets buckets)");
  int debug = 0, math = 0, algos = 0, bn_engine = 0, dropout_engine = 0;
  for (const LayerParameter& l : net.layer()) {
    debug += l.has_debug();
    math += l.has_cudnn_math_override();
    algos += l.convolution_param().has_cudnn_convolution_algo_seeker() ||
             l.convolution_param().has_conv_algos_override();
    bn_engine += l.batch_norm_param().has_engine();
    dropout_engine += l.dropout_param().has_engine();
  }
  note.add_layers(debug, "debug", "no per-layer debug output; trainer grad_stats reports each layer's gradients");
  note.add_layers(math, "cudnn_math_override", "cuDNN math follows forward_math and backward_math");
  note.add_layers(algos, "convolution_param.cudnn_convolution_algo_seeker/conv_algos_override",
                  "cuDNN convolutions measure their algorithms with cudnnFind");
  note.add_layers(bn_engine, "batch_norm_param.engine", "BatchNorm runs Cortado's own CPU and GPU code");
  note.add_layers(dropout_engine, "dropout_param.engine", "Dropout runs Cortado's own CPU and GPU code");
  return note.line(file);
}

std::string NoteAcceptedFields(const std::string& file, const SolverParameter& s) {
  Note note;
  if (s.has_layer_wise_reduce())
    note.add("layer_wise_reduce (the gradient sums always overlap backward, in reduce_buckets buckets)");
  if (s.has_test_and_snapshot_last_epochs())
    note.add("test_and_snapshot_last_epochs (tests follow test_interval and snapshots follow snapshot only)");
  if (s.has_eval_type() || s.has_ap_version() || s.has_show_per_class_result())
    note.add("eval_type/ap_version/show_per_class_result (Cortado has no detection layers; tests report the test "
             "nets' outputs)");
  return note.line(file);
}

}  // namespace cortado
