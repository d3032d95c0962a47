// The switches (switches.hpp): the table, the text of flags turned into
// fields, the checks the parser does not make, and the retired variables.
#include "cortado/switches.hpp"

#include <cmath>
#include <algorithm>
#include <cctype>
#include <mutex>

#include <glog/logging.h>

#include "cortado/common.hpp"
#include "cortado/util/cpu_parallel.hpp"
#include "cortado/util/env.hpp"
#include "cortado/util/gemm_bf16.hpp"

namespace cortado {

namespace pb = google::protobuf;

namespace {

constexpr uint32_t kMaxWorkspaceMb = 1u << 24;  // 16 TiB: far above any device, and no overflow in bytes

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// "0|1|all" -> "0, 1 or all".
std::string choices(const std::string& values) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t bar; (bar = values.find('|', start)) != std::string::npos; start = bar + 1)
    parts.push_back(values.substr(start, bar - start));
  parts.push_back(values.substr(start));
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : i + 1 == parts.size() ? " or " : ", ") + parts[i];
  return out;
}

// The message and field that `path` ("cudnn.api") names inside `root`,
// the messages on the way created.
std::pair<pb::Message*, const pb::FieldDescriptor*> Field(pb::Message* root, const std::string& path) {
  pb::Message* m = root;
  size_t start = 0;
  for (size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1) {
    const pb::FieldDescriptor* f = m->GetDescriptor()->FindFieldByName(path.substr(start, dot - start));
    CORTADO_CHECK(f && f->message_type()) << "switch field " << path;
    m = m->GetReflection()->MutableMessage(m, f);
  }
  const pb::FieldDescriptor* f = m->GetDescriptor()->FindFieldByName(path.substr(start));
  CORTADO_CHECK(f) << "switch field " << path;
  return {m, f};
}

// 1, 0, or -1 when `v` is not an on/off value.
int OnOff(const std::string& v) {
  const std::string u = upper(v);
  if (u == "1" || u == "TRUE") return 1;
  if (u == "0" || u == "FALSE") return 0;
  return -1;
}

