// HDF5DataLayer: rows across files and epochs in every pair (labels exact),
// integer and double datasets, shuffled epochs, Seek, shards, relative
// paths, and the errors of bad lists, files and datasets. The fixture files
// are written with the HDF5 C API (hdf5_util.hpp). Without HDF5 in the
// build, the layer's error says so and the rest is skipped.

#include "cortado/layers/hdf5_data_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cortado/io/hdf5.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/solvers/solver.hpp"
#include "hdf5_util.hpp"
#include "layers/source_layer.hpp"
#include "temp_dir.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

#ifdef CORTADO_USE_HDF5

// Two files: a.h5 (3 rows, float data, int labels) and b.h5 (2 rows,
// double data, labels no 16-bit type holds). Row r of the whole list has
// data {v, v + 0.5} and a label; v and the labels are given below.
const std::vector<double> kRowValue = {0, 1, 2, 100, 101};
const std::vector<float> kRowLabel = {10, 11, 12, 2049, 257};

void WriteFixture(const test::TempDir& dir) {
  test::WriteH5(dir / "a.h5", {{"data", {3, 2}, {0, 0.5, 1, 1.5, 2, 2.5}, H5T_IEEE_F32LE},
                                {"label", {3}, {10, 11, 12}, H5T_STD_I32LE}});
  test::WriteH5(dir / "b.h5", {{"data", {2, 2}, {100, 100.5, 101, 101.5}, H5T_IEEE_F64LE},
                                {"label", {2}, {2049, 257}, H5T_IEEE_F64LE}});
  std::ofstream(dir / "list.txt") << dir / "a.h5" << "\n\n  " << dir / "b.h5" << "  \n";
}

std::string Param(const test::TempDir& dir, int batch, const std::string& more = "") {
  return "name: 'h5' type: 'HDF5Data' top: 'data' top: 'label' hdf5_data_param { source: '" + (dir / "list.txt") +
         "' batch_size: " + std::to_string(batch) + " " + more + " }";
}

