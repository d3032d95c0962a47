#pragma once
// Run-time precision: one net file and one solver file serve FP32, FP16 and
// BF16 training (trainer --precision=fp32|fp16|bf16).
//
// A precision is a set of defaults, written into the parsed parameters only
// where the files are silent, so that what a file states always wins:
//
//   net (the layers that state no type of their own follow these defaults):
//             default_forward_type  default_backward_type  default_*_math
//     fp32    FLOAT                 FLOAT                  FLOAT
//     fp16    FLOAT16               FLOAT16                FLOAT (Tensor Cores, FP32 accumulation)
//     bf16    BFLOAT16              BFLOAT16               FLOAT
//
//   solver:   solver_data_type FLOAT (FP32 master weights and history) for
//             all three; fp16 also dynamic_loss_scale: true (FP16's range
//             needs a loss scale; BF16 has FP32's exponent range and needs
//             none).
//
// - A layer's own forward_type, backward_type, forward_math or backward_math
//   is never touched: the defaults only reach the layers without them.
// - A net-wide default the net states (default_forward_type: FLOAT16, say)
//   is kept; ApplyPrecision returns a note where it differs from the
//   precision's, for the log.
// - A solver field the solver states (dynamic_loss_scale: false,
//   solver_data_type: FLOAT16) is kept, and noted likewise where it differs.
// - Without a precision nothing is applied: the files' own types, FLOAT
//   where they state none, as in Caffe and NVCaffe.
//
// Applying fp16 to a net and its solver gives the same parameters, field for
// field in effect, as the FP16 variant files that the model folders shipped
// before (train_val_fp16.prototxt: the four default_* fields; solver_fp16:
// solver_data_type FLOAT and dynamic_loss_scale true).
#include <string>
#include <vector>

#include "cortado.pb.h"

namespace cortado {

class Net;

enum class Precision { kFp32, kFp16, kBf16 };

/// "fp32", "fp16" or "bf16" (case-insensitive). Anything else is an Error
/// naming `flag` (e.g. "--precision"), the value and the three choices.
Precision ParsePrecision(const std::string& name, const std::string& flag = "precision");

/// "fp32", "fp16" or "bf16".
const char* PrecisionName(Precision p);

/// Sets each of the four net-wide defaults of `p` that `net` does not state.
/// Returns one note per default the net states with another value than
/// `p`'s (kept), e.g. "default_forward_type FLOAT16 (stated by the net;
/// fp32 would set FLOAT)"; empty when the net agrees or states none.
std::vector<std::string> ApplyPrecision(Precision p, NetParameter* net);

/// Sets solver_data_type and, for fp16, dynamic_loss_scale where `solver`
/// does not state them. Returns notes as for nets.
std::vector<std::string> ApplyPrecision(Precision p, SolverParameter* solver);

/// The types the layers of a built net run with, grouped by (forward type,
/// backward type, forward math, backward math), largest group first, e.g.
/// "Net 'LeNet' (TRAIN): 9 layers store FLOAT16/FLOAT16 (forward/backward)
/// and compute in FLOAT/FLOAT; 1 layer (loss) stores FLOAT/FLOAT ...".
/// A group of at most three layers names them. For the log: trainer logs it
/// for every net it builds, whether --precision was given or not.
std::string NetTypesSummary(const Net& net);

/// A solver's master weights and loss scaling as it runs them: its
/// parameter, the type of its weights and history (Solver::data_type()) and
/// its train net's global_grad_scale, e.g. "Solver: master weights and
/// history FLOAT, dynamic loss scaling (from 65536, window 2000)", or "...,
/// static loss scale 1024 (the net's global_grad_scale)", or "..., no loss
/// scaling". For the log.
std::string SolverTypesSummary(const SolverParameter& solver, Type data_type, float global_grad_scale);

}  // namespace cortado
