#pragma once
// The switches: the settings that choose how Cortado runs a net, not what it
// computes. Each is a documented field of the net or of the solver, or (for
// the two that act on the whole process's CPU work) a library call; none is
// read from the environment.
//
//   switch                   where it lives                          values      default
//   share_diffs              NetParameter.share_diffs                0|1         1
//   share_data               NetParameter.share_data                 0|1         1
//   batch_norm_out_of_place  NetParameter.batch_norm_out_of_place    0|1         1
//   channels_last            NetParameter.channels_last              0|1|all     0 (OFF)
//   sync_layers              NetParameter.sync_layers                0|1         0
//   cudnn_api                NetParameter.cudnn.api                  legacy|graph legacy
//   cudnn_batch_norm         NetParameter.cudnn.batch_norm           0|1         0
//   cudnn_pad_channels       NetParameter.cudnn.pad_channels         0|4|8       0
//   cudnn_workspace_mb       NetParameter.cudnn.workspace_mb         MiB         1024
//   cuda_graphs              SolverParameter.cuda_graphs             0|1         1
//   defer_steps              SolverParameter.defer_steps             0|1         1
//   collective_timeout       SolverParameter.collective_timeout      seconds     600
//   cpu_share                set_cpu_share (cpu_parallel.hpp)        0|1         1
//   cpu_bf16_dot             set_cpu_bf16_dot (gemm_bf16.hpp)        0|1         1
//
// A file states the fields (`share_diffs: false`, `cudnn { api: GRAPH }`);
// from outside the files, trainer flags of the same names (--share_diffs=0,
// --cudnn_api=graph) and Python's keyword arguments give name=value text,
// which a Switches collects, checks and applies over the files' values, the
// way --precision sets the types. An on/off switch takes 0 or 1 (also false
// or true); channels_last takes 0, 1 or all, or the field's names OFF,
// GPU_16BIT and ALL; cudnn_api legacy or graph (either case).
//
// The environment variables that set these before (CORTADO_NHWC,
// CORTADO_SHARE_DIFFS, ...) are no longer read: a Net built while one is set
// logs one warning per variable naming what replaced it
// (WarnRetiredVariables).
#include <string>
#include <utility>
#include <vector>

#include "cortado.pb.h"

namespace cortado {

enum class SwitchScope { kNet, kSolver, kProcess };

struct SwitchInfo {
  const char* name;        // the flag's name: "cudnn_api"
  SwitchScope scope;
  const char* field;       // its path in NetParameter or SolverParameter ("cudnn.api"); the call for kProcess
  const char* values;      // what a flag takes: "legacy|graph"
  const char* fallback;    // the default, as a flag writes it
  const char* help;        // one line: what it does
};

/// Every switch, in the order of the table above.
const std::vector<SwitchInfo>& SwitchTable();

/// Switches given from outside the files, by name.
class Switches {
 public:
  /// Sets switch `name` (SwitchTable) from its text as a flag writes it. An
  /// unknown name, or a value it does not take, is an Error
  /// "<prefix><name>=<value>: expected ..." (the trainer's prefix is "--").
  void Set(const std::string& name, const std::string& value, const std::string& prefix = "");
  bool empty() const;
  /// Writes the net switches set over `net`'s own fields.
  void Apply(NetParameter* net) const;
  /// Writes the solver switches set over `solver`'s own fields.
  void Apply(SolverParameter* solver) const;
  /// Makes the process switches set take effect (set_cpu_share,
  /// set_cpu_bf16_dot).
  void ApplyToProcess() const;
  /// The switches set, as flags: "--channels_last=all --cudnn_api=graph"
  /// (for the log); "" when none.
  std::string Summary() const;

 private:
  NetParameter net_;        // only the fields set
  SolverParameter solver_;  // likewise
  int cpu_share_ = -1, cpu_bf16_dot_ = -1;  // -1: not set
  std::vector<std::pair<std::string, std::string>> given_;  // name, value as given
};

/// The values of `net`'s switch fields that the parser accepts but Cortado
/// does not: one (field path, message) each, e.g. ("cudnn.pad_channels",
/// "expected 0, 4 or 8, got 3"). Net::Prepare reports them with the file and
/// line; Switches::Set with the flag.
std::vector<std::pair<std::string, std::string>> CheckNetSwitches(const NetParameter& net);

/// One line per retired environment variable that is set (CORTADO_NHWC,
/// CORTADO_SHARE_DIFFS, ...; not CORTADO_LIB or the tests' own): that it is
/// no longer read, and the field and the flag that replaced it.
std::vector<std::string> RetiredVariableWarnings();

/// Logs RetiredVariableWarnings() as warnings, once per process (every Net
/// build calls it; the trainer at its start).
void WarnRetiredVariables();

}  // namespace cortado
