#pragma once
// Which engines a net's layers ran their last passes on. A switch such as
// cuDNN's BatchNorm, the graph API or channel padding may fall back layer by
// layer (a shape cuDNN refuses, memory it cannot alias); a benchmark that
// times a switch reports these counts beside its speed, so that a run where
// the switch fell back everywhere is not taken for a measurement of it
// (`trainer time`'s "time:" line; scripts/gpu_check.sh stage d).
#include <string>

namespace cortado {

class Net;

struct EngineUse {
  int batch_norms = 0;                // BatchNorm layers
  int batch_norm_cudnn = 0;           // whose last forward ran on cuDNN
  int batch_norm_cudnn_backward = 0;  // whose last backward did
  int cudnn_convolutions = 0;         // convolutions on the cuDNN engine
  int conv_graph_passes = 0;          // their passes on graph-API plans (3 a layer at most)
  int conv_padded = 0;                // convolutions on padded input channels
  int nhwc_blobs = 0;                 // channels-last blobs
};

/// Counts `net`'s engines after its last forward and backward.
EngineUse CountEngines(const Net& net);

/// "bn_layers=53 bn_cudnn=53 bn_cudnn_backward=53 cudnn_convs=53
/// conv_graph_passes=159 conv_padded=1 nhwc_blobs=160": key=value words.
std::string EngineUseWords(const EngineUse& use);

}  // namespace cortado
