// The one table of layer types, sorted by type string, with each type's
// traits (layer_traits.hpp). Adding a layer is one include and one line here.
#include <algorithm>

#include "cortado/layer_registry.hpp"
#include "cortado/layer_traits.hpp"
#include "cortado/layers/absval_layer.hpp"
#include "cortado/layers/accuracy_layer.hpp"
#include "cortado/layers/argmax_layer.hpp"
#include "cortado/layers/batch_norm_layer.hpp"
#include "cortado/layers/batch_reindex_layer.hpp"
#include "cortado/layers/bias_layer.hpp"
#include "cortado/layers/bnll_layer.hpp"
#include "cortado/layers/clip_layer.hpp"
#include "cortado/layers/concat_layer.hpp"
#include "cortado/layers/contrastive_loss_layer.hpp"
#include "cortado/layers/convolution_layer.hpp"
#include "cortado/layers/crop_layer.hpp"
#include "cortado/layers/cudnn_convolution_layer.hpp"
#include "cortado/layers/data_layer.hpp"
#include "cortado/layers/deconvolution_layer.hpp"
#include "cortado/layers/dropout_layer.hpp"
#include "cortado/layers/dummy_data_layer.hpp"
#include "cortado/layers/eltwise_layer.hpp"
#include "cortado/layers/elu_layer.hpp"
#include "cortado/layers/embed_layer.hpp"
#include "cortado/layers/euclidean_loss_layer.hpp"
#include "cortado/layers/exp_layer.hpp"
#include "cortado/layers/filter_layer.hpp"
#include "cortado/layers/flatten_layer.hpp"
#include "cortado/layers/hdf5_data_layer.hpp"
#include "cortado/layers/hdf5_output_layer.hpp"
#include "cortado/layers/hinge_loss_layer.hpp"
#include "cortado/layers/im2col_layer.hpp"
#include "cortado/layers/image_data_layer.hpp"
#include "cortado/layers/infogain_loss_layer.hpp"
#include "cortado/layers/inner_product_layer.hpp"
#include "cortado/layers/input_layer.hpp"
#include "cortado/layers/log_layer.hpp"
#include "cortado/layers/lrn_layer.hpp"
#include "cortado/layers/lstm_layer.hpp"
#include "cortado/layers/lstm_unit_layer.hpp"
#include "cortado/layers/multinomial_logistic_loss_layer.hpp"
#include "cortado/layers/mvn_layer.hpp"
#include "cortado/layers/parameter_layer.hpp"
#include "cortado/layers/permute_layer.hpp"
#include "cortado/layers/pooling_layer.hpp"
#include "cortado/layers/power_layer.hpp"
#include "cortado/layers/prelu_layer.hpp"
#include "cortado/layers/reduction_layer.hpp"
#include "cortado/layers/relu_layer.hpp"
#include "cortado/layers/reshape_layer.hpp"
#include "cortado/layers/rnn_layer.hpp"
#include "cortado/layers/scale_layer.hpp"
#include "cortado/layers/sigmoid_cross_entropy_loss_layer.hpp"
#include "cortado/layers/sigmoid_layer.hpp"
#include "cortado/layers/silence_layer.hpp"
#include "cortado/layers/slice_layer.hpp"
#include "cortado/layers/softmax_layer.hpp"
#include "cortado/layers/softmax_with_loss_layer.hpp"
#include "cortado/layers/split_layer.hpp"
#include "cortado/layers/spp_layer.hpp"
#include "cortado/layers/swish_layer.hpp"
#include "cortado/layers/tanh_layer.hpp"
#include "cortado/layers/threshold_layer.hpp"
#include "cortado/layers/tile_layer.hpp"