template <typename P>
class HDF5DataLayerTest : public test::SourceLayerTest<HDF5DataLayer, P> {};
TYPED_TEST_SUITE(HDF5DataLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(HDF5DataLayerTest, RowsInOrderAcrossFilesAndEpochs) {
  using F = typename TypeParam::Ftype;
  test::TempDir dir;
  WriteFixture(dir);
  this->SetUp(Param(dir, 4));
  EXPECT_EQ(this->top_[0]->shape(), (std::vector<int>{4, 2}));
  EXPECT_EQ(this->top_[1]->shape(), (std::vector<int>{4}));
  EXPECT_EQ(this->layer_->file_rows(), (std::vector<int64_t>{3, 2}));
  // 3 batches of 4 rows: 12 stream positions over an epoch of 5 rows.
  for (int b = 0; b < 3; ++b) {
    this->Forward();
    const std::vector<double> data = this->Data();
    const std::vector<float> labels = this->Labels();
    for (int i = 0; i < 4; ++i) {
      const size_t r = static_cast<size_t>((4 * b + i) % 5);
      EXPECT_EQ(data[2 * i], static_cast<double>(static_cast<F>(kRowValue[r]))) << "batch " << b << " row " << i;
      EXPECT_EQ(data[2 * i + 1], static_cast<double>(static_cast<F>(kRowValue[r] + 0.5)));
      // Labels are float in every pair: 2049 and 257 stay exact.
      EXPECT_EQ(labels[i], kRowLabel[r]) << "batch " << b << " row " << i;
    }
  }
}

TYPED_TEST(HDF5DataLayerTest, SeekGivesTheBatchesOfAnUninterruptedRun) {
  test::TempDir dir;
  WriteFixture(dir);
  const std::string text = Param(dir, 3, "shuffle: true");
  const auto whole = this->Batches(7, text, -1, 6);
  const auto resumed = this->Batches(7, text, 3, 3);
  for (int b = 0; b < 3; ++b) EXPECT_EQ(resumed[b], whole[b + 3]) << "batch " << b + 3;
}

using HDF5DataFloat = test::SourceLayerTest<HDF5DataLayer, test::TypePair<float, float>>;

TEST_F(HDF5DataFloat, ShuffledEpochsArePermutationsDrawnFromTheSeed) {
  test::TempDir dir;
  WriteFixture(dir);
  const std::string text = Param(dir, 5, "shuffle: true");  // one batch is one epoch
  const auto run = Batches(3, text, -1, 8);
  std::vector<float> sorted_labels = kRowLabel;
  std::sort(sorted_labels.begin(), sorted_labels.end());
  int in_list_order = 0;
  for (const auto& [data, labels] : run) {
    std::vector<float> s = labels;
    std::sort(s.begin(), s.end());
    EXPECT_EQ(s, sorted_labels) << "an epoch reads every row once";
    for (int i = 0; i < 5; ++i) {
      // A row's data and label stay together.
      const size_t r = static_cast<size_t>(std::find(kRowLabel.begin(), kRowLabel.end(), labels[i]) - kRowLabel.begin());
      EXPECT_EQ(data[2 * i], kRowValue[r]);
    }
    in_list_order += labels == kRowLabel;
  }
  EXPECT_LT(in_list_order, 3) << "8 shuffled epochs of 5 rows should not keep the list's order";
  // The rows within a file are shuffled too, not only the files' order: in
  // some epoch a.h5's labels 10, 11, 12 come out of their file's order.
  int a_rows_in_file_order = 0;
  for (const auto& b : run) {
    std::vector<float> a_rows;
    for (float l : b.second)
      if (l >= 10 && l <= 12) a_rows.push_back(l);
    a_rows_in_file_order += std::is_sorted(a_rows.begin(), a_rows.end());
  }
  EXPECT_LT(a_rows_in_file_order, 8) << "the rows of a.h5 kept their order in every epoch";
  EXPECT_EQ(Batches(3, text, -1, 8), run) << "the same seed gives the same epochs";
  EXPECT_NE(Batches(4, text, -1, 8), run) << "another seed gives other epochs";
  // Without shuffle, the list's order.
  for (const auto& b : Batches(3, Param(dir, 5), -1, 2)) EXPECT_EQ(b.second, kRowLabel);
}

TEST_F(HDF5DataFloat, ShardsTogetherReadTheBatchOfOneLargerReader) {
  test::TempDir dir;
  WriteFixture(dir);
  const auto whole = Batches(5, Param(dir, 4, "shuffle: true"), -1, 4);
  const auto s0 = Batches(5, Param(dir, 2, "shuffle: true shard_id: 0 num_shards: 2"), -1, 4);
  const auto s1 = Batches(5, Param(dir, 2, "shuffle: true shard_id: 1 num_shards: 2"), -1, 4);
  for (int b = 0; b < 4; ++b) {
    // Shard s reads positions p * 2 + s: rows s and s + 2 of the larger batch.
    const std::vector<float>& w = whole[b].second;
    EXPECT_EQ(s0[b].second, (std::vector<float>{w[0], w[2]})) << "batch " << b;
    EXPECT_EQ(s1[b].second, (std::vector<float>{w[1], w[3]})) << "batch " << b;
  }
}

TEST_F(HDF5DataFloat, RelativePathsFromTheListsFolderAndRowsOfAnyRank) {
  test::TempDir dir;
  // A 3-d dataset (rows of 2 x 3) and a 1-d one; the list names the file
  // relative to its own folder.
  std::vector<double> v(4 * 6);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  test::WriteH5(dir / "c.h5", {{"x", {4, 2, 3}, v, H5T_IEEE_F32LE}, {"y", {4}, {1, 2, 3, 4}, H5T_IEEE_F32LE}});
  std::ofstream(dir / "list.txt") << "c.h5\n";
  layer_ = std::make_unique<HDF5DataLayer<float, float>>(test::MakeParam<test::TypePair<float, float>>(
      "name: 'h5' type: 'HDF5Data' top: 'x' top: 'y' hdf5_data_param { source: '" + (dir / "list.txt") +
      "' batch_size: 3 }"));
  top_ = test::Blobs();
  top_.add(FLOAT);
  top_.add(FLOAT);
  layer_->SetUp({}, top_.vec);
  EXPECT_EQ(top_[0]->shape(), (std::vector<int>{3, 2, 3}));
  Forward();
  Forward();  // rows 3, 0, 1
  const std::vector<double> x = Data();
  EXPECT_EQ(x[0], 18.0);
  EXPECT_EQ(x[6], 0.0);
  EXPECT_EQ(x[17], 11.0);
  EXPECT_EQ(Labels(), (std::vector<float>{4, 1, 2}));
}

// The FieldError of a layer set up from `param` with tops data and label.
FieldError SetUpError(const std::string& param) { return test::SourceSetUpError<HDF5DataLayer>(param, 2); }

TEST(HDF5DataErrors, Parameters) {
  test::TempDir dir;
  WriteFixture(dir);
  EXPECT_EQ(SetUpError("type: 'HDF5Data' top: 'data' top: 'label' hdf5_data_param { batch_size: 2 }").field(),
            "hdf5_data_param.source");
  EXPECT_EQ(SetUpError(Param(dir, 0)).field(), "hdf5_data_param.batch_size");
  EXPECT_EQ(SetUpError(Param(dir, 2, "shard_id: 2 num_shards: 2")).field(), "hdf5_data_param.shard_id");
  // Tops without names cannot name their datasets.
  EXPECT_EQ(SetUpError("type: 'HDF5Data' hdf5_data_param { source: '" + (dir / "list.txt") + "' batch_size: 2 }")
                .field(),
            "top");
}

TEST(HDF5DataErrors, ListsAndFiles) {
  test::TempDir dir;
  WriteFixture(dir);
  auto error = [&](const std::string& list_text) {
    std::ofstream(dir / "bad_list.txt") << list_text;
    const FieldError e = SetUpError("type: 'HDF5Data' top: 'data' top: 'label' hdf5_data_param { source: '" +
                                    (dir / "bad_list.txt") + "' batch_size: 2 }");
    EXPECT_EQ(e.field(), "hdf5_data_param.source");
    return std::string(e.what());
  };
  EXPECT_NE(error(dir / "a.h5" + "\n" + dir / "missing.h5\n").find("bad_list.txt:2: '" + dir / "missing.h5" + "': no such file"),
            std::string::npos);
  EXPECT_NE(error("\n \n").find("lists no files"), std::string::npos);

  // Not HDF5 at all.
  std::ofstream(dir / "text.h5") << "not an HDF5 file\n";
  EXPECT_NE(error(dir / "text.h5").find("bad_list.txt:1: " + dir / "text.h5" + ": cannot open as an HDF5 file"),
            std::string::npos);
  // A truncated HDF5 file (a copy cut in half): an error, not a crash.
  {
    std::ifstream in(dir / "a.h5", std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(dir / "cut.h5", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  EXPECT_NE(error(dir / "cut.h5").find("bad_list.txt:1: " + dir / "cut.h5" + ": "), std::string::npos);
  // A dataset missing for a top.
  test::WriteH5(dir / "nolabel.h5", {{"data", {2, 2}, {1, 2, 3, 4}, H5T_IEEE_F32LE}});
  EXPECT_NE(error(dir / "nolabel.h5").find(dir / "nolabel.h5" + ": dataset 'label': not in the file"),
            std::string::npos);
  // Row counts that differ between the tops' datasets.
  test::WriteH5(dir / "rows.h5", {{"data", {2, 2}, {1, 2, 3, 4}, H5T_IEEE_F32LE},
                                   {"label", {3}, {1, 2, 3}, H5T_IEEE_F32LE}});
  EXPECT_NE(error(dir / "rows.h5").find("dataset 'label' has 3 rows but 'data' has 2"), std::string::npos);
  // A later file whose rows have another shape.
  test::WriteH5(dir / "wide.h5", {{"data", {1, 3}, {1, 2, 3}, H5T_IEEE_F32LE}, {"label", {1}, {1}, H5T_IEEE_F32LE}});
  EXPECT_NE(error(dir / "a.h5" + "\n" + dir / "wide.h5").find("bad_list.txt:2: " + dir / "wide.h5" +
                                                             ": dataset 'data' has rows of shape (3), but the first "
                                                             "file's are (2)"),
            std::string::npos);
  // A scalar dataset ("data" of odd.h5), and one of strings ("label" of strs.h5).
  auto odd_file = [](const std::string& path, bool scalar_data) {
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t one[2] = {1, 2};
    const hid_t data_space = scalar_data ? H5Screate(H5S_SCALAR) : H5Screate_simple(2, one, nullptr);
    const hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 8);
    const hid_t label_space = H5Screate_simple(1, one, nullptr);
    H5Dclose(H5Dcreate2(f, "data", H5T_IEEE_F32LE, data_space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Dclose(H5Dcreate2(f, "label", str, label_space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Sclose(label_space);
    H5Tclose(str);
    H5Sclose(data_space);
    H5Fclose(f);
  };
  odd_file(dir / "odd.h5", true);
  EXPECT_NE(error(dir / "odd.h5").find("dataset 'data': is a scalar"), std::string::npos);
  odd_file(dir / "strs.h5", false);
  EXPECT_NE(error(dir / "strs.h5").find("dataset 'label': holds string values; it must hold numbers"),
            std::string::npos);
}

TEST(HDF5DataErrors, AFileThatChangesAfterSetUpIsAnErrorOfTheForward) {
  test::TempDir dir;
  WriteFixture(dir);
  HDF5DataLayer<float, float> layer(test::MakeParam<test::TypePair<float, float>>(Param(dir, 4)));
  test::Blobs top;
  top.add(FLOAT);
  top.add(FLOAT);
  layer.SetUp({}, top.vec);
  layer.Forward({}, top.vec);  // a.h5 and b.h5 were read
  std::ofstream(dir / "a.h5", std::ios::trunc) << "gone\n";
  try {
    layer.Forward({}, top.vec);  // rows 4 (b.h5) and 0.. (a.h5 again)
    ADD_FAILURE() << "read a damaged file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("list.txt:1: " + dir / "a.h5" + ": cannot open as an HDF5 file"),
              std::string::npos)
        << e.what();
  }
}

// The layer in a net and a solver: an FP16 linear regression from an HDF5
// file (y = x . w + 0.5 with x drawn once) learns w, with the float target
// read by EuclideanLoss.
TEST(HDF5Data, Fp16LinearRegressionLearnsTheWeights) {
  test::TempDir dir;
  const std::vector<double> w = {1, -2, 0.5, 3};
  std::vector<double> x, y;
  uint64_t state = 12345;
  for (int r = 0; r < 256; ++r) {
    double t = 0.5;
    for (double wk : w) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const double v = static_cast<double>(state >> 40) / static_cast<double>(1 << 24) * 2 - 1;  // [-1, 1)
      x.push_back(v);
      t += wk * v;
    }
    y.push_back(t);
  }
  test::WriteH5(dir / "reg.h5", {{"x", {256, 4}, x, H5T_IEEE_F32LE}, {"y", {256, 1}, y, H5T_IEEE_F32LE}});
  std::ofstream(dir / "list.txt") << "reg.h5\n";
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto("base_lr: 0.1 momentum: 0.9 lr_policy: 'fixed' max_iter: 400 random_seed: 1 "
                 "dynamic_loss_scale: true loss_scale_init: 1024",
                 "solver.prototxt", &sp, &info);
  ParseTextProto("default_forward_type: FLOAT16 default_backward_type: FLOAT16 "
                 "layer { name: 'd' type: 'HDF5Data' top: 'x' top: 'y' "
                 "  hdf5_data_param { source: '" + (dir / "list.txt") + "' batch_size: 32 shuffle: true } } "
                 "layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'p' "
                 "  inner_product_param { num_output: 1 weight_filler { type: 'constant' value: 0 } } } "
                 "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'p' bottom: 'y' top: 'loss' }",
                 "net.prototxt", sp.mutable_net_param());
  std::unique_ptr<Solver> solver = Solver::Create(sp, info);
  solver->Step(400);
  const std::vector<double> learned = test::GetData(*solver->net()->learnable_params()[0]);
  ASSERT_EQ(learned.size(), 4u);
  for (size_t k = 0; k < 4; ++k) EXPECT_NEAR(learned[k], w[k], 0.02) << "w[" << k << "]";
  EXPECT_NEAR(test::GetData(*solver->net()->learnable_params()[1])[0], 0.5, 0.02);
}

#else

TEST(HDF5DataErrors, ABuildWithoutHdf5SaysSo) {
  EXPECT_FALSE(hdf5::available());
  test::TempDir dir;
  std::ofstream(dir / "list.txt") << (dir / "list.txt") << "\n";
  const FieldError e = test::SourceSetUpError<HDF5DataLayer>(
      "type: 'HDF5Data' top: 'data' hdf5_data_param { source: '" + (dir / "list.txt") + "' batch_size: 1 }", 1);
  EXPECT_NE(std::string(e.what()).find("no HDF5 support"), std::string::npos) << e.what();
}

#endif

}  // namespace
}  // namespace cortado
