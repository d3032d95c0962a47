// HDF5OutputLayer: every batch appended to "data" and "label" (read back with
// the HDF5 C API), the file complete on disk after each Forward, a round
// trip through HDF5Data, and its errors.

#include "cortado/layers/hdf5_output_layer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cortado/io/proto_io.hpp"
#include "cortado/layers/hdf5_data_layer.hpp"
#include "hdf5_util.hpp"
#include "test_util.hpp"
#include "temp_dir.hpp"

namespace cortado {
namespace {

// The name the solver gives a rank's HDF5Output file.
TEST(RankFileName, SuffixBeforeTheExtensionOfTheFileName) {
  EXPECT_EQ(RankFileName("out/feat.h5", 0), "out/feat.h5");
  EXPECT_EQ(RankFileName("out/feat.h5", 1), "out/feat_rank1.h5");
  EXPECT_EQ(RankFileName("a.b.h5", 3), "a.b_rank3.h5");
  EXPECT_EQ(RankFileName("out.d/feat", 2), "out.d/feat_rank2");
  EXPECT_EQ(RankFileName(".h5", 1), ".h5_rank1");
  EXPECT_EQ(RankFileName("a/.x", 1), "a/.x_rank1");
}

#ifdef CORTADO_USE_HDF5

// An FP32 HDF5Output layer writing `file`.
std::unique_ptr<HDF5OutputLayer<float, float>> Fp32Output(const std::string& file) {
  return std::make_unique<HDF5OutputLayer<float, float>>(test::MakeParam<test::TypePair<float, float>>(
      "name: 'out' type: 'HDF5Output' hdf5_output_param { file_name: '" + file + "' }"));
}

template <typename P>
class HDF5OutputLayerTest : public ::testing::Test {
 protected:
  using F = typename P::Ftype;
  void SetUp(const std::string& file) {
    layer_ = std::make_unique<HDF5OutputLayer<F, typename P::Btype>>(
        test::MakeParam<P>("name: 'out' type: 'HDF5Output' hdf5_output_param { file_name: '" + file + "' }"));
    bottom_ = test::Blobs();
    bottom_.add({2, 3}, type_of<F>());
    bottom_.add({2}, FLOAT);
    layer_->SetUp(bottom_.vec, {});
  }
  // Writes batch b: data 10b + i (i = 0..5), labels 2049 + b and 257.
  void Forward(int b) {
    std::vector<double> data(6);
    for (int i = 0; i < 6; ++i) data[static_cast<size_t>(i)] = 10.0 * b + i + 0.25;
    test::SetTensor(&bottom_[0]->data(), type_of<F>(), data);
    float* label = bottom_[1]->template mutable_cpu_data<float>();
    label[0] = 2049.0f + static_cast<float>(b);
    label[1] = 257.0f;
    layer_->Forward(bottom_.vec, {});
  }
  std::unique_ptr<HDF5OutputLayer<F, typename P::Btype>> layer_;
  test::Blobs bottom_;
};
TYPED_TEST_SUITE(HDF5OutputLayerTest, test::AllPairs, test::PairNames);

TYPED_TEST(HDF5OutputLayerTest, AppendsEveryBatchAndFlushesIt) {
  using F = typename TypeParam::Ftype;
  test::TempDir dir;
  this->SetUp(dir / "out.h5");
  for (int b = 0; b < 3; ++b) {
    this->Forward(b);
    // What is on disk now, read from a copy while the layer keeps the file open.
    const std::string copy = dir / ("copy" + std::to_string(b) + ".h5");
    std::filesystem::copy_file(dir / "out.h5", copy);
    std::vector<hsize_t> dims;
    const std::vector<float> data = test::ReadH5(copy, "data", &dims);
    EXPECT_EQ(dims, (std::vector<hsize_t>{static_cast<hsize_t>(2 * (b + 1)), 3}));
    for (int r = 0; r <= b; ++r) {
      for (int i = 0; i < 6; ++i) {
        // The values as the blob held them, in F.
        const float expected = static_cast<float>(static_cast<F>(10.0 * r + i + 0.25));
        EXPECT_EQ(data[static_cast<size_t>(6 * r + i)], expected) << "batch " << r << " value " << i;
      }
    }
    const std::vector<float> label = test::ReadH5(copy, "label", &dims);
    EXPECT_EQ(dims, (std::vector<hsize_t>{static_cast<hsize_t>(2 * (b + 1))}));
    for (int r = 0; r <= b; ++r) {
      EXPECT_EQ(label[static_cast<size_t>(2 * r)], 2049.0f + static_cast<float>(r));  // exact in every pair
      EXPECT_EQ(label[static_cast<size_t>(2 * r + 1)], 257.0f);
    }
  }
}

TEST(HDF5OutputLayer, RoundTripThroughHDF5Data) {
  test::TempDir dir;
  {
    auto out = Fp32Output(dir / "out.h5");
    test::Blobs bottom;
    bottom.add({4, 2}, FLOAT);
    bottom.add({4}, FLOAT);
    out->SetUp(bottom.vec, {});
    test::SetTensor(&bottom[0]->data(), FLOAT, {1, 2, 3, 4, 5, 6, 7, 8});
    test::SetTensor(&bottom[1]->data(), FLOAT, {0, 1, 2, 3});
    out->Forward(bottom.vec, {});
  }
  std::ofstream(dir / "list.txt") << "out.h5\n";
  HDF5DataLayer<float, float> in(test::MakeParam<test::TypePair<float, float>>(
      "name: 'in' type: 'HDF5Data' top: 'data' top: 'label' hdf5_data_param { source: '" + (dir / "list.txt") +
      "' batch_size: 4 }"));
  test::Blobs top;
  top.add(FLOAT);
  top.add(FLOAT);
  in.SetUp({}, top.vec);
  in.Forward({}, top.vec);
  EXPECT_EQ(test::GetData(*top[0]), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(test::GetData(*top[1]), (std::vector<double>{0, 1, 2, 3}));
}

TEST(HDF5OutputLayer, Errors) {
  test::TempDir dir;
  auto setup = [&](const std::string& param) {
    HDF5OutputLayer<float, float> layer(test::MakeParam<test::TypePair<float, float>>(param));
    test::Blobs bottom;
    bottom.add({2, 3}, FLOAT);
    layer.SetUp(bottom.vec, {});
  };
  try {
    setup("type: 'HDF5Output'");
    ADD_FAILURE() << "accepted no file_name";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "hdf5_output_param.file_name");
  }
  try {
    setup("type: 'HDF5Output' hdf5_output_param { file_name: '" + (dir / "no_such_dir/out.h5") + "' }");
    ADD_FAILURE() << "created a file in a missing folder";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "hdf5_output_param.file_name");
    EXPECT_NE(std::string(e.what()).find("cannot create the HDF5 file"), std::string::npos) << e.what();
  }
  // A label row count that is not the data's.
  {
    auto layer = Fp32Output(dir / "rows.h5");
    test::Blobs bottom;
    bottom.add({2, 3}, FLOAT);
    bottom.add({3}, FLOAT);
    try {
      layer->SetUp(bottom.vec, {});
      ADD_FAILURE() << "accepted 3 labels for 2 rows";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "bottom[1]");
      EXPECT_NE(std::string(e.what()).find("has 3 rows"), std::string::npos) << e.what();
    }
  }
  // Two layers writing one file (an HDF5Output in the train and the test net).
  {
    test::Blobs bottom;
    bottom.add({2, 3}, FLOAT);
    auto first = Fp32Output(dir / "twice.h5");
    first->SetUp(bottom.vec, {});
    auto second = Fp32Output(dir / "twice.h5");
    try {
      second->SetUp(bottom.vec, {});
      ADD_FAILURE() << "two writers of one file";
    } catch (const FieldError& e) {
      EXPECT_NE(std::string(e.what()).find("already open for writing by another HDF5Output layer"), std::string::npos)
          << e.what();
    }
    first.reset();
    second->SetUp(bottom.vec, {});  // free again once the first is gone
  }
  // Rows of another shape than the first batch's.
  auto layer = Fp32Output(dir / "out.h5");
  test::Blobs bottom;
  bottom.add({2, 3}, FLOAT);
  layer->SetUp(bottom.vec, {});
  layer->Forward(bottom.vec, {});
  bottom[0]->Reshape({2, 4});
  try {
    layer->Forward(bottom.vec, {});
    ADD_FAILURE() << "appended rows of another shape";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dataset 'data': rows of another shape"), std::string::npos) << e.what();
  }
}

#else

TEST(HDF5OutputLayer, ABuildWithoutHdf5SaysSo) {
  test::TempDir dir;
  HDF5OutputLayer<float, float> layer(test::MakeParam<test::TypePair<float, float>>(
      "type: 'HDF5Output' hdf5_output_param { file_name: '" + (dir / "out.h5") + "' }"));
  test::Blobs bottom;
  bottom.add({2, 3}, FLOAT);
  try {
    layer.SetUp(bottom.vec, {});
    ADD_FAILURE() << "SetUp worked without HDF5";
  } catch (const FieldError& e) {
    EXPECT_NE(std::string(e.what()).find("no HDF5 support"), std::string::npos) << e.what();
  }
}

#endif

}  // namespace
}  // namespace cortado
