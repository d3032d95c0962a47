// The one table of layer types, sorted by type string. Adding a layer is one
// include and one line here.
#include <algorithm>

#include "cortado/layer_factory.hpp"
#include "cortado/layers/accuracy_layer.hpp"
#include "cortado/layers/concat_layer.hpp"
#include "cortado/layers/convolution_layer.hpp"
#include "cortado/layers/cudnn_convolution_layer.hpp"
#include "cortado/layers/data_layer.hpp"
#include "cortado/layers/dropout_layer.hpp"
#include "cortado/layers/dummy_data_layer.hpp"
#include "cortado/layers/eltwise_layer.hpp"
#include "cortado/layers/flatten_layer.hpp"
#include "cortado/layers/inner_product_layer.hpp"
#include "cortado/layers/input_layer.hpp"
#include "cortado/layers/pooling_layer.hpp"
#include "cortado/layers/relu_layer.hpp"
#include "cortado/layers/reshape_layer.hpp"
#include "cortado/layers/sigmoid_layer.hpp"
#include "cortado/layers/silence_layer.hpp"
#include "cortado/layers/softmax_layer.hpp"
#include "cortado/layers/softmax_with_loss_layer.hpp"
#include "cortado/layers/split_layer.hpp"
#include "cortado/layers/tanh_layer.hpp"
// The ImageNet-net layers, registered as their files land.
#if __has_include("cortado/layers/absval_layer.hpp")
#include "cortado/layers/absval_layer.hpp"
#endif
#if __has_include("cortado/layers/argmax_layer.hpp")
#include "cortado/layers/argmax_layer.hpp"
#endif
#if __has_include("cortado/layers/batch_norm_layer.hpp")
#include "cortado/layers/batch_norm_layer.hpp"
#endif
#if __has_include("cortado/layers/bias_layer.hpp")
#include "cortado/layers/bias_layer.hpp"
#endif
#if __has_include("cortado/layers/bnll_layer.hpp")
#include "cortado/layers/bnll_layer.hpp"
#endif
#if __has_include("cortado/layers/contrastive_loss_layer.hpp")
#include "cortado/layers/contrastive_loss_layer.hpp"
#endif
#if __has_include("cortado/layers/crop_layer.hpp")
#include "cortado/layers/crop_layer.hpp"
#endif
#if __has_include("cortado/layers/deconvolution_layer.hpp")
#include "cortado/layers/deconvolution_layer.hpp"
#endif
#if __has_include("cortado/layers/elu_layer.hpp")
#include "cortado/layers/elu_layer.hpp"
#endif
#if __has_include("cortado/layers/embed_layer.hpp")
#include "cortado/layers/embed_layer.hpp"
#endif
#if __has_include("cortado/layers/euclidean_loss_layer.hpp")
#include "cortado/layers/euclidean_loss_layer.hpp"
#endif
#if __has_include("cortado/layers/exp_layer.hpp")
#include "cortado/layers/exp_layer.hpp"
#endif
#if __has_include("cortado/layers/hinge_loss_layer.hpp")
#include "cortado/layers/hinge_loss_layer.hpp"
#endif
#if __has_include("cortado/layers/infogain_loss_layer.hpp")
#include "cortado/layers/infogain_loss_layer.hpp"
#endif
#if __has_include("cortado/layers/log_layer.hpp")
#include "cortado/layers/log_layer.hpp"
#endif
#if __has_include("cortado/layers/lrn_layer.hpp")
#include "cortado/layers/lrn_layer.hpp"
#endif
#if __has_include("cortado/layers/multinomial_logistic_loss_layer.hpp")
#include "cortado/layers/multinomial_logistic_loss_layer.hpp"
#endif
#if __has_include("cortado/layers/mvn_layer.hpp")
#include "cortado/layers/mvn_layer.hpp"
#endif
#if __has_include("cortado/layers/power_layer.hpp")
#include "cortado/layers/power_layer.hpp"
#endif
#if __has_include("cortado/layers/prelu_layer.hpp")
#include "cortado/layers/prelu_layer.hpp"
#endif
#if __has_include("cortado/layers/reduction_layer.hpp")
#include "cortado/layers/reduction_layer.hpp"
#endif
#if __has_include("cortado/layers/scale_layer.hpp")
#include "cortado/layers/scale_layer.hpp"
#endif
#if __has_include("cortado/layers/sigmoid_cross_entropy_loss_layer.hpp")
#include "cortado/layers/sigmoid_cross_entropy_loss_layer.hpp"
#endif
#if __has_include("cortado/layers/slice_layer.hpp")
#include "cortado/layers/slice_layer.hpp"
#endif
#if __has_include("cortado/layers/threshold_layer.hpp")
#include "cortado/layers/threshold_layer.hpp"
#endif
#if __has_include("cortado/layers/tile_layer.hpp")
#include "cortado/layers/tile_layer.hpp"
#endif

