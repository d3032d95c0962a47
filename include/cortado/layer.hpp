#pragma once
// LayerBase is what the Net sees; Layer<Ftype, Btype> is what a layer writes.
//
// Contract of a layer:
// - The constructor only stores the LayerParameter. SetUp checks the blob
//   counts, calls LayerSetUp (validate every field first, then allocate
//   parameters) and Reshape (top shapes from bottom shapes).
// - Forward reads bottoms and parameters as Ftype and writes tops as Ftype;
//   Backward reads top diffs as Btype and writes bottom diffs and parameter
//   diffs as Btype (parameter diffs are accumulated: the solver clears them).
//   The Blob's tensors convert at a type boundary, so a layer never checks
//   what type its neighbours use. Labels and losses are read and written as
//   float whatever the pair: they stay exact.
// - Bad parameters or shapes are reported with field_error(), which names the
//   layer, its type and the field; the Net adds the prototxt file and line.
// - Layers never synchronize a device; the Net and Solver do.
// - The Net gives every layer its Context before SetUp. On a GPU context
//   Forward/Backward call Forward_gpu/Backward_gpu; a layer without a GPU path
//   (HasGpuPath() false) says so once at set-up and runs its CPU path, the
//   blobs moving between host and device as needed.
// - With the Context the Net gives the net's cuDNN choices (NetParameter's
//   cudnn field, checked by the Net), which the cuDNN engines read at
//   set-up; a layer made outside a Net has the defaults.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cortado/blob.hpp"
#include "cortado/context.hpp"

namespace cortado {

/// A user error about one field of one layer. The Net turns it into an
/// Error whose message starts with the prototxt file and line of the field.
class FieldError : public Error {
 public:
  FieldError(const std::string& layer, const std::string& type, const std::string& field,
             const std::string& message)
      : Error("layer '" + layer + "' (" + type + "): " + (field.empty() ? "" : field + ": ") + message),
        layer_(layer), field_(field), message_(message) {}
  const std::string& layer() const { return layer_; }
  /// Dotted path inside LayerParameter, e.g. "convolution_param.num_output"; may be empty.
  const std::string& field() const { return field_; }
  const std::string& message() const { return message_; }

 private:
  std::string layer_, field_, message_;
};

using BlobVec = std::vector<Blob*>;

/// The rules on a layer's blobs, one value a layer states in one line:
/// how many bottoms and tops it takes, and which bottoms force_backward may
/// make it back-propagate to. A count of -1 means "no rule".
///   BlobRules().Bottoms(1).Tops(1)                 exactly one of each
///   BlobRules().Bottoms(1, 2).MinTops(1)           one or two; at least one
///   BlobRules().Bottoms(2).Tops(1).NoForcedBackwardTo(1)   (a loss: not the labels)
struct BlobRules {
  int exact_bottom = -1, min_bottom = -1, max_bottom = -1;
  int exact_top = -1, min_top = -1, max_top = -1;
  bool tops_match_bottoms = false;  // as many tops as bottoms
  bool auto_tops = false;           // the Net adds anonymous tops up to the minimum
  /// Bit i: force_backward does not reach bottom i; bit 63 stands for every
  /// bottom from 63 on.
  uint64_t no_forced_backward = 0;

  constexpr BlobRules Bottoms(int n) const { return WithBottoms(n, -1, -1); }
  constexpr BlobRules Bottoms(int lo, int hi) const { return WithBottoms(-1, lo, hi); }
  constexpr BlobRules MinBottoms(int n) const { return WithBottoms(-1, n, -1); }
  constexpr BlobRules Tops(int n) const { return WithTops(n, -1, -1); }
  constexpr BlobRules Tops(int lo, int hi) const { return WithTops(-1, lo, hi); }
  constexpr BlobRules MinTops(int n) const { return WithTops(-1, n, -1); }
  constexpr BlobRules TopsMatchBottoms() const {
    BlobRules r = *this;
    r.tops_match_bottoms = true;
    return r;
  }
  constexpr BlobRules AutoTops() const {
    BlobRules r = *this;
    r.auto_tops = true;
    return r;
  }
  /// force_backward reaches no bottom (when `none`).
  constexpr BlobRules NoForcedBackward(bool none = true) const { return WithMask(none ? ~uint64_t{0} : 0); }
  /// force_backward does not reach bottom i (a negative i changes nothing).
  constexpr BlobRules NoForcedBackwardTo(int i) const { return WithMask(i < 0 ? 0 : Bit(i)); }
  /// force_backward reaches bottom i only.
  constexpr BlobRules ForcedBackwardOnlyTo(int i) const { return WithMask(~Bit(i)); }
  constexpr bool forced_backward_reaches(int i) const { return !(no_forced_backward & Bit(i)); }

