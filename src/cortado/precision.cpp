#include "cortado/precision.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

#include "cortado/common.hpp"
#include "cortado/net/net.hpp"
#include "cortado/types.hpp"

namespace cortado {
namespace {

// The net-wide defaults of a precision: storage forward, backward; math
// forward, backward.
struct NetDefaults {
  Type forward_type, backward_type, forward_math, backward_math;
};

NetDefaults DefaultsOf(Precision p) {
  switch (p) {
    case Precision::kFp16: return {FLOAT16, FLOAT16, FLOAT, FLOAT};
    case Precision::kBf16: return {BFLOAT16, BFLOAT16, FLOAT, FLOAT};
    case Precision::kFp32: break;
  }
  return {FLOAT, FLOAT, FLOAT, FLOAT};
}

std::string ValueName(Type t) { return type_name(t); }
std::string ValueName(bool b) { return b ? "true" : "false"; }

// The notes of one ApplyPrecision: a field the file states wins, and is
// noted where its value differs from the precision's.
struct StatedFields {
  Precision precision;
  const char* file;  // "net" or "solver"
  std::vector<std::string> notes;

  template <typename T>
  void Keep(const char* field, T stated, T wanted) {
    if (stated != wanted)
      notes.push_back(str_cat(field, " ", ValueName(stated), " (stated by the ", file, "; ", PrecisionName(precision),
                              " would set ", ValueName(wanted), ")"));
  }
};

std::string Plural(size_t n, const char* one, const char* many) { return str_cat(n, " ", n == 1 ? one : many); }

}  // namespace

Precision ParsePrecision(const std::string& name, const std::string& flag) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "fp32") return Precision::kFp32;
  if (lower == "fp16") return Precision::kFp16;
  if (lower == "bf16") return Precision::kBf16;
  fail("--", flag, "=", name, ": expected fp32, fp16 or bf16");
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kFp32: break;
  }
  return "fp32";
}

std::vector<std::string> ApplyPrecision(Precision p, NetParameter* net) {
  const NetDefaults d = DefaultsOf(p);
  StatedFields stated{p, "net", {}};
  if (net->has_default_forward_type())
    stated.Keep("default_forward_type", net->default_forward_type(), d.forward_type);
  else
    net->set_default_forward_type(d.forward_type);
  if (net->has_default_backward_type())
    stated.Keep("default_backward_type", net->default_backward_type(), d.backward_type);
  else
    net->set_default_backward_type(d.backward_type);
  if (net->has_default_forward_math())
    stated.Keep("default_forward_math", net->default_forward_math(), d.forward_math);
  else
    net->set_default_forward_math(d.forward_math);
  if (net->has_default_backward_math())
    stated.Keep("default_backward_math", net->default_backward_math(), d.backward_math);
  else
    net->set_default_backward_math(d.backward_math);
  return stated.notes;
}

std::vector<std::string> ApplyPrecision(Precision p, SolverParameter* solver) {
  StatedFields stated{p, "solver", {}};
  // FP32 master weights and history whatever the storage: FP16 solver data
  // is a choice a solver states, BF16 solver data is refused (solver.cpp).
  if (solver->has_solver_data_type())
    stated.Keep("solver_data_type", solver->solver_data_type(), FLOAT);
  else
    solver->set_solver_data_type(FLOAT);
  if (p != Precision::kFp16) return stated.notes;
  if (solver->has_dynamic_loss_scale())
    stated.Keep("dynamic_loss_scale", solver->dynamic_loss_scale(), true);
  else
    solver->set_dynamic_loss_scale(true);
  return stated.notes;
}

std::string NetTypesSummary(const Net& net) {
  using Key = std::tuple<Type, Type, Type, Type>;
  std::map<Key, std::vector<std::string>> groups;
  for (const auto& l : net.layers()) {
    const LayerParameter& lp = l->layer_param();
    groups[Key(lp.forward_type(), lp.backward_type(), lp.forward_math(), lp.backward_math())].push_back(lp.name());
  }
  std::vector<std::pair<Key, std::vector<std::string>>> order(groups.begin(), groups.end());
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::string out = str_cat("Net '", net.name(), "' (", net.phase() == TRAIN ? "TRAIN" : "TEST", "): ");
  if (order.empty()) return out + "no layers";
  for (size_t i = 0; i < order.size(); ++i) {
    const Key& k = order[i].first;
    const std::vector<std::string>& names = order[i].second;
    std::string who = Plural(names.size(), "layer", "layers");
    if (names.size() <= 3) {
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      who += " (" + list + ")";
    }
    const bool one = names.size() == 1;
    out += str_cat(i ? "; " : "", who, one ? " stores " : " store ", type_name(std::get<0>(k)), "/",
                   type_name(std::get<1>(k)), i ? "" : " (forward/backward)", one ? " and computes in " : " and compute in ",
                   type_name(std::get<2>(k)), "/", type_name(std::get<3>(k)));
  }
  return out;
}

std::string SolverTypesSummary(const SolverParameter& p, Type data_type, float net_scale) {
  std::string out = str_cat("Solver: master weights and history ", type_name(data_type), ", ");
  if (p.dynamic_loss_scale()) {
    out += str_cat("dynamic loss scaling (from ", p.loss_scale_init(), ", window ", p.loss_scale_window(), ")");
    if (net_scale != 1) out += str_cat("; the net's global_grad_scale ", net_scale, " is not used");
  } else if (net_scale != 1) {
    out += str_cat("static loss scale ", net_scale, " (the net's global_grad_scale)");
  } else {
    out += "no loss scaling";
  }
  return out;
}

}  // namespace cortado