namespace cortado {

namespace {
struct Entry {
  const char* type;
  std::unique_ptr<LayerBase> (*make)(const LayerParameter&, const Context*);
};

const Entry kRegistry[] = {
#if __has_include("cortado/layers/absval_layer.hpp")
    {"AbsVal", &MakeLayer<AbsValLayer>},
#endif
    {"Accuracy", &MakeLayer<AccuracyLayer>},
#if __has_include("cortado/layers/argmax_layer.hpp")
    {"ArgMax", &MakeLayer<ArgMaxLayer>},
#endif
#if __has_include("cortado/layers/bnll_layer.hpp")
    {"BNLL", &MakeLayer<BNLLLayer>},
#endif
#if __has_include("cortado/layers/batch_norm_layer.hpp")
    {"BatchNorm", &MakeLayer<BatchNormLayer>},
#endif
#if __has_include("cortado/layers/bias_layer.hpp")
    {"Bias", &MakeLayer<BiasLayer>},
#endif
    {"Concat", &MakeLayer<ConcatLayer>},
#if __has_include("cortado/layers/contrastive_loss_layer.hpp")
    {"ContrastiveLoss", &MakeLayer<ContrastiveLossLayer>},
#endif
    {"Convolution", &MakeConvolution},
#if __has_include("cortado/layers/crop_layer.hpp")
    {"Crop", &MakeLayer<CropLayer>},
#endif
    {"Data", &MakeLayer<DataLayer>},
#if __has_include("cortado/layers/deconvolution_layer.hpp")
    {"Deconvolution", &MakeLayer<DeconvolutionLayer>},
#endif
    {"Dropout", &MakeLayer<DropoutLayer>},
    {"DummyData", &MakeLayer<DummyDataLayer>},
#if __has_include("cortado/layers/elu_layer.hpp")
    {"ELU", &MakeLayer<ELULayer>},
#endif
    {"Eltwise", &MakeLayer<EltwiseLayer>},
#if __has_include("cortado/layers/embed_layer.hpp")
    {"Embed", &MakeLayer<EmbedLayer>},
#endif
#if __has_include("cortado/layers/euclidean_loss_layer.hpp")
    {"EuclideanLoss", &MakeLayer<EuclideanLossLayer>},
#endif
#if __has_include("cortado/layers/exp_layer.hpp")
    {"Exp", &MakeLayer<ExpLayer>},
#endif
    {"Flatten", &MakeLayer<FlattenLayer>},
#if __has_include("cortado/layers/hinge_loss_layer.hpp")
    {"HingeLoss", &MakeLayer<HingeLossLayer>},
#endif
#if __has_include("cortado/layers/infogain_loss_layer.hpp")
    {"InfogainLoss", &MakeLayer<InfogainLossLayer>},
#endif
    {"InnerProduct", &MakeLayer<InnerProductLayer>},
    {"Input", &MakeLayer<InputLayer>},
#if __has_include("cortado/layers/lrn_layer.hpp")
    {"LRN", &MakeLayer<LRNLayer>},
#endif
#if __has_include("cortado/layers/log_layer.hpp")
    {"Log", &MakeLayer<LogLayer>},
#endif
#if __has_include("cortado/layers/mvn_layer.hpp")
    {"MVN", &MakeLayer<MVNLayer>},
#endif
#if __has_include("cortado/layers/multinomial_logistic_loss_layer.hpp")
    {"MultinomialLogisticLoss", &MakeLayer<MultinomialLogisticLossLayer>},
#endif
#if __has_include("cortado/layers/prelu_layer.hpp")
    {"PReLU", &MakeLayer<PReLULayer>},
#endif
    {"Pooling", &MakeLayer<PoolingLayer>},
#if __has_include("cortado/layers/power_layer.hpp")
    {"Power", &MakeLayer<PowerLayer>},
#endif
    {"ReLU", &MakeLayer<ReLULayer>},
#if __has_include("cortado/layers/reduction_layer.hpp")
    {"Reduction", &MakeLayer<ReductionLayer>},
#endif
    {"Reshape", &MakeLayer<ReshapeLayer>},
#if __has_include("cortado/layers/scale_layer.hpp")
    {"Scale", &MakeLayer<ScaleLayer>},
#endif
    {"Sigmoid", &MakeLayer<SigmoidLayer>},
#if __has_include("cortado/layers/sigmoid_cross_entropy_loss_layer.hpp")
    {"SigmoidCrossEntropyLoss", &MakeLayer<SigmoidCrossEntropyLossLayer>},
#endif
    {"Silence", &MakeLayer<SilenceLayer>},
#if __has_include("cortado/layers/slice_layer.hpp")
    {"Slice", &MakeLayer<SliceLayer>},
#endif
    {"Softmax", &MakeLayer<SoftmaxLayer>},
    {"SoftmaxWithLoss", &MakeLayer<SoftmaxWithLossLayer>},
    {"Split", &MakeLayer<SplitLayer>},
    {"TanH", &MakeLayer<TanHLayer>},
#if __has_include("cortado/layers/threshold_layer.hpp")
    {"Threshold", &MakeLayer<ThresholdLayer>},
#endif
#if __has_include("cortado/layers/tile_layer.hpp")
    {"Tile", &MakeLayer<TileLayer>},
#endif
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
                             ") is not supported; DOUBLE pairs only with DOUBLE"));
  return e->make(param, ctx);
}

}  // namespace cortado
