// End to end: convert 2,000 Fashion-MNIST training images and 1,000 test
// images to LMDB with the real convert_mnist tool, train the repository's
// LeNet (models/lenet) in FP32 and in FP16 storage, and check that both learn
// far above chance (10%) and end close to each other; and the LSTM that reads
// each image as a sequence of rows (models/lstm_rows) in FP16, with its
// solver file (Adam, clipping) and the fp16 precision (dynamic loss scaling),
// as trainer --precision=fp16 runs them.
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

std::string dataset_dir() {
  const char* env = std::getenv("FASHION_MNIST_DIR");
  return env ? env : "/usr/share/datasets/fashion-mnist";
}

class LeNetEndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / str_cat("cortado_lenet_", getpid());
    fs::create_directories(dir_);
    const std::string d = dataset_dir();
    if (!fs::exists(d + "/train-images-idx3-ubyte.gz")) return;
    const std::string tool = test::ConvertMnistPath();
    const std::string train = str_cat(tool, " ", d, "/train-images-idx3-ubyte.gz ", d, "/train-labels-idx1-ubyte.gz ",
                                      (dir_ / "train_lmdb").string(), " --limit=2000 > /dev/null 2>&1");
    const std::string test = str_cat(tool, " ", d, "/t10k-images-idx3-ubyte.gz ", d, "/t10k-labels-idx1-ubyte.gz ",
                                     (dir_ / "test_lmdb").string(), " --limit=1000 > /dev/null 2>&1");
    ASSERT_EQ(std::system(train.c_str()), 0) << train;
    ASSERT_EQ(std::system(test.c_str()), 0) << test;
    converted_ = true;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // Trains models/<model>/<net_file> with the folder's solver.prototxt in
  // `precision`, as trainer --precision runs them, on this test's data and
  // for `iters` iterations, and returns the test accuracy.
  double Train(const std::string& model, const std::string& net_file, Precision precision, int iters) {
    const std::string folder = str_cat(test::SourceRoot(), "/models/", model, "/");
    NetParameter net;
    ReadTextProto(folder + net_file, &net);
    for (LayerParameter& l : *net.mutable_layer()) {
      if (l.type() != "Data") continue;
      const bool train = l.include(0).phase() == TRAIN;
      l.mutable_data_param()->set_source((dir_ / (train ? "train_lmdb" : "test_lmdb")).string());
    }
    ApplyPrecision(precision, &net);
    SolverParameter sp;
    ReadTextProto(folder + "solver.prototxt", &sp);
    ApplyPrecision(precision, &sp);
    sp.clear_net();
    sp.clear_test_iter();
    SolverParameter run;
    ParseTextProto(str_cat("test_iter: 10 test_interval: 100000 test_initialization: false display: 0 random_seed: 1 ",
                           "snapshot_after_train: false snapshot: 0 max_iter: ", iters),
                   "solver", &run);
    sp.MergeFrom(run);
    *sp.mutable_net_param() = net;
    auto solver = Solver::Create(sp);
    solver->Solve();
    const std::vector<double> scores = solver->TestAll();
    EXPECT_EQ(scores.size(), 2u);  // accuracy, loss
    return scores.at(0);
  }

  static fs::path dir_;
  static bool converted_;
};

fs::path LeNetEndToEnd::dir_;
bool LeNetEndToEnd::converted_ = false;

TEST_F(LeNetEndToEnd, LearnsInFp32AndFp16Storage) {
  if (!converted_) GTEST_SKIP() << "Fashion-MNIST not found in " << dataset_dir();
  const double fp32 = Train("lenet", "lenet_train_test.prototxt", Precision::kFp32, 300);
  const double fp16 = Train("lenet", "lenet_train_test.prototxt", Precision::kFp16, 300);
  std::cout << "LeNet on a 2,000-image subset, 300 iterations: test accuracy FP32 " << fp32 << ", FP16 storage "
            << fp16 << std::endl;
  EXPECT_GT(fp32, 0.70);
  EXPECT_GT(fp16, 0.70);
  EXPECT_NEAR(fp16, fp32, 0.03);
}

TEST_F(LeNetEndToEnd, LstmOverRowsLearnsInFp16) {
  if (!converted_) GTEST_SKIP() << "Fashion-MNIST not found in " << dataset_dir();
  const double fp16 = Train("lstm_rows", "train_val.prototxt", Precision::kFp16, 300);
  std::cout << "LSTM over rows on a 2,000-image subset, 300 iterations: test accuracy FP16 storage " << fp16
            << std::endl;
  EXPECT_GT(fp16, 0.65);  // 0.746 when written
}

}  // namespace
}  // namespace cortado
