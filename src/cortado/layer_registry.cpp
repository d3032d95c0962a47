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

namespace cortado {

namespace {
struct Entry {
  const char* type;
  std::unique_ptr<LayerBase> (*make)(const LayerParameter&, const Context*);
};

const Entry kRegistry[] = {
    {"Accuracy", &MakeLayer<AccuracyLayer>},
    {"Concat", &MakeLayer<ConcatLayer>},
    {"Convolution", &MakeConvolution},
    {"Data", &MakeLayer<DataLayer>},
    {"Dropout", &MakeLayer<DropoutLayer>},
    {"DummyData", &MakeLayer<DummyDataLayer>},
    {"Eltwise", &MakeLayer<EltwiseLayer>},
    {"Flatten", &MakeLayer<FlattenLayer>},
    {"InnerProduct", &MakeLayer<InnerProductLayer>},
    {"Input", &MakeLayer<InputLayer>},
    {"Pooling", &MakeLayer<PoolingLayer>},
    {"ReLU", &MakeLayer<ReLULayer>},
    {"Reshape", &MakeLayer<ReshapeLayer>},
    {"Sigmoid", &MakeLayer<SigmoidLayer>},
    {"Silence", &MakeLayer<SilenceLayer>},
    {"Softmax", &MakeLayer<SoftmaxLayer>},
    {"SoftmaxWithLoss", &MakeLayer<SoftmaxWithLossLayer>},
    {"Split", &MakeLayer<SplitLayer>},
    {"TanH", &MakeLayer<TanHLayer>},
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
