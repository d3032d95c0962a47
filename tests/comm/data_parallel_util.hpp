#pragma once
// What the data-parallel tests share (mpi_test.cpp runs them on MPI ranks,
// run_ranks_test.cpp on the ranks of one process): a small net that trains
// through a Data layer, a solver made from prototxt text, and its weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cortado/comm/communicator.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/solvers/solver.hpp"

namespace cortado {
namespace test {

// Data (random crops and flips, so that the shards' augmentation is checked
// too) -> Convolution -> ReLU [-> Dropout] -> InnerProduct -> SoftmaxWithLoss.
/// `storage`: the layers' type (FLOAT16 and BFLOAT16 with FP32 master weights).
inline std::string DataParallelNet(const std::string& db, int batch, Type storage, bool dropout = false) {
  return str_cat("default_forward_type: ", type_name(storage), " default_backward_type: ", type_name(storage), " ",
                 R"(layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TRAIN }
                      transform_param { crop_size: 5 mirror: true scale: 0.00390625 }
                      data_param { source: ")", db, R"(" batch_size: )", batch, R"( } }
                    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
                      convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" }
                                          bias_filler { type: "constant" value: 0.1 } } }
                    layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" })",
                 dropout ? R"(layer { name: "drop" type: "Dropout" bottom: "conv" top: "conv" })" : "", R"(
                    layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
                      inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.1 } } }
                    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" })");
}

inline std::unique_ptr<Solver> MakeSolver(const std::string& solver_text, const std::string& net_text,
                                          std::shared_ptr<Communicator> comm,
                                          std::shared_ptr<const Context> ctx = nullptr,
                                          bool defer_host_steps = false) {
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto(solver_text, "solver.prototxt", &sp, &info);
  ParseTextProto(net_text, "net.prototxt", sp.mutable_net_param());
  SolverSetup setup(std::move(ctx));
  setup.comm = std::move(comm);
  setup.defer_host_steps = defer_host_steps;
  return Solver::Create(sp, info, setup);
}

/// The learnable parameters' values, in order, as float.
inline std::vector<float> Weights(Solver* s) {
  std::vector<float> w;
  for (Blob* p : s->net()->learnable_params()) {
    const float* v = p->data().data<float>();
    w.insert(w.end(), v, v + p->count());
  }
  return w;
}

/// How the step of R ranks (batch B each) is compared with one solver's step
/// with batch R * B.
struct Recipe {
  const char* name;
  Type storage;        // the layers' type (16-bit ones with FP32 master weights)
  int iter_size;       // each rank accumulates this many batches per step
  const char* solver;  // more solver fields
};

/// base_lr 0.05, momentum, weight decay, seed 11, 4 steps.
inline std::string DataParallelSolver(int iter_size, const std::string& more) {
  return str_cat("base_lr: 0.05 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.001 random_seed: 11 max_iter: 4 "
                 "display: 0 snapshot_after_train: false iter_size: ", iter_size, " ", more);
}

/// The five recipes both suites run.
inline std::vector<Recipe> DataParallelRecipes() {
  return {Recipe{"FP32", FLOAT, 1, ""}, Recipe{"FP16", FLOAT16, 1, ""}, Recipe{"FP32IterSize2", FLOAT, 2, ""},
          // The clipping acts on the global norm, after the ranks' sum and
          // the unscale (the tests check that 0.2 is below it: unclipped
          // steps differ).
          Recipe{"FP16DynamicScaleAndClipping", FLOAT16, 1,
                 "dynamic_loss_scale: true loss_scale_init: 1024 clip_gradients: 0.2"},
          Recipe{"BF16", BFLOAT16, 1, ""}};
}

/// Checks a rank's weights after `steps` steps against those of one solver
/// alone with the ranks' batches together (n ranks of batch B), started from
/// `before`: FP32 differs only in the order of the sums (seen: 1.5e-8 at
/// most); FP16 rounds each rank's gradient to float16 before the ranks' sum,
/// which is rounded again (seen: 3.5e-5 at most, with weights up to 0.56
/// that moved by up to 0.038; a wrong 1/ranks moves them by about that
/// much). BF16 does the same with 8 times coarser roundings.
inline void ExpectStepOfTheirBatchTogether(const Recipe& recipe, const std::string& db, int n, int B, int steps,
                                           const std::vector<float>& before, const std::vector<float>& mine) {
  const std::string big_net = DataParallelNet(db, n * B * recipe.iter_size, recipe.storage);
  auto alone = MakeSolver(DataParallelSolver(1, recipe.solver), big_net, nullptr);
  alone->Step(steps);
  const std::vector<float> want = Weights(alone.get());
  if (std::string(recipe.solver).find("clip_gradients") != std::string::npos) {
    auto unclipped = MakeSolver(DataParallelSolver(1, ""), big_net, nullptr);
    unclipped->Step(steps);
    EXPECT_NE(Weights(unclipped.get()), want) << "the clipping never acted: the recipe tests nothing";
  }
  ASSERT_EQ(want.size(), mine.size());
  ASSERT_EQ(before.size(), mine.size());
  const bool half = recipe.storage != FLOAT;
  const double coarse = recipe.storage == BFLOAT16 ? 8 : 1;  // bfloat16's epsilon over float16's
  const double rtol = half ? 5e-4 * coarse : 1e-5, atol = half ? 1e-4 * coarse : 1e-6;
  double moved = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(mine[i], want[i], atol + rtol * std::fabs(want[i])) << "weight " << i;
    moved = std::max(moved, std::fabs(static_cast<double>(mine[i]) - before[i]));
  }
  EXPECT_GT(moved, 1e-3) << "the steps did not change the weights";
}

}  // namespace test
}  // namespace cortado