 private:
  static constexpr uint64_t Bit(int i) { return uint64_t{1} << (i < 63 ? i : 63); }
  constexpr BlobRules WithBottoms(int exact, int lo, int hi) const {
    BlobRules r = *this;
    r.exact_bottom = exact;
    r.min_bottom = lo;
    r.max_bottom = hi;
    return r;
  }
  constexpr BlobRules WithTops(int exact, int lo, int hi) const {
    BlobRules r = *this;
    r.exact_top = exact;
    r.min_top = lo;
    r.max_top = hi;
    return r;
  }
  constexpr BlobRules WithMask(uint64_t bits) const {
    BlobRules r = *this;
    r.no_forced_backward |= bits;
    return r;
  }
};

class LayerBase {
 public:
  explicit LayerBase(const LayerParameter& param);
  virtual ~LayerBase() = default;
  LayerBase(const LayerBase&) = delete;
  LayerBase& operator=(const LayerBase&) = delete;

  /// Checks blob counts, then LayerSetUp, Reshape and the loss weights.
  void SetUp(const BlobVec& bottom, const BlobVec& top);
  void set_context(std::shared_ptr<const Context> ctx) { ctx_ = std::move(ctx); }
  const Context& context() const { return *ctx_; }
  void set_cudnn_param(const CuDNNParameter& p) { cudnn_param_ = p; }
  const CuDNNParameter& cudnn_param() const { return cudnn_param_; }
  bool on_gpu() const { return ctx_->on_gpu(); }
  /// Whether Forward_gpu/Backward_gpu are real GPU implementations (a layer
  /// whose pass macro declares them, below, says so through HasGpuPath_impl).
  bool HasGpuPath() const { return HasGpuPath_impl(); }
  virtual void LayerSetUp(const BlobVec& bottom, const BlobVec& top) {}
  virtual void Reshape(const BlobVec& bottom, const BlobVec& top) = 0;

  /// Runs the forward pass and returns the weighted loss of its tops.
  double Forward(const BlobVec& bottom, const BlobVec& top);
  void Backward(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);

  virtual const char* type() const = 0;
  const std::string& name() const { return param_.name(); }
  const LayerParameter& layer_param() const { return param_; }
  Type forward_type() const { return param_.forward_type(); }
  Type backward_type() const { return param_.backward_type(); }

  std::vector<std::shared_ptr<Blob>>& blobs() { return blobs_; }
  double loss(int top_index) const { return top_index < static_cast<int>(loss_.size()) ? loss_[top_index] : 0; }
  void set_loss(int top_index, double v);
  bool param_propagate_down(int i) const { return i < static_cast<int>(param_propagate_down_.size()) && param_propagate_down_[i]; }
  void set_param_propagate_down(int i, bool v);

  /// The layer's blob rules (CORTADO_LAYER_HEAD states them); none by default.
  virtual BlobRules blob_rules() const { return {}; }
  // The rules one at a time, Caffe's names; -1 means "no rule".
  int ExactNumBottomBlobs() const { return blob_rules().exact_bottom; }
  int MinBottomBlobs() const { return blob_rules().min_bottom; }
  int MaxBottomBlobs() const { return blob_rules().max_bottom; }
  int ExactNumTopBlobs() const { return blob_rules().exact_top; }
  int MinTopBlobs() const { return blob_rules().min_top; }
  int MaxTopBlobs() const { return blob_rules().max_top; }
  bool EqualNumBottomTopBlobs() const { return blob_rules().tops_match_bottoms; }
  /// Whether the Net creates the minimum number of tops when fewer are named.
  bool AutoTopBlobs() const { return blob_rules().auto_tops; }
  /// Whether force_backward may make this layer back-propagate to bottom i.
  bool AllowForceBackward(int bottom_index) const { return blob_rules().forced_backward_reaches(bottom_index); }
  /// Data layers: position the source as if `batches` batches had been read.
  virtual void Seek(int64_t batches) {}
  /// Sets the gradient flowing into each loss top to loss_weight * scale
  /// (the loss scale S of mixed-precision training; 1 means none).
  void ScaleLossGradients(const BlobVec& top, float scale);

