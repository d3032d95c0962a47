#pragma once
// The training loop, as in Caffe: learning-rate policies, iter_size gradient
// accumulation, periodic testing, display with a smoothed loss and
// images/second, snapshots (.caffemodel + .solverstate, written to a
// temporary name and renamed), resume, and signal actions.
//
// The update rule is a subclass (SGDSolver). The solver computes in its data
// type (FLOAT, or DOUBLE for DOUBLE nets): it reads gradients as that type
// and writes weights as that type, so with FLOAT16 layers the weights' FP32
// values are the master copy and the layers read a rounded FP16 copy.
//
// Learning-rate policies at iteration it (Caffe's formulas):
//   fixed      base_lr
//   step       base_lr * gamma ^ floor(it / stepsize)
//   exp        base_lr * gamma ^ it
//   inv        base_lr * (1 + gamma * it) ^ (-power)
//   multistep  base_lr * gamma ^ (number of stepvalue entries <= it)
//   poly       base_lr * (1 - it / max_iter) ^ power
//   sigmoid    base_lr / (1 + exp(-gamma * (it - stepsize)))

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cortado/net.hpp"
#include "cortado/util/signals.hpp"

namespace cortado {

class Solver {
 public:
  /// `info` locates fields of the solver prototxt (and its embedded nets).
  explicit Solver(const SolverParameter& param, const SourceInfo& info = SourceInfo());
  virtual ~Solver() = default;
  /// Reads a solver prototxt and makes the solver its `type` names.
  static std::unique_ptr<Solver> Create(const std::string& solver_file);
  static std::unique_ptr<Solver> Create(const SolverParameter& param, const SourceInfo& info = SourceInfo());

  /// Trains to max_iter, resuming from a .solverstate first if given.
  void Solve(const std::string& resume_file = "");
  /// Runs `iters` iterations.
  void Step(int iters);
  void Restore(const std::string& state_file);
  /// Writes <prefix>_iter_<N>.caffemodel and .solverstate; returns the model path.
  std::string Snapshot();
  /// Runs every test net; returns the mean of each output value of net 0.
  std::vector<double> TestAll();

  double GetLearningRate() const { return GetLearningRate(iter_); }
  double GetLearningRate(int iter) const;
  int iter() const { return iter_; }
  const SolverParameter& param() const { return param_; }
  Net* net() { return net_.get(); }
  const std::vector<std::unique_ptr<Net>>& test_nets() const { return test_nets_; }
  double smoothed_loss() const { return smoothed_loss_; }
  bool requested_early_exit() const { return requested_early_exit_; }
  /// Called at the end of each iteration; SNAPSHOT or STOP act on it.
  void set_action_function(std::function<SolverAction()> f) { action_ = std::move(f); }
  virtual const char* type() const = 0;

 protected:
  /// Applies the update for the current iteration to every learnable parameter.
  virtual void ApplyUpdate() = 0;
  virtual void SnapshotState(SolverState* state) const = 0;
  virtual void RestoreState(const SolverState& state, const std::string& file) = 0;
  [[noreturn]] void ParamFail(const std::string& field, const std::string& msg) const;

  SolverParameter param_;
  SourceInfo info_;
  int iter_ = 0;
  int current_step_ = 0;
  std::unique_ptr<Net> net_;
  std::vector<std::unique_ptr<Net>> test_nets_;
  Type data_type_ = FLOAT;  // the solver's compute and history type

 private:
  void InitNets();
  void Validate() const;
  std::vector<double> Test(int test_net_id);
  void UpdateSmoothedLoss(double loss, int start_iter);
  void DisplayOutputs(double elapsed_s, int iters);

  std::vector<double> losses_;
  double smoothed_loss_ = 0;
  bool requested_early_exit_ = false;
  std::function<SolverAction()> action_;
};

/// SGD with momentum, L2 or L1 weight decay, lr_mult and decay_mult:
///   g = dW / iter_size + decay * decay_mult * (W for L2, sign(W) for L1)
///   H = momentum * H + lr * lr_mult * g;   W = W - H
class SGDSolver : public Solver {
 public:
  explicit SGDSolver(const SolverParameter& param, const SourceInfo& info = SourceInfo());
  const char* type() const override { return "SGD"; }
  const std::vector<std::shared_ptr<Blob>>& history() const { return history_; }

 protected:
  void ApplyUpdate() override;
  void SnapshotState(SolverState* state) const override;
  void RestoreState(const SolverState& state, const std::string& file) override;

 private:
  template <typename T> void Update(int param_id, double rate);
  std::vector<std::shared_ptr<Blob>> history_;
};

}  // namespace cortado
