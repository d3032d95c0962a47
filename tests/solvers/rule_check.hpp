#pragma once
// Shared check for the update-rule tests: three solver steps on a tiny net
// whose gradient is known in closed form, against a double-precision
// reference of the rule written in the test.
//
// The net: x (2, 3) from a uniform [0.5, 1.5] DummyData filler (redrawn every
// forward), y = W x + b with W (2, 3) uniform [1, 2] and b = 2, and
// loss = sum(y). So dL/dW[j][k] = sum_n x[n][k] and dL/db[j] = 2, whatever W
// is. W has lr_mult 1, decay_mult 1; b has lr_mult 2, decay_mult 0, so the
// check also sees that the rule uses u.rate and u.decay as given. All
// gradients stay >= 1, so FP16 history keeps its precision; the cases pick
// rates that keep the weights in [0.5, 4] for three steps, well away from
// zero, so that a tolerance in float16 ulps of the reference means something.

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cortado/io/proto_io.hpp"
#include "cortado/solvers/solver.hpp"

namespace cortado::test {

/// One element's step of the reference rule, in double: updates w and the
/// history slots h[0..slots) given the gradient g (coupled decay already
/// added unless the rule decouples it), the rate, the decay and t (from 1).
using ReferenceRule = std::function<void(double& w, double g, double* h, double rate, double decay, int t)>;

struct RuleCase {
  std::string solver;  // type and hyperparameters, e.g. "type: 'Adam' base_lr: 0.1 ..."
  int slots = 1;
  bool decoupled = false;
  ReferenceRule rule;
};

inline std::unique_ptr<Solver> MakeSolver(const std::string& solver_text, const std::string& net_text) {
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto(solver_text, "solver.prototxt", &sp, &info);
  ParseTextProto(net_text, "net.prototxt", sp.mutable_net_param());
  return Solver::Create(sp, info);
}

inline std::string RuleNet(Type layer_type) {
  return str_cat("default_forward_type: ", type_name(layer_type), " default_backward_type: ", type_name(layer_type), R"(
  layer { name: "x" type: "DummyData" top: "x"
    dummy_data_param { shape { dim: 2 dim: 3 } data_filler { type: "uniform" min: 0.5 max: 1.5 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
    param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
    inner_product_param { num_output: 2 weight_filler { type: "uniform" min: 1 max: 2 }
                          bias_filler { type: "constant" value: 2 } } }
  layer { name: "l" type: "Flatten" bottom: "y" top: "loss" loss_weight: 1 })");
}

/// The spacing of float16 values around r.
inline double HalfUlp(double r) {
  const double a = std::fabs(r);
  if (a < std::ldexp(1.0, -14)) return std::ldexp(1.0, -24);
  return std::ldexp(1.0, std::ilogb(a) - 10);
}

inline double RoundToHalf(double v) { return static_cast<float>(float16(static_cast<float>(v))); }

/// Runs three steps of c with the given layer and solver data types and
/// compares weights and history with the reference after each step. The
/// tolerance is `tol` absolute (times max(1, |ref|)), or `half_ulps` float16
/// ulps of the reference when half_ulps > 0.
inline void CheckRule(const RuleCase& c, Type layers, Type data, double tol, double half_ulps = 0) {
  SCOPED_TRACE(str_cat(c.solver, " layers ", type_name(layers), " solver data ", type_name(data)));
  // DOUBLE nets get DOUBLE solver data without asking (the field rejects DOUBLE).
  const std::string data_field = data == DOUBLE ? "" : str_cat(" solver_data_type: ", type_name(data));
  auto s = MakeSolver(str_cat(c.solver, " lr_policy: 'fixed' max_iter: 3 random_seed: 1701", data_field),
                      RuleNet(layers));
  ASSERT_EQ(s->data_type(), data);
  const auto& params = s->net()->learnable_params();
  ASSERT_EQ(params.size(), 2u);
  const double lr_mult[2] = {1, 2}, decay_mult[2] = {1, 0};
  const bool l1 = s->param().regularization_type() == "L1";
  std::vector<std::vector<double>> w(2), h(2);
  for (int p = 0; p < 2; ++p) {
    const double* v = params[p]->cpu_data<double>();
    w[p].assign(v, v + params[p]->count());
    if (data == FLOAT16)
      for (double& x : w[p]) x = RoundToHalf(x);
    h[p].assign(params[p]->count() * c.slots, 0.0);
  }
  auto near = [&](double got, double want) {
    return std::fabs(got - want) <= (half_ulps > 0 ? half_ulps * HalfUlp(want) : tol * std::max(1.0, std::fabs(want)));
  };
  for (int t = 1; t <= 3; ++t) {
    s->Step(1);
    ASSERT_FALSE(s->last_step_skipped());
    const double* x = s->net()->blob_by_name("x")->cpu_data<double>();
    for (int p = 0; p < 2; ++p) {
      const double rate = double(s->param().base_lr()) * lr_mult[p];
      const double decay = double(s->param().weight_decay()) * decay_mult[p];
      for (size_t i = 0; i < w[p].size(); ++i) {
        double g = p == 0 ? x[i % 3] + x[3 + i % 3] : 2.0;
        const double reg = l1 ? (w[p][i] > 0) - (w[p][i] < 0) : w[p][i];
        if (layers == FLOAT16) {
          if (!c.decoupled) g += decay * reg;
        } else {
          // The solver hands the rule an FP32 gradient: dW rounded to float,
          // plus float(decay) * float(W) in float.
          float gf = static_cast<float>(g);
          if (!c.decoupled) gf += static_cast<float>(decay) * static_cast<float>(reg);
          g = gf;
        }
        c.rule(w[p][i], g, &h[p][i * c.slots], rate, decay, t);
      }
      ASSERT_EQ(params[p]->data_type(), data) << "the weights are not kept in the solver data type";
      const double* got = params[p]->cpu_data<double>();
      for (size_t i = 0; i < w[p].size(); ++i)
        ASSERT_TRUE(near(got[i], w[p][i])) << "step " << t << " param " << p << " index " << i << ": got " << got[i]
                                           << ", want " << w[p][i];
      for (int slot = 0; slot < c.slots; ++slot) {
        ASSERT_EQ(s->history(p, slot).data_type(), data);
        const double* hist = s->history(p, slot).cpu_data<double>();
        for (size_t i = 0; i < w[p].size(); ++i)
          ASSERT_TRUE(near(hist[i], h[p][i * c.slots + slot]))
              << "step " << t << " param " << p << " history slot " << slot << " index " << i << ": got " << hist[i]
              << ", want " << h[p][i * c.slots + slot];
      }
    }
  }
}

/// The three data-type configurations every rule is checked in.
inline void CheckRuleFloat(const RuleCase& c) { CheckRule(c, FLOAT, FLOAT, 5e-7); }
inline void CheckRuleDouble(const RuleCase& c) { CheckRule(c, DOUBLE, DOUBLE, 1e-10); }
inline void CheckRuleHalfData(const RuleCase& c) { CheckRule(c, FLOAT, FLOAT16, 0, 4); }

/// FP16 layers with FLOAT solver data: the solver updates an FP32 master
/// copy. After each step the weight blob is still held in FLOAT, some weights
/// are not representable in FP16, and the values follow the reference to
/// within a few float16 ulps (the gradients themselves are FP16).
inline void CheckHalfLayersKeepFloatMaster(const RuleCase& c) {
  CheckRule(c, FLOAT16, FLOAT, 0, 4);
  auto s = MakeSolver(str_cat(c.solver, " lr_policy: 'fixed' max_iter: 3 random_seed: 1701"), RuleNet(FLOAT16));
  ASSERT_EQ(s->data_type(), FLOAT);
  Blob& weights = *s->net()->learnable_params()[0];
  for (int t = 1; t <= 3; ++t) {
    s->Step(1);
    ASSERT_EQ(weights.data_type(), FLOAT) << "step " << t;
    int not_half = 0;
    const float* v = weights.cpu_data<float>();
    for (size_t i = 0; i < weights.count(); ++i) not_half += RoundToHalf(v[i]) != double(v[i]);
    EXPECT_GT(not_half, 0) << "step " << t << ": every weight is an FP16 value; no FP32 master copy?";
    // The FP16 copy the layers read is the master rounded once.
    const float16* half = weights.cpu_data<float16>();
    for (size_t i = 0; i < weights.count(); ++i) ASSERT_EQ(float(half[i]), float(float16(v[i])));
    ASSERT_EQ(weights.data_type(), FLOAT);
  }
}

/// Two steps, a snapshot, a fresh solver restored from it and two more steps
/// give bit-identical weights to four straight steps: every history slot is
/// saved and restored in order.
inline void CheckResumeIsBitIdentical(const RuleCase& c, Type data) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / str_cat("cortado_rule_", getpid(), "_", type_name(data));
  fs::create_directories(dir);
  const std::string text = str_cat(c.solver, " lr_policy: 'fixed' max_iter: 4 random_seed: 1701 solver_data_type: ",
                                   type_name(data), " snapshot_prefix: '", (dir / "run").string(), "'");
  auto full = MakeSolver(text, RuleNet(FLOAT));
  full->Step(4);
  auto first = MakeSolver(text, RuleNet(FLOAT));
  first->Step(2);
  first->Snapshot();
  auto resumed = MakeSolver(text, RuleNet(FLOAT));
  resumed->Restore((dir / "run_iter_2.solverstate").string());
  resumed->Step(2);
  fs::remove_all(dir);
  for (int p = 0; p < 2; ++p) {
    const Blob& a = *full->net()->learnable_params()[p];
    const Blob& b = *resumed->net()->learnable_params()[p];
    for (size_t i = 0; i < a.count(); ++i)
      ASSERT_EQ(a.cpu_data<float>()[i], b.cpu_data<float>()[i]) << type_name(data) << " param " << p << " index " << i;
    for (int slot = 0; slot < c.slots; ++slot)
      for (size_t i = 0; i < a.count(); ++i)
        ASSERT_EQ(full->history(p, slot).cpu_data<float>()[i], resumed->history(p, slot).cpu_data<float>()[i])
            << type_name(data) << " param " << p << " history slot " << slot << " index " << i;
  }
}

}  // namespace cortado::test
