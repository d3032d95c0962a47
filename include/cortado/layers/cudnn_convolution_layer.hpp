#pragma once
// The cuDNN engine of Convolution (CUDA builds): the same layer as
// ConvolutionLayer (same prototxt fields, checks, parameter blobs, shapes and
// CPU path, all inherited), with Forward_gpu/Backward_gpu through cuDNN's
// convolution calls. Groups (cudnnSetConvolutionGroupCount), padding, stride
// and dilation are cuDNN's; the bias add and bias gradient are
// Bias's kernels (bias_layer.hpp).
//
// Types: tensors and filters are described in the storage type (Ftype for
// forward, Btype for backward); the convolution's compute type is
// forward_math / backward_math for float16 storage (FLOAT by default: FP32
// accumulation on Tensor Cores, CUDNN_TENSOR_OP_MATH; FLOAT16 asks for true
// half math), FLOAT for bfloat16 (Tensor Core math with FP32 accumulation,
// cuDNN's only choice), FLOAT for float (CUDNN_FMA_MATH: no TF32, the same arithmetic
// as the cuBLAS path) and DOUBLE for double. Weight gradients are accumulated
// by cuDNN (beta = 1, one rounding per bottom); bottom diffs are overwritten.
//
// Algorithms are chosen by measurement (cudnnFind*AlgorithmEx), once per
// (device, direction, types, shapes, geometry) in the process: a result is
// cached and shared by every layer with the same key, so a ResNet measures
// each distinct convolution once per input shape. Measuring synchronizes the
// device (it times kernels); it happens on the first pass of a new shape,
// never in steady state. The candidates are bounded by the workspace limit
// (the net's cudnn.workspace_mb, 1024 by default: on an H100, ResNet-50
// FP16 at batch 256 trains 1.24 times as fast as with 256 MiB, the NCHW
// half convolutions' fast algorithms needing room to reorder their
// operands, for 1.1 GB more peak memory; 4 GiB gains nothing more and costs
// 3 GB more, scripts/bench/trainer_variants.sh), and by half the free device
// memory at the time; the cached choices are keyed by the limit too.
//
// Layout: NCHW, or NHWC when the Net's layout plan (net_layout.hpp) made
// the bottoms and tops channels last: cuDNN's NHWC tensor format with the
// filter in KRSC, moved from Caffe's KCRS on the device in each pass (files
// keep Caffe's order); the filter gradient is computed in KRSC, moved back
// and added to the parameter's diff. A 1x1 filter has the same order in both
// (36 of ResNet-50's 53 convolutions): cuDNN reads it and accumulates its
// gradient in place, as in NCHW.
//
// Channel padding (the net's cudnn.pad_channels: 0, the default, none; 4 or
// 8): an NHWC convolution without groups whose input channels are not a
// multiple of it (ResNet's conv1 reads 3) runs on copies of its input and
// filter padded with zero channels to the next multiple, for cuDNN's Tensor
// Core kernels; the gradients' pad channels are dropped. The same sums: the
// pad channels add zeros. Off until measured against cuDNN's own handling of
// odd counts.
//
// The graph API (cudnn_conv_graph.hpp; the net's cudnn.api: GRAPH): each
// call is a backend operation graph whose execution plan is measured among
// the heuristics' engine configurations within the same workspace bound and
// cached per key for the process; where no engine runs a shape, the legacy
// call does (with a warning). Not yet run on a GPU: the legacy calls stay
// the default until it is measured.
//
// The layer takes the net's cudnn fields (LayerBase::cudnn_param()) at its
// set-up: two nets in one process may choose differently.
//
// Workspace: one buffer per stream (cuda::stream_workspace), shared by the
// cuDNN layers of the nets on that stream, whose work it orders, and grown
// to the largest workspace a chosen algorithm needs (never above the limit).
// Two ranks on one device have two streams, hence two buffers; a context
// frees its buffer when it goes.

#include <cstddef>
#include <memory>

#include "cortado/context.hpp"
#include "cortado/layer_registry.hpp"
#include "cortado/layers/convolution_layer.hpp"

namespace cortado {

#ifdef CORTADO_USE_CUDA
/// How many graph-API plans the process has cached (keyed by operation,
/// shape, the Context that measured them and the workspace bound; tests).
size_t cudnn_graph_plans_cached();

namespace detail {
struct CudnnConvPass;  // descriptors and chosen algorithm of one cuDNN call (.cpp)
}

template <typename Ftype, typename Btype>
class CuDNNConvolutionLayer : public ConvolutionLayer<Ftype, Btype> {
 public:
  explicit CuDNNConvolutionLayer(const LayerParameter& param);
  ~CuDNNConvolutionLayer() override;

  CORTADO_LAYER_SETUP

  /// The input channels cuDNN sees after padding (cudnn.pad_channels), 0
  /// where the layer does not pad.
  int padded_channels() const { return padded_c_; }
  /// How many of the three passes (forward, backward data, backward filter)
  /// run on a plan of cuDNN's graph API (the others: the legacy calls).
  int graph_api_passes() const;

 protected:
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom) override;

 private:
  // Forward in Ftype; backward data and backward filter in Btype.
  std::unique_ptr<detail::CudnnConvPass> fwd_, bwd_data_, bwd_filter_;
  // NHWC (the layout plan, net_layout.hpp): the bottoms and tops in NHWC,
  // the weights moved to cuDNN's KRSC filter each pass (w_krsc_), and the
  // parameter's diff moved to KRSC (dw_krsc_), accumulated into by cuDNN
  // (beta 1, one rounding as in NCHW) and moved back. Typed, so that no
  // buffer of another type is made.
  bool nhwc_ = false;
  bool krsc_copy_ = false;  // NHWC with a filter larger than 1x1, or padded: the KRSC blobs are used
  Blob w_krsc_{type_of<Ftype>()}, dw_krsc_{type_of<Btype>()};
  // Channel padding (cudnn.pad_channels): cuDNN sees padded_c_ input
  // channels (0: no padding) through x_pad_, the bottom padded in the
  // forward (and its padded data gradient), and through w_krsc_/dw_krsc_
  // with as many channels. The backward reads x_pad_ again where the layer
  // has one bottom and one type; otherwise it pads each bottom again, into
  // x_pad_back_ (Btype, used only where the types differ, so that no tensor
  // converts values about to be overwritten).
  int pad_multiple_ = 0;  // cudnn.pad_channels at LayerSetUp
  // Caffe's KCRS filter values (data or diff, `bytes` each) to the KRSC
  // blobs' order and channel count, or back (pad channels dropped).
  void Krsc(bool to_krsc, size_t bytes, const void* from, void* to, CUstream_st* stream) const;
  int padded_c_ = 0;
  Blob x_pad_{type_of<Ftype>()}, x_pad_back_{type_of<Btype>()};
};
#endif  // CORTADO_USE_CUDA

/// The factory entry of "Convolution": the cuDNN engine on a GPU context
/// unless convolution_param.engine is CAFFE (im2col + cuBLAS), else
/// ConvolutionLayer (the CPU path and the plain CUDA path).
inline std::unique_ptr<LayerBase> MakeConvolution(const LayerParameter& p, const Context* ctx) {
#ifdef CORTADO_USE_CUDA
  if (ctx && ctx->on_gpu() && p.convolution_param().engine() != ConvolutionParameter::CAFFE) {
    return MakeLayer<CuDNNConvolutionLayer>(p, ctx);
  }
#endif
  return MakeLayer<ConvolutionLayer>(p, ctx);
}

}  // namespace cortado
