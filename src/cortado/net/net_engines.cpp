#include "cortado/net/net_engines.hpp"

#include "cortado/layers/batch_norm_layer.hpp"
#include "cortado/layers/cudnn_convolution_layer.hpp"
#include "cortado/net/net.hpp"

namespace cortado {

namespace {

// The layer classes are templates on the type pair: each pair is tried.
#define CORTADO_COUNT_BATCH_NORM_(X, F, B)                                  \
  if (auto* bn = dynamic_cast<const BatchNormLayer<F, B>*>(X.layer)) {     \
    X.use->batch_norms += 1;                                                \
    X.use->batch_norm_cudnn += bn->cudnn_ran();                             \
    X.use->batch_norm_cudnn_backward += bn->cudnn_backward_ran();           \
  }
#ifdef CORTADO_USE_CUDA
#define CORTADO_COUNT_CONVOLUTION_(X, F, B)                                    \
  if (auto* conv = dynamic_cast<const CuDNNConvolutionLayer<F, B>*>(X.layer)) { \
    X.use->cudnn_convolutions += 1;                                            \
    X.use->conv_graph_passes += conv->graph_api_passes();                      \
    X.use->conv_padded += conv->padded_channels() > 0;                         \
  }
#endif

struct Visit {
  const LayerBase* layer;
  EngineUse* use;
};

}  // namespace

EngineUse CountEngines(const Net& net) {
  EngineUse use;
  for (const auto& l : net.layers()) {
    const Visit v{l.get(), &use};
    CORTADO_FOR_EACH_PAIR(CORTADO_COUNT_BATCH_NORM_, v)
#ifdef CORTADO_USE_CUDA
    CORTADO_FOR_EACH_PAIR(CORTADO_COUNT_CONVOLUTION_, v)
#endif
  }
  for (const auto& b : net.blobs()) use.nhwc_blobs += b->layout() == Layout::NHWC;
  return use;
}

std::string EngineUseWords(const EngineUse& u) {
  return str_cat("bn_layers=", u.batch_norms, " bn_cudnn=", u.batch_norm_cudnn,
                 " bn_cudnn_backward=", u.batch_norm_cudnn_backward, " cudnn_convs=", u.cudnn_convolutions,
                 " conv_graph_passes=", u.conv_graph_passes, " conv_padded=", u.conv_padded,
                 " nhwc_blobs=", u.nhwc_blobs);
}

}  // namespace cortado