  /// Throws FieldError for this layer.
  template <typename... A>
  [[noreturn]] void field_error(const std::string& field, const A&... message) const {
    throw FieldError(name(), type(), field, str_cat(message...));
  }

  /// The class a label value names, for the layers that read class labels
  /// from bottom[1] (the classifier losses, Accuracy): an integer in
  /// [0, classes). `ignore` points to the ignore_label when one is set; that
  /// value gives -1. Anything else is a field error on bottom[1] naming the
  /// value and its position.
  int ClassLabel(float v, int64_t position, int classes, const int* ignore = nullptr) const {
    if (ignore && v == static_cast<float>(*ignore)) return -1;
    const int l = static_cast<int>(v);
    if (!(v >= 0.f) || static_cast<float>(l) != v || l >= classes) {
      field_error("bottom[1]", "label value ", v, " at position ", position,
                  " is not a class index: expected an integer in [0, ", classes, ")",
                  ignore ? str_cat(" or ignore_label ", *ignore) : std::string());
    }
    return l;
  }

 protected:
  /// HasGpuPath's answer: false unless the layer has GPU passes.
  virtual bool HasGpuPath_impl() const { return false; }
  virtual void Forward_impl(const BlobVec& bottom, const BlobVec& top) = 0;
  virtual void Backward_impl(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) = 0;

  LayerParameter param_;
  std::shared_ptr<const Context> ctx_ = Context::Cpu();
  CuDNNParameter cudnn_param_;
  std::vector<std::shared_ptr<Blob>> blobs_;
  std::vector<bool> param_propagate_down_;
  std::vector<double> loss_;

 private:
  void CheckBlobCounts(const BlobVec& bottom, const BlobVec& top) const;
  void SetLossWeights(const BlobVec& top);
};

template <typename Ftype, typename Btype>
class Layer : public LayerBase {
 public:
  using LayerBase::LayerBase;

 protected:
  virtual void Forward_cpu(const BlobVec& bottom, const BlobVec& top) = 0;
  virtual void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) = 0;

  /// GPU paths; the defaults run the CPU path (see HasGpuPath).
  virtual void Forward_gpu(const BlobVec& bottom, const BlobVec& top) { Forward_cpu(bottom, top); }
  virtual void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) {
    Backward_cpu(top, propagate_down, bottom);
  }

  void Forward_impl(const BlobVec& bottom, const BlobVec& top) override {
    if (this->on_gpu()) {
      Forward_gpu(bottom, top);
    } else {
      Forward_cpu(bottom, top);
    }
  }
  void Backward_impl(const BlobVec& top, const std::vector<bool>& propagate_down,
                     const BlobVec& bottom) override {
    if (this->on_gpu()) {
      Backward_gpu(top, propagate_down, bottom);
    } else {
      Backward_cpu(top, propagate_down, bottom);
    }
  }

  /// Creates a parameter blob stored in Ftype (the solver may keep a master copy).
  std::shared_ptr<Blob> make_param(const std::vector<int>& shape) {
    return std::make_shared<Blob>(shape, type_of<Ftype>());
  }
};

// The declarations every layer class repeats, written once. No macro below
// changes the access level: each declares its members in the section where
// it stands, and the layer's header states its own `public:`, `protected:`
// and `private:` around them:
//
//   template <typename Ftype, typename Btype>
//   class TileLayer : public Layer<Ftype, Btype> {
//    public:
//     CORTADO_LAYER_HEAD(Layer, "Tile", BlobRules().Bottoms(1).Tops(1))
//     CORTADO_LAYER_SETUP
//
//    protected:
//     CORTADO_LAYER_PASSES
//
//    private:
//     int axis_ = 1;
//   };
//
// Public (as LayerBase's members they override):
//   CORTADO_LAYER_HEAD(Base, "Type", rules)
//                                 Base's constructors, type() and blob_rules()
//                                 (a BlobRules expression, which may read
//                                 this->layer_param()).
//   CORTADO_LAYER_TYPE(Base, "Type")
//                                 the same for a layer that keeps its base's
//                                 rules (a loss over LossLayer, LSTM over
//                                 RecurrentLayer).
//   CORTADO_LAYER_SETUP           the LayerSetUp and Reshape overrides of a
//                                 layer that defines both (in its .cpp).
#define CORTADO_LAYER_TYPE(Base, type_name) \
  using Base<Ftype, Btype>::Base;           \
  const char* type() const override { return type_name; }
