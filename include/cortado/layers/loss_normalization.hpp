#pragma once
// The normalization of Caffe's losses, shared by every loss layer that reads
// loss_param: which mode a LossParameter asks for, and the divisor it means.

#include <algorithm>

#include "cortado.pb.h"

namespace cortado {

/// loss_param.normalization if set; else the deprecated `normalize` (true:
/// VALID, false: BATCH_SIZE); else VALID.
inline LossParameter::NormalizationMode NormalizationMode(const LossParameter& p) {
  if (p.has_normalization()) return p.normalization();
  if (p.has_normalize()) return p.normalize() ? LossParameter::VALID : LossParameter::BATCH_SIZE;
  return LossParameter::VALID;
}

/// The divisor of the summed loss, at least 1: FULL every position, VALID the
/// positions not ignored, BATCH_SIZE the outer count, NONE 1.
inline double LossNormalizer(LossParameter::NormalizationMode mode, double full, double valid, double batch) {
  double n = 1;
  switch (mode) {
    case LossParameter::FULL: n = full; break;
    case LossParameter::VALID: n = valid; break;
    case LossParameter::BATCH_SIZE: n = batch; break;
    case LossParameter::NONE: n = 1; break;
  }
  return std::max(1.0, n);
}

}  // namespace cortado