// A decimal number that fits 32 bits, or false.
bool Unsigned(const std::string& v, uint32_t* out) {
  if (v.empty() || v.size() > 10 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  const unsigned long long n = std::stoull(v);
  if (n > 0xffffffffull) return false;
  *out = static_cast<uint32_t>(n);
  return true;
}

// The retired environment variables: each the switch (or trainer flag) that
// replaced it.
struct Retired {
  const char* variable;
  const char* replacement;
};
const Retired kRetired[] = {
    {"CORTADO_NHWC", "channels_last"},
    {"CORTADO_CUDNN_BN", "cudnn_batch_norm"},
    {"CORTADO_CUDNN_API", "cudnn_api"},
    {"CORTADO_CUDNN_PAD_CHANNELS", "cudnn_pad_channels"},
    {"CORTADO_CUDNN_WORKSPACE_MB", "cudnn_workspace_mb"},
    {"CORTADO_CUDA_GRAPHS", "cuda_graphs"},
    {"CORTADO_DEFER_STEPS", "defer_steps"},
    {"CORTADO_SYNC_LAYERS", "sync_layers"},
    {"CORTADO_SHARE_DIFFS", "share_diffs"},
    {"CORTADO_SHARE_DATA", "share_data"},
    {"CORTADO_BN_OUT_OF_PLACE", "batch_norm_out_of_place"},
    {"CORTADO_CPU_SHARE", "cpu_share"},
    {"CORTADO_CPU_BF16_DOT", "cpu_bf16_dot"},
    {"CORTADO_SCRIPTS_DIR", "the trainer's grad_stats flag --plot_script (the plot_grad_stats.py to run)"},
    {"CORTADO_PYTHON", "the trainer's grad_stats flag --python"},
    {"CORTADO_NCCL_TIMEOUT", "the solver's field collective_timeout (seconds; every engine)"},
};

const SwitchInfo* FindSwitch(const std::string& name) {
  for (const SwitchInfo& s : SwitchTable())
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace

const std::vector<SwitchInfo>& SwitchTable() {
  using S = SwitchScope;
  static const std::vector<SwitchInfo> table = {
      {"share_diffs", S::kNet, "share_diffs", "0|1", "1",
       "blobs whose gradients never live at once share one buffer; 0: each its own, as in Caffe"},
      {"share_data", S::kNet, "share_data", "0|1", "1",
       "a residual sum computes in the memory of the bottom nothing reads after it"},
      {"batch_norm_out_of_place", S::kNet, "batch_norm_out_of_place", "0|1", "1",
       "an in-place BatchNorm of a training net reads a blob of its own; 0: keeps Caffe's copy of its input"},
      {"channels_last", S::kNet, "channels_last", "0|1|all", "0",
       "1 (GPU_16BIT): 16-bit nets on a GPU store their blobs NHWC; all: every net and type (pending GPU "
       "measurement)"},
      {"sync_layers", S::kNet, "sync_layers", "0|1", "0",
       "a GPU net waits after every layer, so that a CUDA fault names its layer and pass (slow; no CUDA graphs)"},
      {"cudnn_api", S::kNet, "cudnn.api", "legacy|graph", "legacy",
       "graph: convolutions through cuDNN's graph API, plans chosen by timing (pending GPU measurement)"},
      {"cudnn_batch_norm", S::kNet, "cudnn.batch_norm", "0|1", "0",
       "with channels_last, FP16 BatchNorms of training nets on cuDNN's NHWC kernels (pending GPU measurement)"},
      {"cudnn_pad_channels", S::kNet, "cudnn.pad_channels", "0|4|8", "0",
       "channels-last convolutions pad their input channels to a multiple of 4 or 8 (pending GPU measurement)"},
      {"cudnn_workspace_mb", S::kNet, "cudnn.workspace_mb", "N", "1024",
       "the most workspace one cuDNN convolution may use, in MiB"},
      {"cuda_graphs", S::kSolver, "cuda_graphs", "0|1", "1", "replay the GPU training iterations as CUDA graphs"},
      {"defer_steps", S::kSolver, "defer_steps", "0|1", "1",
       "a GPU step's loss, overflow check and loss scale are read at the next display; 0: at every step"},
      {"collective_timeout", S::kSolver, "collective_timeout", "S", "600",
       "the most seconds a rank waits in one collective for the other ranks before it ends the job; 0: no limit"},
      {"cpu_share", S::kProcess, "set_cpu_share", "0|1", "1",
       "CPU layers follow the cores other processes leave free; 0: every thread, OpenBLAS's threads"},
      {"cpu_bf16_dot", S::kProcess, "set_cpu_bf16_dot", "0|1", "1",
       "BF16 CPU GEMMs on AVX-512 BF16 where the CPU has it; 0: widened to FP32 for OpenBLAS"},
  };
  return table;
}

void Switches::Set(const std::string& name, const std::string& value, const std::string& prefix) {
  const SwitchInfo* sw = FindSwitch(name);
  if (!sw) {
    std::string names;
    for (const SwitchInfo& s : SwitchTable()) names += (names.empty() ? "" : ", ") + std::string(s.name);
    fail(prefix, name, ": not a switch (the switches: ", names, ")");
  }
  const std::string values = sw->values;
  auto bad = [&](const std::string& why) { fail(prefix, name, "=", value, ": ", why); };
  if (sw->scope == SwitchScope::kProcess) {
    const int on = OnOff(value);
    if (on < 0) bad("expected " + choices(values));
    (name == "cpu_share" ? cpu_share_ : cpu_bf16_dot_) = on;
  } else {
    pb::Message* root = sw->scope == SwitchScope::kNet ? static_cast<pb::Message*>(&net_) : &solver_;
    const auto [m, f] = Field(root, sw->field);
    const pb::Reflection* r = m->GetReflection();
    if (f->type() == pb::FieldDescriptor::TYPE_BOOL) {
      const int on = OnOff(value);
      if (on < 0) bad("expected " + choices(values));
      r->SetBool(m, f, on == 1);
    } else if (f->type() == pb::FieldDescriptor::TYPE_ENUM) {
      // The flag's words (0, 1, all; legacy, graph), or the field's names in any case.
      const pb::EnumValueDescriptor* e = f->enum_type()->FindValueByName(upper(value));
      uint32_t n = 0;
      if (!e && Unsigned(value, &n) && values.find(value) != std::string::npos)
        e = f->enum_type()->FindValueByNumber(static_cast<int>(n));
      if (!e) {
        std::string names;
        for (int i = 0; i < f->enum_type()->value_count(); ++i)
          names += str_cat(i ? ", " : "", f->enum_type()->value(i)->name());
        bad(str_cat("expected ", choices(values), " (", sw->field, ": ", names, ")"));
      }
      r->SetEnum(m, f, e);
    } else if (f->type() == pb::FieldDescriptor::TYPE_FLOAT) {
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(v) || v < 0 || v > 3.0e38)
        bad(str_cat("expected a number of seconds, at least 0 (", sw->field, "; 0: no limit)"));
      r->SetFloat(m, f, static_cast<float>(v));
    } else {
      uint32_t n = 0;
      if (!Unsigned(value, &n)) bad(str_cat("expected a whole number (", sw->field, ")"));
      r->SetUInt32(m, f, n);
      for (const auto& [field, msg] : CheckNetSwitches(net_))
        if (field == sw->field) bad(msg);
    }
  }
  given_.emplace_back(name, value);
}

bool Switches::empty() const { return given_.empty(); }

void Switches::Apply(NetParameter* net) const { net->MergeFrom(net_); }

void Switches::Apply(SolverParameter* solver) const { solver->MergeFrom(solver_); }

void Switches::ApplyToProcess() const {
  if (cpu_share_ >= 0) set_cpu_share(cpu_share_ == 1);
  if (cpu_bf16_dot_ >= 0) set_cpu_bf16_dot(cpu_bf16_dot_ == 1);
}

std::string Switches::Summary() const {
  std::string out;
  for (const auto& [name, value] : given_) out += str_cat(out.empty() ? "" : " ", "--", name, "=", value);
  return out;
}

std::vector<std::pair<std::string, std::string>> CheckNetSwitches(const NetParameter& net) {
  std::vector<std::pair<std::string, std::string>> bad;
  const uint32_t pad = net.cudnn().pad_channels();
  if (pad != 0 && pad != 4 && pad != 8) bad.emplace_back("cudnn.pad_channels", str_cat("expected 0, 4 or 8, got ", pad));
  const uint32_t mb = net.cudnn().workspace_mb();
  if (mb > kMaxWorkspaceMb)
    bad.emplace_back("cudnn.workspace_mb", str_cat("expected a number of MiB from 0 to ", kMaxWorkspaceMb, ", got ", mb));
  return bad;
}

std::vector<std::string> RetiredVariableWarnings() {
  std::vector<std::string> lines;
  for (const Retired& r : kRetired) {
    const char* v = env_value(r.variable);
    if (!v) continue;
    const SwitchInfo* sw = FindSwitch(r.replacement);
    std::string instead = r.replacement;
    if (sw && sw->scope == SwitchScope::kNet) {
      instead = str_cat("the net's field ", sw->field, " (trainer --", sw->name, ")");
    } else if (sw && sw->scope == SwitchScope::kSolver) {
      instead = str_cat("the solver's field ", sw->field, " (trainer --", sw->name, ")");
    } else if (sw) {
      instead = str_cat("trainer --", sw->name, " (Python: cortado.", sw->field, ")");
    }
    lines.push_back(str_cat(r.variable, "=", v, " is no longer read; set ", instead, " instead"));
  }
  return lines;
}

void WarnRetiredVariables() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const std::string& line : RetiredVariableWarnings()) LOG(WARNING) << line;
  });
}

}  // namespace cortado
