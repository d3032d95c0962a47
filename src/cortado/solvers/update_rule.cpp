// The registry of update rules: the built-in ones (solvers/builtin_rules.hpp), then
// those registered at run time, looked up by solver type string.
#include <algorithm>
#include <mutex>

#include "cortado/io/proto_io.hpp"
#include "cortado/solvers/builtin_rules.hpp"

#ifdef CORTADO_USE_CUDA
#include "cortado/solvers/device_update.hpp"
#endif

namespace cortado {

namespace {

template <typename... R>
std::vector<UpdateRuleInfo> Builtins(RuleList<R...>) {
#ifdef CORTADO_USE_CUDA
  return {MakeUpdateRule<R>(gpu::builtin_update(R::kType))...};
#else
  return {MakeUpdateRule<R>()...};
#endif
}

struct Registry {
  std::mutex mutex;
  std::vector<UpdateRuleInfo> rules = Builtins(BuiltinRules());
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void RuleFields::Fail(const std::string& field, const std::string& msg) const {
  const int line = info.root_field_line(SolverParameter::descriptor(), field);
  fail(info.where(line), field, ": ", msg);
}

void RegisterUpdateRule(const UpdateRuleInfo& rule) {
  CORTADO_CHECK(rule.update_cpu != nullptr) << "update rule '" << rule.type << "' has no host update";
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const UpdateRuleInfo& e : r.rules)
    if (e.type == rule.type) fail("update rule '", rule.type, "' is already registered");
  r.rules.push_back(rule);
}

bool FindUpdateRule(const std::string& type, UpdateRuleInfo* rule) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const UpdateRuleInfo& e : r.rules) {
    if (e.type != type) continue;
    *rule = e;
    return true;
  }
  return false;
}

std::vector<std::string> UpdateRuleTypes() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> v;
  for (const UpdateRuleInfo& e : r.rules) v.push_back(e.type);
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace cortado