#define CORTADO_LAYER_HEAD(Base, type_name, rules) \
  CORTADO_LAYER_TYPE(Base, type_name)              \
  BlobRules blob_rules() const override { return rules; }
#define CORTADO_LAYER_SETUP                                             \
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override; \
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

// Protected (as Layer's passes), in the class body of a Layer<Ftype, Btype>
// or of a class derived from one. With CORTADO_USE_CUDA off only the CPU
// passes are declared, so the macros read the same in both builds; with it,
// each also overrides HasGpuPath_impl: HasGpuPath() is true.
//
//   CORTADO_LAYER_PASSES          Forward_cpu and Backward_cpu; with CUDA also
//                                 Forward_gpu and Backward_gpu. The layer
//                                 defines all four.
//   CORTADO_LAYER_FORWARD_PASSES  the same, the backward passes empty (a layer
//                                 that propagates nothing): the layer defines
//                                 Forward_cpu and Forward_gpu.
//   CORTADO_LAYER_EMPTY_PASSES    all passes empty, HasGpuPath() true with CUDA
//                                 (a layer whose work is all in Reshape).
//   CORTADO_LAYER_HOST_PASSES     Forward_cpu declared, Backward_cpu empty,
//                                 HasGpuPath() true with CUDA; the GPU passes
//                                 are Layer's defaults, which run the CPU ones
//                                 (a data source that fills host memory).
//
// Private:
//   CORTADO_LAYER_WITH_OPS        ForwardWith / BackwardWith<Ops>, the passes
//                                 of a layer written once over an Ops type (its
//                                 CPU and its GPU operations behind one
//                                 interface), which its CORTADO_LAYER_PASSES
//                                 run (recurrent_ops.hpp defines those).
#define CORTADO_LAYER_CPU_PASSES_(forward_body, backward_body)                      \
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override forward_body \
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,    \
                    const BlobVec& bottom) override backward_body
#ifdef CORTADO_USE_CUDA
#define CORTADO_LAYER_HAS_GPU_PATH_ \
  bool HasGpuPath_impl() const override { return true; }
#define CORTADO_LAYER_GPU_PASSES_(forward_body, backward_body)                      \
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override forward_body \
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,    \
                    const BlobVec& bottom) override backward_body
#else
#define CORTADO_LAYER_HAS_GPU_PATH_
#define CORTADO_LAYER_GPU_PASSES_(forward_body, backward_body)
#endif
#define CORTADO_LAYER_PASSES_(forward_body, backward_body) \
  CORTADO_LAYER_HAS_GPU_PATH_                              \
  CORTADO_LAYER_CPU_PASSES_(forward_body, backward_body)   \
  CORTADO_LAYER_GPU_PASSES_(forward_body, backward_body)

#define CORTADO_LAYER_PASSES CORTADO_LAYER_PASSES_(;, ;)
#define CORTADO_LAYER_FORWARD_PASSES CORTADO_LAYER_PASSES_(;, {})
#define CORTADO_LAYER_EMPTY_PASSES CORTADO_LAYER_PASSES_({}, {})
#define CORTADO_LAYER_HOST_PASSES \
  CORTADO_LAYER_HAS_GPU_PATH_     \
  CORTADO_LAYER_CPU_PASSES_(;, {})
#define CORTADO_LAYER_WITH_OPS                                                                    \
  template <class Ops>                                                                            \
  void ForwardWith(const Ops& ops, const BlobVec& bottom, const BlobVec& top);                    \
  template <class Ops>                                                                            \
  void BackwardWith(const Ops& ops, const BlobVec& top, const std::vector<bool>& propagate_down, \
                    const BlobVec& bottom);

}  // namespace cortado
