// The experiment that shows loss scaling doing its job, kept as a test.
//
// LeNet on a 2,000-image Fashion-MNIST subset with the loss weighted by 1e-6
// (and the learning rate and weight decay rescaled so that the FP32 run is
// the ordinary one). The loss gradient then starts near 1e-6/64, below half
// of FP16's smallest subnormal (2^-25): with FP16 storage and no scaling the
// activation gradients underflow to zero and the net does not learn; with
// dynamic loss scaling (S starts at 65536) it learns like FP32. bfloat16
// storage, with float's exponent range, learns like FP32 with no scaling.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "cortado/io/proto_io.hpp"
#include "cortado/precision.hpp"
#include "cortado/solvers/solver.hpp"
#include "test_paths.hpp"

namespace cortado {
namespace {

namespace fs = std::filesystem;

class LossScalingExperiment : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / str_cat("cortado_scaling_", getpid());
    fs::create_directories(dir_);
    const char* env = std::getenv("FASHION_MNIST_DIR");
    const std::string d = env ? env : "/usr/share/datasets/fashion-mnist";
    if (!fs::exists(d + "/train-images-idx3-ubyte.gz")) return;
    const std::string tool = test::ConvertMnistPath();
    const std::string train = str_cat(tool, " ", d, "/train-images-idx3-ubyte.gz ", d, "/train-labels-idx1-ubyte.gz ",
                                      (dir_ / "train_lmdb").string(), " --limit=2000 > /dev/null 2>&1");
    const std::string test = str_cat(tool, " ", d, "/t10k-images-idx3-ubyte.gz ", d, "/t10k-labels-idx1-ubyte.gz ",
                                     (dir_ / "test_lmdb").string(), " --limit=1000 > /dev/null 2>&1");
    ASSERT_EQ(std::system(train.c_str()), 0);
    ASSERT_EQ(std::system(test.c_str()), 0);
    ready_ = true;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  struct Result {
    double accuracy;
    int skipped;
    float final_scale;
  };

  // LeNet's net in `precision` (its storage types only: the solver's
  // scaling is `solver_extra`'s, so that each run states what it compares).
  Result Train(Precision precision, const std::string& solver_extra) {
    NetParameter net;
    ReadTextProto(str_cat(test::SourceRoot(), "/models/lenet/lenet_train_test.prototxt"), &net);
    ApplyPrecision(precision, &net);
    for (LayerParameter& l : *net.mutable_layer()) {
      if (l.type() == "Data")
        l.mutable_data_param()->set_source((dir_ / (l.include(0).phase() == TRAIN ? "train_lmdb" : "test_lmdb")).string());
      if (l.type() == "SoftmaxWithLoss") l.add_loss_weight(1e-6f);
    }
    SolverParameter sp;
    // base_lr 0.01 and weight_decay 5e-4 of LeNet's solver, times 1e6 and 1e-6.
    ParseTextProto(str_cat("test_iter: 10 test_interval: 100000 test_initialization: false base_lr: 10000 ",
                           "momentum: 0.9 weight_decay: 5e-10 lr_policy: 'inv' gamma: 0.0001 power: 0.75 ",
                           "display: 0 random_seed: 1 snapshot_after_train: false max_iter: 200 ", solver_extra),
                   "solver", &sp);
    *sp.mutable_net_param() = net;
    auto solver = Solver::Create(sp);
    solver->Solve();
    return {solver->TestAll().at(0), solver->skipped_iterations(), solver->loss_scale()};
  }

  static fs::path dir_;
  static bool ready_;
};

fs::path LossScalingExperiment::dir_;
bool LossScalingExperiment::ready_ = false;

TEST_F(LossScalingExperiment, Fp16LearnsOnlyWithLossScaling) {
  if (!ready_) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const Result fp32 = Train(Precision::kFp32, "");
  const Result unscaled = Train(Precision::kFp16, "");
  const Result dynamic = Train(Precision::kFp16, "dynamic_loss_scale: true");
  std::cout << "loss weight 1e-6, 200 iterations: FP32 " << fp32.accuracy << ", FP16 unscaled " << unscaled.accuracy
            << ", FP16 dynamic scaling " << dynamic.accuracy << " (skipped " << dynamic.skipped << ", final S "
            << dynamic.final_scale << ")" << std::endl;
  EXPECT_GT(fp32.accuracy, 0.65);
  EXPECT_LT(unscaled.accuracy, 0.3);  // near chance: the gradients underflowed
  EXPECT_NEAR(dynamic.accuracy, fp32.accuracy, 0.04);
}

TEST_F(LossScalingExperiment, Bf16LearnsWithoutLossScaling) {
  if (!ready_) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const Result fp32 = Train(Precision::kFp32, "");
  const Result bf16 = Train(Precision::kBf16, "");
  std::cout << "loss weight 1e-6, 200 iterations: FP32 " << fp32.accuracy << ", BF16 unscaled " << bf16.accuracy
            << std::endl;
  EXPECT_GT(fp32.accuracy, 0.65);
  EXPECT_NEAR(bf16.accuracy, fp32.accuracy, 0.04);
  EXPECT_EQ(bf16.skipped, 0);
}

}  // namespace
}  // namespace cortado
