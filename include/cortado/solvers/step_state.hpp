#pragma once
// A step's decision, written once for the host and the device: skip it or
// not (Inf/NaN in the gradients), the unscale and clipping factor, and the
// loss-scale bookkeeping after it (back off on a skip, grow after `window`
// clean steps). Solver::ApplyUpdate runs DecideStep on the host; a deferred
// step (Solver::Step between displays on the GPU) runs it in a one-thread
// kernel, so that the iteration never waits for the device: the update reads
// the decision (StepControl) from device memory, and the host reads the
// StepRecords of the steps since the last display only when it displays.
#include "cortado/util/hd_math.hpp"

namespace cortado {

/// The most deferred steps between two reads of their records.
constexpr int kMaxDeferredSteps = 256;

/// The solver fields a decision reads (SolverParameter's, fixed for a run).
struct StepRule {
  bool dynamic = false;        // dynamic_loss_scale
  bool skip_overflow = false;  // dynamic_loss_scale or skip_nonfinite_steps
  float backoff = 0.5f;        // loss_scale_backoff, _min, _growth, _max
  float min = 1;
  float growth = 2;
  float max = 1;
  int window = 2000;           // loss_scale_window
  double clip = -1;            // clip_gradients; < 0: no clipping
  int iter_size = 1;
  int ranks = 1;
};

/// What carries from step to step: the loss scale the next backward uses,
/// the clean steps since it last changed, the steps skipped so far.
struct StepState {
  float scale = 1;
  int clean = 0;
  int skipped = 0;
};

/// What one iteration did, as the log tells it. Plain data, the same bytes on
/// the host and the device.
struct StepRecord {
  double loss = 0;         // the weighted loss tops summed over the iter_size passes
  double clip_norm = 0;    // the unscaled L2 norm, when clipped
  double clip_factor = 1;  // clip_gradients / clip_norm, when clipped
  float scale_used = 0;    // the loss scale of this iteration's backward
  float scale_after = 0;   // the loss scale after the step
  int skipped = 0;         // the update was skipped (Inf/NaN)
  int clipped = 0;
  int grown = 0;           // the scale grew after `window` clean steps
  int pad = 0;
};

/// The decision the update runs with.
struct StepControl {
  double factor = 0;  // 1 / (S * iter_size * ranks), times the clipping factor
  int skip = 0;       // leave weights and history as they are
  int pad = 0;
};

/// Decides the step whose gradients `nonfinite` and `sumsq` (of the raw,
/// scaled gradients; read only with clipping) describe, from the state
/// before it; advances *s and fills the update half of *rec.
CORTADO_HD inline StepControl DecideStep(const StepRule& r, bool nonfinite, double sumsq, StepState* s,
                                         StepRecord* rec) {
  StepControl c;
  rec->scale_used = s->scale;
  if (nonfinite && r.skip_overflow) {
    ++s->skipped;
    if (r.dynamic) {
      s->clean = 0;
      const float backed = s->scale * r.backoff;
      s->scale = backed > r.min ? backed : r.min;
    }
    rec->skipped = 1;
    c.skip = 1;
  } else {
    // The unscale comes right after backward, before clipping and decay.
    const double inv = 1.0 / (static_cast<double>(s->scale) * r.iter_size * r.ranks);
    c.factor = inv;
    if (r.clip >= 0) {
      const double norm = sqrt(sumsq) * inv;
      if (norm > r.clip) {
        rec->clipped = 1;
        rec->clip_norm = norm;
        rec->clip_factor = r.clip / norm;
        c.factor *= rec->clip_factor;
      }
    }
    if (r.dynamic && ++s->clean >= r.window) {
      s->clean = 0;
      const float grown = s->scale * r.growth;
      const float capped = grown < r.max ? grown : r.max;
      if (capped != s->scale) {
        rec->grown = 1;
        s->scale = capped;
      }
    }
  }
  rec->scale_after = s->scale;
  return c;
}

}  // namespace cortado
