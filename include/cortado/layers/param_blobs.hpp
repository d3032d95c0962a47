#pragma once
// The learned parameter blobs of the layers with a weight and an optional
// bias (Convolution, Deconvolution, InnerProduct, Embed) and the filler
// checks they share with Scale and Bias. Header-only; included by those
// layers' .cpp files.

#include <memory>
#include <string>
#include <vector>

#include "cortado/layer.hpp"
#include "cortado/layers/filler.hpp"

namespace cortado {

/// A field error on `field`.type if the filler is not valid (checked before
/// anything is allocated).
inline void CheckFiller(const LayerBase& layer, const FillerParameter& filler, const std::string& field) {
  try {
    ValidateFiller(filler, "");
  } catch (const Error& e) {
    layer.field_error(field + ".type", e.what());
  }
}

/// A weight of shape `weight` and, when bias_term, a bias of shape `bias`.
/// Blobs already present (loaded or shared) must match in count ("blobs":
/// "expected N parameter blobs (bias_term B), got K") and shape ("weight
/// shape S does not match the expected T<weight_note>", "bias shape S does
/// not match the expected T"); otherwise make(shape) creates each and it is
/// filled from <param>.weight_filler and <param>.bias_filler.
template <typename Make>
void SetUpWeightAndBias(const LayerBase& layer, std::vector<std::shared_ptr<Blob>>* blobs,
                        const std::vector<int>& weight, const std::string& weight_note, bool bias_term,
                        const std::vector<int>& bias, const FillerParameter& weight_filler,
                        const FillerParameter& bias_filler, const std::string& param, Make&& make) {
  if (!blobs->empty()) {
    const size_t want = bias_term ? 2 : 1;
    if (blobs->size() != want) {
      layer.field_error("blobs", "expected ", want, " parameter blobs (bias_term ", bias_term, "), got ",
                        blobs->size());
    }
    if ((*blobs)[0]->shape() != weight) {
      layer.field_error("blobs", "weight shape ", (*blobs)[0]->shape_string(), " does not match the expected ",
                        shape_string(weight), weight_note);
    }
    if (bias_term && (*blobs)[1]->shape() != bias) {
      layer.field_error("blobs", "bias shape ", (*blobs)[1]->shape_string(), " does not match the expected ",
                        shape_string(bias));
    }
    return;
  }
  blobs->push_back(make(weight));
  Fill(weight_filler, blobs->back().get(), param + ".weight_filler");
  if (bias_term) {
    blobs->push_back(make(bias));
    Fill(bias_filler, blobs->back().get(), param + ".bias_filler");
  }
}

}  // namespace cortado