namespace cortado {

namespace {
struct Entry {
  const char* type;
  std::unique_ptr<LayerBase> (*make)(const LayerParameter&, const Context*);
  LayerTraits traits = {};  // a line without traits: none
};

// The traits of a line, by name: Traits().shard("data_param").batch("data_param").
struct Traits {
  LayerTraits t;
  constexpr Traits shard(const char* param) const { Traits r = *this; r.t.shard_param = param; return r; }
  constexpr Traits batch(const char* param) const { Traits r = *this; r.t.batch_param = param; return r; }
  constexpr Traits rank_file(const char* param) const { Traits r = *this; r.t.rank_file_param = param; return r; }
  constexpr Traits gemm() const { Traits r = *this; r.t.gemm = true; return r; }
  constexpr Traits net_input() const { Traits r = *this; r.t.net_input = true; return r; }
  constexpr Traits reads_top(bool (*when)(const LayerParameter&)) const {
    Traits r = *this;
    r.t.backward_reads_top_data = when;
    return r;
  }
  constexpr Traits sums_into_bottom(bool (*when)(const LayerParameter&)) const {
    Traits r = *this;
    r.t.sums_into_bottom = when;
    return r;
  }
  constexpr Traits layout(LayoutRole (*role)(const LayerParameter&)) const {
    Traits r = *this;
    r.t.layout = role;
    return r;
  }
  constexpr operator LayerTraits() const { return t; }
};
constexpr LayerTraits kNone{};

// The data plan's predicates (layer_traits.hpp).
bool Never(const LayerParameter&) { return false; }
bool InPlace(const LayerParameter& p) { return p.bottom_size() > 0 && p.top_size() > 0 && p.bottom(0) == p.top(0); }
// In place with global statistics BatchNorm keeps no copy of x.
bool BatchNormReadsTop(const LayerParameter& p) {
  return InPlace(p) && p.batch_norm_param().has_use_global_stats() && p.batch_norm_param().use_global_stats();
}
bool EltwiseReadsTop(const LayerParameter& p) { return p.eltwise_param().operation() == EltwiseParameter::PROD; }
bool EltwiseSums(const LayerParameter& p) { return p.eltwise_param().operation() == EltwiseParameter::SUM; }

// The layout plan's roles (layer_traits.hpp, net_layout.hpp).
LayoutRole AnyLayout(const LayerParameter&) { return kAnyLayout; }
LayoutRole NhwcCapable(const LayerParameter&) { return kNhwcCapable; }
// cuDNN's engine runs NHWC natively; Caffe's im2col engine through NCHW copies.
LayoutRole ConvolutionLayout(const LayerParameter& p) {
  return p.convolution_param().engine() == ConvolutionParameter::CAFFE ? kNhwcCapable : kNhwcAnchor;
}
// One (C) parameter on axis 1: the channel of each value, whatever the order.
LayoutRole ScaleLayout(const LayerParameter& p) {
  const ScaleParameter& s = p.scale_param();
  return p.bottom_size() == 1 && s.axis() == 1 && s.num_axes() == 1 ? kNhwcCapable : kNchwOnly;
}
// Along the channels (axis 1): runs of channels, in either order.
LayoutRole ConcatLayout(const LayerParameter& p) {
  const ConcatParameter& c = p.concat_param();
  return (c.has_concat_dim() ? static_cast<int>(c.concat_dim()) : c.axis()) == 1 ? kNhwcCapable : kNchwOnly;
}
LayoutRole SliceLayout(const LayerParameter& p) {
  const SliceParameter& c = p.slice_param();
  return (c.has_slice_dim() ? static_cast<int>(c.slice_dim()) : c.axis()) == 1 ? kNhwcCapable : kNchwOnly;
}
// MAX and AVE with one top (no argmax top, whose indexes are NCHW's).
LayoutRole PoolingLayout(const LayerParameter& p) {
  return p.pooling_param().pool() != PoolingParameter::STOCHASTIC && p.top_size() == 1 ? kNhwcCapable : kNchwOnly;
}
LayoutRole NhwcSource(const LayerParameter&) { return kNhwcSource; }
// A constant filler gives the same values in either layout; the layer
// draws a random one in NCHW order and moves it (dummy_data_layer.hpp).
LayoutRole DummyDataLayout(const LayerParameter&) { return kNhwcSource; }
LayoutRole BiasLayout(const LayerParameter& p) {
  const BiasParameter& b = p.bias_param();
  return p.bottom_size() == 1 && b.axis() == 1 && b.num_axes() == 1 ? kNhwcCapable : kNchwOnly;
}

const Entry kRegistry[] = {
    {"AbsVal", &MakeLayer<AbsValLayer>, Traits().layout(&AnyLayout)},
    {"Accuracy", &MakeLayer<AccuracyLayer>},
    {"ArgMax", &MakeLayer<ArgMaxLayer>},
    {"BNLL", &MakeLayer<BNLLLayer>, Traits().layout(&AnyLayout)},
    {"BatchNorm", &MakeLayer<BatchNormLayer>, Traits().reads_top(&BatchNormReadsTop).layout(&NhwcCapable)},
    {"BatchReindex", &MakeLayer<BatchReindexLayer>},
    {"Bias", &MakeLayer<BiasLayer>, Traits().layout(&BiasLayout)},
    {"Clip", &MakeLayer<ClipLayer>, Traits().layout(&AnyLayout)},
    {"Concat", &MakeLayer<ConcatLayer>, Traits().layout(&ConcatLayout)},
    {"ContrastiveLoss", &MakeLayer<ContrastiveLossLayer>},
    {"Convolution", &MakeConvolution, Traits().gemm().reads_top(&Never).layout(&ConvolutionLayout)},
    {"Crop", &MakeLayer<CropLayer>},
    {"Data", &MakeLayer<DataLayer>, Traits().shard("data_param").batch("data_param").layout(NhwcSource)},
    {"Deconvolution", &MakeLayer<DeconvolutionLayer>, Traits().gemm().reads_top(&Never)},
    {"Dropout", &MakeLayer<DropoutLayer>},
    {"DummyData", &MakeLayer<DummyDataLayer>, Traits().batch("dummy_data_param").layout(DummyDataLayout)},
    {"ELU", &MakeLayer<ELULayer>, Traits().layout(&AnyLayout)},
    {"Eltwise", &MakeLayer<EltwiseLayer>,
     Traits().reads_top(&EltwiseReadsTop).sums_into_bottom(&EltwiseSums).layout(&AnyLayout)},
    {"Embed", &MakeLayer<EmbedLayer>},
    {"EuclideanLoss", &MakeLayer<EuclideanLossLayer>},
    {"Exp", &MakeLayer<ExpLayer>, Traits().layout(&AnyLayout)},
    {"Filter", &MakeLayer<FilterLayer>},
    {"Flatten", &MakeLayer<FlattenLayer>},
    {"HDF5Data", &MakeLayer<HDF5DataLayer>, Traits().shard("hdf5_data_param")},
    {"HDF5Output", &MakeLayer<HDF5OutputLayer>, Traits().rank_file("hdf5_output_param")},
    {"HingeLoss", &MakeLayer<HingeLossLayer>},
    {"Im2col", &MakeLayer<Im2colLayer>},
    {"ImageData", &MakeLayer<ImageDataLayer>, Traits().shard("image_data_param").layout(NhwcSource)},
    {"InfogainLoss", &MakeLayer<InfogainLossLayer>},
    {"InnerProduct", &MakeLayer<InnerProductLayer>, Traits().gemm().reads_top(&Never)},
    {"Input", &MakeLayer<InputLayer>, Traits().net_input().batch("input_param")},
    {"LRN", &MakeLayer<LRNLayer>},
    {"LSTM", &MakeLayer<LSTMLayer>},
    {"LSTMUnit", &MakeLayer<LSTMUnitLayer>},
    {"LayoutConvert", &MakeLayer<LayoutConvertLayer>},
    {"Log", &MakeLayer<LogLayer>, Traits().layout(&AnyLayout)},
    {"MVN", &MakeLayer<MVNLayer>},
    {"MultinomialLogisticLoss", &MakeLayer<MultinomialLogisticLossLayer>},
    {"PReLU", &MakeLayer<PReLULayer>},
    {"Parameter", &MakeLayer<ParameterLayer>},
    {"Permute", &MakeLayer<PermuteLayer>},
    {"Pooling", &MakeLayer<PoolingLayer>, Traits().layout(&PoolingLayout)},
    {"Power", &MakeLayer<PowerLayer>, Traits().layout(&AnyLayout)},
    {"RNN", &MakeLayer<RNNLayer>},
    {"ReLU", &MakeLayer<ReLULayer>, Traits().layout(&AnyLayout)},
    {"Reduction", &MakeLayer<ReductionLayer>},
    {"Reshape", &MakeLayer<ReshapeLayer>},
    {"SPP", &MakeLayer<SPPLayer>},
    {"Scale", &MakeLayer<ScaleLayer>, Traits().reads_top(&Never).layout(&ScaleLayout)},
    {"Sigmoid", &MakeLayer<SigmoidLayer>, Traits().layout(&AnyLayout)},
    {"SigmoidCrossEntropyLoss", &MakeLayer<SigmoidCrossEntropyLossLayer>},
    {"Silence", &MakeLayer<SilenceLayer>},
    {"Slice", &MakeLayer<SliceLayer>, Traits().layout(&SliceLayout)},
    {"Softmax", &MakeLayer<SoftmaxLayer>},
    {"SoftmaxWithLoss", &MakeLayer<SoftmaxWithLossLayer>},
    {"Split", &MakeLayer<SplitLayer>, Traits().layout(&AnyLayout)},
    {"Swish", &MakeLayer<SwishLayer>, Traits().layout(&AnyLayout)},
    {"TanH", &MakeLayer<TanHLayer>, Traits().layout(&AnyLayout)},
    {"Threshold", &MakeLayer<ThresholdLayer>, Traits().layout(&AnyLayout)},
    {"Tile", &MakeLayer<TileLayer>},
};

const Entry* find(const std::string& type) {
  for (const Entry& e : kRegistry)
    if (type == e.type) return &e;
  return nullptr;
}
}  // namespace

std::vector<std::string> LayerTypes() {
  std::vector<std::string> v;
  for (const Entry& e : kRegistry) v.push_back(e.type);
  return v;
}

bool IsKnownLayerType(const std::string& type) { return find(type) != nullptr; }

const LayerTraits& layer_traits(const std::string& type) {
  const Entry* e = find(type);
  return e ? e->traits : kNone;
}

bool BackwardReadsTopData(const LayerParameter& layer) {
  const auto when = layer_traits(layer.type()).backward_reads_top_data;
  return !when || when(layer);
}

LayoutRole LayerLayoutRole(const LayerParameter& layer) {
  const auto role = layer_traits(layer.type()).layout;
  return role ? role(layer) : kNchwOnly;
}

bool SumsIntoBottom(const LayerParameter& layer) {
  const auto when = layer_traits(layer.type()).sums_into_bottom;
  return when && when(layer);
}

std::unique_ptr<LayerBase> CreateLayer(const LayerParameter& param, const Context* ctx) {
  const Entry* e = find(param.type());
  if (!e) {
    std::string known;
    for (const Entry& k : kRegistry) known += std::string(known.empty() ? "" : ", ") + k.type;
    throw FieldError(param.name(), param.type(), "type",
                     str_cat("unknown layer type '", param.type(), "'; known types: ", known));
  }
  if (!is_supported_pair(param.forward_type(), param.backward_type()))
    throw FieldError(param.name(), param.type(), "forward_type",
                     str_cat("the pair (", type_name(param.forward_type()), ", ", type_name(param.backward_type()),
                             ") is not supported; DOUBLE pairs only with DOUBLE and BFLOAT16 only with BFLOAT16"));
  return e->make(param, ctx);
}

}  // namespace cortado
