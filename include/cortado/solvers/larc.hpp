#pragma once
// NVCaffe's layer-wise adaptive rate control (LARC): the one definition that
// the host update (Solver::ApplyUpdate) and the device update (device_update.cu)
// both call, so that the two compute the same rate from the same sums.
//
// Per parameter blob, each iteration, from
//   g  the gradient as the rule receives it minus the weight decay: unscaled
//      (1/S), averaged over iter_size and the ranks, clipped;
//   W  the weights, H the rule's first history buffer, both before the update;
//   m  the momentum of the iteration (momentum_policy applied);
// the trust ratio is
//   t = (1 - m) * larc_eta * |W| / |g|          (t = 1 where |W| or |g| is 0)
// With larc_turbo, c = (g . H) / (|g| |H|) (0 where |g| or |H| is 0) feeds a
// running mean C = 0.95 * C + 0.05 * c kept per blob (0 at the start), and
//   t = t - 0.9 * C.
// t then takes the place of lr_mult (a blob with lr_mult <= 0 keeps lr_mult):
//   larc_policy "scale": the blob's rate is rate * t
//   larc_policy "clip":  the blob's rate is min(rate, t)
// where rate is the policy's rate of the iteration. This is NVCaffe's
// SGDSolver::GetLocalRate and ComputeUpdateValue; NVCaffe's device update
// (its main path) takes |g| before the weight decay, as here.

#include <math.h>

#include "cortado/util/hd_math.hpp"

namespace cortado {

enum class LarcPolicy : int { kOff = 0, kScale = 1, kClip = 2 };

/// One blob's sums, in double: |W|^2, |g|^2, and for larc_turbo g.H and |H|^2.
struct LarcSums {
  double w = 0, g = 0, gh = 0, h = 0;
};

/// a * b, never fused with a following add into an FMA (which the device
/// compiler would do and the host build does not): both sides round alike.
CORTADO_HD inline double larc_mul(double a, double b) { return hd::mul_rn(a, b); }

/// The trust ratio t; with `turbo`, updates the running mean *corr first.
CORTADO_HD inline double larc_trust(const LarcSums& s, double momentum, double eta, bool turbo,
                                             double* corr) {
  const double wn = sqrt(s.w), gn = sqrt(s.g);
  double t = 1;
  if (wn > 0 && gn > 0) t = larc_mul(larc_mul(1 - momentum, eta), wn) / gn;
  if (turbo) {
    const double hn = sqrt(s.h);
    const double c = gn > 0 && hn > 0 ? s.gh / larc_mul(gn, hn) : 0.0;
    *corr = larc_mul(0.95, *corr) + larc_mul(0.05, c);
    t = t - larc_mul(0.9, *corr);
  }
  return t;
}

/// The blob's rate from the policy's rate, its lr_mult and its trust ratio.
CORTADO_HD inline double larc_rate(double rate, double lr_mult, LarcPolicy policy, double trust) {
  const double local = lr_mult > 0 ? trust : lr_mult;
  if (policy == LarcPolicy::kClip) return rate < local ? rate : local;
  return larc_mul(rate, local);
}

}  // namespace cortado
