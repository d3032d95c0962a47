// HDF5 weights (snapshot_format: HDF5, .caffemodel.h5): Caffe's layout
// (data/<layer>/<blob>) checked with the HDF5 C API, a file written by the C
// API loaded by Net::CopyTrainedLayersFrom, the errors, and a solver that
// snapshots in HDF5 and resumes bit-identically.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cortado/io/hdf5.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/util/rng.hpp"
#include "hdf5_util.hpp"
#include "temp_dir.hpp"
#include "test_util.hpp"

namespace cortado {
namespace {

std::unique_ptr<Solver> MakeSolver(const std::string& solver_text, const std::string& net_text) {
  SolverParameter sp;
  SourceInfo info;
  ParseTextProto(solver_text, "solver.prototxt", &sp, &info);
  ParseTextProto(net_text, "net.prototxt", sp.mutable_net_param());
  return Solver::Create(sp, info);
}

std::string Classifier(const char* type) {
  return str_cat("default_forward_type: ", type, " default_backward_type: ", type, R"(
  layer { name: "x" type: "DummyData" top: "x" top: "label"
    dummy_data_param { shape { dim: 8 dim: 6 } shape { dim: 8 } data_filler { type: "gaussian" } data_filler { type: "constant" value: 2 } } }
  layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h" inner_product_param { num_output: 10 weight_filler { type: "xavier" } bias_filler { type: "gaussian" } } }
  layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
  layer { name: "drop" type: "Dropout" bottom: "h" top: "h" dropout_param { dropout_ratio: 0.3 } }
  layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y" inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "y" bottom: "label" top: "loss" })");
}

#ifdef CORTADO_USE_HDF5

TEST(Hdf5Weights, CaffesLayoutAndRoundTrip) {
  test::TempDir dir;
  set_random_seed(3);
  auto a = MakeSolver("base_lr: 0.1 lr_policy: 'fixed' max_iter: 1", Classifier("FLOAT"));
  NetParameter p;
  a->net()->ToProto(&p, false);
  hdf5::WriteWeights(dir / "w.caffemodel.h5", p);
  EXPECT_FALSE(std::filesystem::exists(dir / "w.caffemodel.h5.tmp"));
  // data/ip1/0 is the (10, 6) weight, data/ip1/1 the (10) bias, as Caffe writes them.
  const auto& params = a->net()->learnable_params();
  std::vector<hsize_t> dims;
  const std::vector<float> w = test::ReadH5(dir / "w.caffemodel.h5", "data/ip1/0", &dims);
  EXPECT_EQ(dims, (std::vector<hsize_t>{10, 6}));
  ASSERT_EQ(w.size(), params[0]->count());
  for (size_t k = 0; k < w.size(); ++k) EXPECT_EQ(w[k], params[0]->cpu_data<float>()[k]);
  const std::vector<float> b = test::ReadH5(dir / "w.caffemodel.h5", "data/ip1/1", &dims);
  EXPECT_EQ(dims, (std::vector<hsize_t>{10}));
  EXPECT_EQ(b[3], params[1]->cpu_data<float>()[3]);
  test::ReadH5(dir / "w.caffemodel.h5", "data/ip2/0", &dims);
  EXPECT_EQ(dims, (std::vector<hsize_t>{4, 10}));

  // Another net (other random weights, FP16 layers) loads them back through
  // the .h5 suffix; the blobs keep the file's float values.
  set_random_seed(4);
  auto c = MakeSolver("base_lr: 0.1 lr_policy: 'fixed' max_iter: 1", Classifier("FLOAT16"));
  EXPECT_NE(c->net()->learnable_params()[0]->cpu_data<float>()[0], params[0]->cpu_data<float>()[0]);
  c->net()->CopyTrainedLayersFrom(dir / "w.caffemodel.h5");
  for (size_t i = 0; i < params.size(); ++i)
    for (size_t k = 0; k < params[i]->count(); ++k)
      ASSERT_EQ(c->net()->learnable_params()[i]->cpu_data<float>()[k], params[i]->cpu_data<float>()[k])
          << "param " << i << " index " << k;
}

TEST(Hdf5Weights, LoadsAFileWrittenByTheCApi) {
  test::TempDir dir;
  const std::string path = dir / "caffe.caffemodel.h5";
  {
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t data = H5Gcreate2(f, "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    for (const char* layer : {"ip2", "not_in_the_net"}) H5Gclose(H5Gcreate2(data, layer, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Gclose(data);
    H5Fclose(f);
  }
  // Datasets into the groups: a double weight and a float bias.
  {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t g = H5Gopen2(f, "data/ip2", H5P_DEFAULT);
    std::vector<double> w(40), bias = {1, 2, 3, 4};
    for (size_t k = 0; k < w.size(); ++k) w[k] = 0.25 * static_cast<double>(k);
    const hsize_t wd[2] = {4, 10}, bd[1] = {4};
    const hid_t ws = H5Screate_simple(2, wd, nullptr), bs = H5Screate_simple(1, bd, nullptr);
    const hid_t d0 = H5Dcreate2(g, "0", H5T_IEEE_F64LE, ws, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t d1 = H5Dcreate2(g, "1", H5T_IEEE_F32LE, bs, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d0, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, w.data());
    H5Dwrite(d1, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, bias.data());
    for (hid_t id : {d0, d1}) H5Dclose(id);
    for (hid_t id : {ws, bs}) H5Sclose(id);
    H5Gclose(g);
    H5Fclose(f);
  }
  auto s = MakeSolver("base_lr: 0.1 lr_policy: 'fixed' max_iter: 1", Classifier("FLOAT"));
  const float ip1_before = s->net()->learnable_params()[0]->cpu_data<float>()[0];
  s->net()->CopyTrainedLayersFrom(path);
  const auto& params = s->net()->learnable_params();
  EXPECT_EQ(params[0]->cpu_data<float>()[0], ip1_before) << "ip1 is not in the file: unchanged";
  for (int k = 0; k < 40; ++k) EXPECT_EQ(params[2]->cpu_data<float>()[k], 0.25f * static_cast<float>(k));
  EXPECT_EQ(params[3]->cpu_data<float>()[3], 4.0f);
}

TEST(Hdf5Weights, Errors) {
  test::TempDir dir;
  auto s = MakeSolver("base_lr: 0.1 lr_policy: 'fixed' max_iter: 1", Classifier("FLOAT"));
  auto error = [&](const std::string& path) {
    try {
      s->net()->CopyTrainedLayersFrom(path);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "loaded " << path;
    return std::string();
  };
  std::ofstream(dir / "text.h5") << "not HDF5\n";
  EXPECT_NE(error(dir / "text.h5").find(dir / "text.h5" + ": cannot open as an HDF5 file"), std::string::npos);
  EXPECT_NE(error(dir / "missing.h5").find(dir / "missing.h5" + ": no such file"), std::string::npos);
  test::WriteH5(dir / "features.h5", {{"label", {2}, {1, 2}, H5T_IEEE_F32LE}});
  EXPECT_NE(error(dir / "features.h5").find("no group 'data': not Caffe HDF5 weights"), std::string::npos);
  // A blob of the wrong shape: the net's message, naming the file.
  NetParameter p;
  p.add_layer()->set_name("ip2");
  BlobProto* w = p.mutable_layer(0)->add_blobs();
  w->mutable_shape()->add_dim(3);
  w->add_data(1);
  w->add_data(2);
  w->add_data(3);
  *p.mutable_layer(0)->add_blobs() = *w;
  hdf5::WriteWeights(dir / "shape.h5", p);
  EXPECT_NE(error(dir / "shape.h5").find(dir / "shape.h5" + ": layer 'ip2' parameter 0 has shape"), std::string::npos);
}

TEST(Hdf5Weights, LayerNamesWithASlashAreRefusedUpFront) {
  // Caffe's layout makes a group of each layer name; HDF5 would read
  // "ip1/x" as a path. The solver says so at set-up, not at the first snapshot.
  std::string net = Classifier("FLOAT");
  net.replace(net.find("name: \"ip1\""), 11, "name: \"ip1/x\"");
  try {
    MakeSolver("base_lr: 0.1 lr_policy: 'fixed' max_iter: 1 snapshot_format: HDF5", net);
    ADD_FAILURE() << "accepted layer 'ip1/x' with HDF5 snapshots";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("snapshot_format"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'ip1/x'"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(MakeSolver("base_lr: 0.1 lr_policy: 'fixed' max_iter: 1", net)) << "binary proto snapshots hold it";
  // A file where such a name became a subgroup (data/ip2/bn) is an error, not a silent skip.
  test::TempDir dir;
  const std::string path = dir / "slash.caffemodel.h5";
  {
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    H5Gclose(H5Gcreate2(f, "data/ip2/bn", lcpl, H5P_DEFAULT, H5P_DEFAULT));
    H5Pclose(lcpl);
    H5Fclose(f);
  }
  auto s = MakeSolver("base_lr: 0.1 lr_policy: 'fixed' max_iter: 1", Classifier("FLOAT"));
  try {
    s->net()->CopyTrainedLayersFrom(path);
    ADD_FAILURE() << "loaded data/ip2/bn";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data/ip2 holds 'bn'"), std::string::npos) << e.what();
  }
}

TEST(Hdf5Weights, ScalarBlobsRoundTrip) {
  // A channel-shared PReLU slope is a blob with no axes: written as an HDF5
  // scalar, read back as one.
  test::TempDir dir;
  const std::string net = str_cat(R"(
    layer { name: "x" type: "DummyData" top: "x" top: "label"
      dummy_data_param { shape { dim: 4 dim: 6 } shape { dim: 4 } data_filler { type: "gaussian" } data_filler { type: "constant" value: 1 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "x" top: "h" inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
    layer { name: "prelu" type: "PReLU" bottom: "h" top: "h" prelu_param { channel_shared: true filler { type: "constant" value: 0.3 } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "h" bottom: "label" top: "loss" })");
  auto a = MakeSolver("base_lr: 0.1 lr_policy: 'fixed' max_iter: 1", net);
  NetParameter p;
  a->net()->ToProto(&p, false);
  hdf5::WriteWeights(dir / "s.h5", p);
  NetParameter q;
  hdf5::ReadWeights(dir / "s.h5", &q);
  bool found = false;
  for (const LayerParameter& l : q.layer()) {
    if (l.name() != "prelu") continue;
    found = true;
    ASSERT_EQ(l.blobs_size(), 1);
    EXPECT_EQ(l.blobs(0).shape().dim_size(), 0);
    ASSERT_EQ(l.blobs(0).data_size(), 1);
    EXPECT_EQ(l.blobs(0).data(0), 0.3f);
  }
  EXPECT_TRUE(found);
  auto b = MakeSolver("base_lr: 0.1 lr_policy: 'fixed' max_iter: 1", net);
  EXPECT_NO_THROW(b->net()->CopyTrainedLayersFrom(dir / "s.h5"));
}

TEST(Hdf5Weights, AHugeDatasetIsAnErrorNotAnOverflow) {
  // 65536 x 65537 values, chunked and never written, so the file is tiny.
  test::TempDir dir;
  const std::string path = dir / "huge.h5";
  {
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    const hsize_t dims[2] = {65536, 65537}, chunk[2] = {1, 1024};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    H5Dclose(H5Dcreate2(f, "data/ip2/0", H5T_IEEE_F32LE, space, lcpl, dcpl, H5P_DEFAULT));
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Pclose(lcpl);
    H5Fclose(f);
  }
  NetParameter p;
  try {
    hdf5::ReadWeights(path, &p);
    ADD_FAILURE() << "read 2^32 values into a weights blob";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than a weights blob may hold"), std::string::npos) << e.what();
  }
}

class Hdf5Snapshot : public ::testing::TestWithParam<const char*> {};

TEST_P(Hdf5Snapshot, SnapshotThenResumeIsBitIdentical) {
  test::TempDir dir;
  const std::string solver = str_cat("base_lr: 0.05 lr_policy: 'inv' gamma: 0.01 power: 0.75 momentum: 0.9 ",
                                     "weight_decay: 0.001 random_seed: 7 max_iter: 12 snapshot: 6 ",
                                     "snapshot_format: HDF5 snapshot_prefix: '", dir / "run", "'");
  auto full = MakeSolver(solver, Classifier(GetParam()));
  full->Solve();
  ASSERT_TRUE(std::filesystem::exists(dir / "run_iter_6.caffemodel.h5"));
  ASSERT_TRUE(std::filesystem::exists(dir / "run_iter_6.solverstate"));
  ASSERT_FALSE(std::filesystem::exists(dir / "run_iter_6.caffemodel"));
  set_random_seed(12345);
  auto resumed = MakeSolver(solver, Classifier(GetParam()));
  resumed->Solve(dir / "run_iter_6.solverstate");
  EXPECT_EQ(resumed->iter(), 12);
  const auto& a = full->net()->learnable_params();
  const auto& b = resumed->net()->learnable_params();
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t k = 0; k < a[i]->count(); ++k)
      ASSERT_EQ(a[i]->cpu_data<float>()[k], b[i]->cpu_data<float>()[k]) << "param " << i << " index " << k;
}

INSTANTIATE_TEST_SUITE_P(Types, Hdf5Snapshot, ::testing::Values("DOUBLE", "FLOAT", "FLOAT16", "BFLOAT16"));

#else

TEST(Hdf5Weights, ABuildWithoutHdf5RefusesTheFormat) {
  try {
    MakeSolver("base_lr: 0.1 max_iter: 1 snapshot_format: HDF5", Classifier("FLOAT"));
    ADD_FAILURE() << "accepted snapshot_format: HDF5";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("snapshot_format"), std::string::npos) << e.what();
  }
}

#endif

}  // namespace
}  // namespace cortado
