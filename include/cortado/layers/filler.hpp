#pragma once
// Weight initializers named by FillerParameter.type:
//   constant (value), uniform (min, max), gaussian (mean, std; sparse > 0 keeps
//   on average `sparse` non-zeros per output), xavier and msra (scale from
//   fan_in = count/shape(0), fan_out = count/shape(1), by variance_norm),
//   positive_unitball (each row of shape(0) rows is positive and sums to 1).
// Values are drawn in double from the process RNG and stored in the blob's
// data type. An unknown type is an Error naming `where` and the known types.

#include <string>

#include "cortado/blob.hpp"

namespace cortado {

void Fill(const FillerParameter& param, Blob* blob, const std::string& where = "filler");

/// Throws Error (naming `where`.type, unless `where` is empty) if the filler type is unknown.
void ValidateFiller(const FillerParameter& param, const std::string& where);

}  // namespace cortado
