#pragma once
// NCHW stand-ins for channels-last blobs (blob.hpp, Layout), for a layer
// whose code computes in NCHW and that the layout plan (net_layout.hpp)
// hands NHWC blobs: Caffe's im2col Convolution on the CPU or the GPU, where
// cuDNN's native NHWC path does not apply. Correct, not fast: each pass
// copies its operands through the stand-ins.
//
//   stand_ins_.Reshape(bottom);            // in the pass: the NCHW view
//   stand_ins_.In(bottom, kData, t, ...);  // bottom data -> stand-ins
//   ... compute on stand_ins_.view() ...
//   stand_ins_.Out(top, kDiff, t, ...);    // stand-ins' diff -> blobs
//
// A blob that is not channels last stands for itself (no copy).

#include <memory>
#include <vector>

#include "cortado/blob.hpp"

struct CUstream_st;

namespace cortado {

class NchwStandIns;

/// A layer's passes through NCHW stand-ins of its bottoms and tops, for the
/// CPU paths of the layers that the layout plan may hand channels-last blobs:
/// the same arithmetic as with NCHW blobs, so the same bits.
///
///   if (stand_ins_.Use(bottom, top)) {
///     stand_ins_.Forward(bottom, top, t, gpu, stream, [&](auto& b, auto& t) { Forward_cpu(b, t); });
///     return;
///   }
class NchwPasses;

class NchwStandIns {
 public:
  enum Part { kData = 0, kDiff = 1 };

  /// Sets the stand-ins of `blobs`; returns the view (stand-ins and blobs).
  const std::vector<Blob*>& Reshape(const std::vector<Blob*>& blobs);
  const std::vector<Blob*>& view() const { return view_; }
  /// Whether any blob of the last Reshape has a stand-in.
  bool any() const;
  /// Copies `part` of each channels-last blob into its stand-in (In) or back
  /// (Out), as type t, on the host (stream null and gpu false) or on the
  /// device on `stream`.
  /// In and Out copy only the blobs whose entry in `which` is true when given.
  void In(const std::vector<Blob*>& blobs, Part part, Type t, bool gpu, CUstream_st* stream,
          const std::vector<bool>* which = nullptr);
  void Out(const std::vector<Blob*>& blobs, Part part, Type t, bool gpu, CUstream_st* stream,
           const std::vector<bool>* which = nullptr);

  /// Copies `part` of `from` into `to` (same shape), moving values from
  /// from's layout to to's.
  static void Copy(const Blob& from, Blob* to, Part part, Type t, bool gpu, CUstream_st* stream);

 private:
  std::vector<std::unique_ptr<Blob>> own_;  // null where the blob stands for itself
  std::vector<Blob*> view_;
};

class NchwPasses {
 public:
  /// Whether a bottom or a top is channels last; then sets the stand-ins.
  bool Use(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  /// The bottoms' data in, run(bottom view, top view), the tops' data out.
  template <typename F>
  void Forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Type t, bool gpu, CUstream_st* s,
               F&& run) {
    bottoms_.In(bottom, NchwStandIns::kData, t, gpu, s);
    run(bottoms_.view(), tops_.view());
    tops_.Out(top, NchwStandIns::kData, t, gpu, s);
  }
  /// The tops' data and diff in, and the data of each bottom that is not
  /// also a top (an in-place layer's bottom holds its top now: its stand-in
  /// keeps the forward's values), run(top view, bottom view), the diffs of
  /// the bottoms that propagate_down names out. `fwd` and `bwd` are the
  /// forward and backward types.
  template <typename F>
  void Backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Type fwd, Type bwd, bool gpu, CUstream_st* s, F&& run) {
    tops_.In(top, NchwStandIns::kData, fwd, gpu, s);
    tops_.In(top, NchwStandIns::kDiff, bwd, gpu, s);
    std::vector<bool> refresh(bottom.size());
    for (size_t i = 0; i < bottom.size(); ++i) {
      refresh[i] = true;
      for (const Blob* t : top) refresh[i] = refresh[i] && t != bottom[i];
    }
    bottoms_.In(bottom, NchwStandIns::kData, fwd, gpu, s, &refresh);
    run(tops_.view(), bottoms_.view());
    bottoms_.Out(bottom, NchwStandIns::kDiff, bwd, gpu, s, &propagate_down);
  }

 private:
  NchwStandIns bottoms_, tops_;
};

}  // namespace cortado
