// Files written the other frameworks' way, built here from the published
// formats with the real protobuf classes (and, for Cortado's own earlier
// field numbers, byte by byte): NVCaffe's raw_data blobs (FLOAT16, FLOAT,
// DOUBLE) in weights, mean files and solver states; Caffe's history order
// for Adam and AdaDelta (every first buffer, then every second), Cortado's
// earlier interleaved order, and what Cortado writes under
// store_blobs_in_old_format.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cortado/data/data_transformer.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/layer.hpp"
#include "cortado/net/net.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/util/rng.hpp"
#include "solvers/rule_check.hpp"
#include "temp_dir.hpp"

namespace cortado {
namespace {

// ---- the published formats, encoded here ----------------------------------------------

// NVCaffe's raw_data: each value's little-endian bytes in type t, placed
// byte by byte (independent of the host's order and of Cortado's writer).
std::string RawBytes(Type t, const std::vector<double>& values) {
  std::string out;
  auto put = [&](uint64_t bits, int bytes) {
    for (int b = 0; b < bytes; ++b) out.push_back(static_cast<char>((bits >> (8 * b)) & 0xff));
  };
  for (double v : values) {
    if (t == FLOAT16) {
      put(float16(static_cast<float>(v)).x, 2);
    } else if (t == FLOAT) {
      const float f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      put(u, 4);
    } else {
      uint64_t u;
      std::memcpy(&u, &v, 8);
      put(u, 8);
    }
  }
  return out;
}

// What a value becomes once stored in type t.
double Stored(Type t, double v) {
  if (t == FLOAT16) return float(float16(static_cast<float>(v)));
  if (t == FLOAT) return static_cast<float>(v);
  return v;
}

BlobProto RawBlob(const std::vector<int>& shape, Type t, const std::vector<double>& values) {
  BlobProto b;
  for (int d : shape) b.mutable_shape()->add_dim(d);
  b.set_raw_data_type(t);
  b.set_raw_data(RawBytes(t, values));
  return b;
}

// Caffe's format: float `data`.
BlobProto FloatBlob(const std::vector<int>& shape, const std::vector<double>& values) {
  BlobProto b;
  for (int d : shape) b.mutable_shape()->add_dim(d);
  for (double v : values) b.add_data(static_cast<float>(v));
  return b;
}

template <typename T>
std::string BitsOf(const T* v, size_t n) {
  std::string out(n * sizeof(T), '\0');
  std::memcpy(out.data(), v, out.size());  // the tests run on little-endian hosts (x86, ARM)
  return out;
}

NetParameter ParseNet(const std::string& text) {
  NetParameter p;
  ParseTextProto(text, "net.prototxt", &p);
  return p;
}

using test::MakeSolver;  // solvers/rule_check.hpp

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define CORTADO_EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "want '" << (part) << "' in: " << (text)

// ---- weights ---------------------------------------------------------------------

// y = W x + b, W (2, 3), b (2), in the given storage type.
std::string IpNet(Type t) {
  return str_cat("default_forward_type: ", type_name(t), " default_backward_type: ", type_name(t), R"(
  layer { name: "x" type: "DummyData" top: "x" dummy_data_param { shape { dim: 1 dim: 3 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" inner_product_param { num_output: 2 } })");
}

const std::vector<double> kW = {0.5, -1.25, 2, 0.375, -3.75, 1};  // exact in FP16
const std::vector<double> kB = {0.1, -0.001};                     // not exact in FP16 or FP32

TEST(CaffeFiles, RawBlobsOfEveryTypeLoadIntoFp32AndFp16Nets) {
  test::TempDir dir;
  for (Type file : {FLOAT16, FLOAT, DOUBLE}) {
    NetParameter weights;
    weights.set_name("nvcaffe");
    LayerParameter* l = weights.add_layer();
    l->set_name("ip");
    l->set_type("InnerProduct");
    *l->add_blobs() = RawBlob({2, 3}, file, kW);
    *l->add_blobs() = RawBlob({2}, file, kB);
    const std::string path = dir / str_cat("w_", type_short(file), ".caffemodel");
    WriteBinaryProto(path, weights);
    for (Type net_type : {FLOAT, FLOAT16}) {
      SCOPED_TRACE(str_cat("file ", type_name(file), ", net ", type_name(net_type)));
      Net net(ParseNet(IpNet(net_type)));
      net.CopyTrainedLayersFrom(path);
      const Blob& w = *net.layer_by_name("ip")->blobs()[0];
      const Blob& b = *net.layer_by_name("ip")->blobs()[1];
      for (size_t i = 0; i < kW.size(); ++i) {
        if (net_type == FLOAT) {
          EXPECT_EQ(w.cpu_data<float>()[i], static_cast<float>(Stored(file, kW[i]))) << i;
        } else {
          EXPECT_EQ(w.cpu_data<float16>()[i].x, float16(static_cast<float>(Stored(file, kW[i]))).x) << i;
        }
      }
      for (size_t i = 0; i < kB.size(); ++i) {
        if (net_type == FLOAT) {
          EXPECT_EQ(b.cpu_data<float>()[i], static_cast<float>(Stored(file, kB[i]))) << i;
        } else {
          EXPECT_EQ(b.cpu_data<float16>()[i].x, float16(static_cast<float>(Stored(file, kB[i]))).x) << i;
        }
      }
      // A forward pass reads them: y = W x + b with x = 0.
      net.Forward();
      EXPECT_NEAR(net.blob_by_name("y")->cpu_data<float>()[0], Stored(file, kB[0]), net_type == FLOAT ? 1e-7 : 1e-4);
    }
  }
}

TEST(CaffeFiles, RawBlobWithWrongByteCountOrNoTypeNamesTheBlob) {
  test::TempDir dir;
  NetParameter weights;
  LayerParameter* l = weights.add_layer();
  l->set_name("ip");
  *l->add_blobs() = RawBlob({2, 3}, FLOAT16, {1, 2, 3, 4, 5});  // 10 bytes for 6 values
  *l->add_blobs() = RawBlob({2}, FLOAT16, kB);
  const std::string path = dir / "short.caffemodel";
  WriteBinaryProto(path, weights);
  Net net(ParseNet(IpNet(FLOAT)));
  std::string e = ErrorOf([&] { net.CopyTrainedLayersFrom(path); });
  CORTADO_EXPECT_CONTAINS(e, path + ": layer 'ip' parameter 0");
  CORTADO_EXPECT_CONTAINS(e, "raw_data holds 10 bytes where shape (2, 3) needs 12");

  l->mutable_blobs(0)->clear_raw_data_type();
  *l->mutable_blobs(0)->mutable_raw_data() = RawBytes(FLOAT16, kW);
  WriteBinaryProto(path, weights);
  e = ErrorOf([&] { net.CopyTrainedLayersFrom(path); });
  CORTADO_EXPECT_CONTAINS(e, path + ": layer 'ip' parameter 0: raw_data without raw_data_type");
}

// A mean file as NVCaffe's tools write it (raw FLOAT16) is subtracted
// value for value.
TEST(CaffeFiles, RawFp16MeanFile) {
  test::TempDir dir;
  const std::vector<double> mean = {1, 2.5, 3, 4.25, 5, 6.5, 7, 8.75};  // exact in FP16
  const std::string path = dir / "mean.binaryproto";
  WriteBinaryProto(path, RawBlob({1, 2, 2, 2}, FLOAT16, mean));
  TransformationParameter tp;
  tp.set_mean_file(path);
  tp.set_scale(0.5);
  DataTransformer t(tp, TEST, "data", "Data");
  Datum d;
  d.set_channels(2);
  d.set_height(2);
  d.set_width(2);
  std::string pixels;
  for (int i = 0; i < 8; ++i) pixels.push_back(static_cast<char>(10 * (i + 1)));
  d.set_data(pixels);
  std::vector<float> out(8);
  t.Transform(d, out.data(), nullptr);
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out[i], (10.0 * (i + 1) - mean[i]) * 0.5) << i;

  // The wrong byte count is the field's error, naming the file.
  WriteBinaryProto(path, RawBlob({1, 2, 2, 2}, FLOAT16, {1, 2, 3}));
  try {
    DataTransformer bad(tp, TEST, "data", "Data");
    ADD_FAILURE() << "a short raw mean was accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "transform_param.mean_file");
    CORTADO_EXPECT_CONTAINS(e.what(), "'" + path + "': raw_data holds 6 bytes where shape (1, 2, 2, 2) needs 16");
  }
}

// ---- solver state ------------------------------------------------------------------

// Two parameters of the same shape side by side (a's and b's weights, (2, 2),
// no biases): a state read in the wrong order swaps buffers silently unless
// the values tell them apart.
std::string TwinNet() {
  return R"(
  layer { name: "x" type: "DummyData" top: "x"
    dummy_data_param { shape { dim: 2 dim: 2 } data_filler { type: "constant" value: 1 } } }
  layer { name: "a" type: "InnerProduct" bottom: "x" top: "ya"
    inner_product_param { num_output: 2 bias_term: false weight_filler { type: "constant" value: 0.5 } } }
  layer { name: "b" type: "InnerProduct" bottom: "ya" top: "yb"
    inner_product_param { num_output: 2 bias_term: false weight_filler { type: "constant" value: 0.25 } } }
  layer { name: "l" type: "Flatten" bottom: "yb" top: "loss" loss_weight: 1 })";
}

// Buffer k of parameter i, element e: distinct, positive, exact in FP16.
double HistoryValue(int i, int k, int e) { return 100 * k + 10 * i + e + 1; }
// The weights in the file: a = 0.5 + e/8, b = -0.25 - e/16 (exact in FP16).
double WeightValue(int i, int e) { return i == 0 ? 0.5 + e / 8.0 : -0.25 - e / 16.0; }

enum class Writer { kBvlc, kNvcaffe, kCortadoInterleaved };

// A state for the twin net with two buffers per parameter, as `writer`
// writes it: BVLC (float data, Caffe's order), NVCaffe (raw FLOAT16, Caffe's
// order, its plateau fields, the weights' path as its run saw it), or
// Cortado before history_order (float data, rng_state, interleaved).
std::string WriteTwinState(const test::TempDir& dir, Writer writer) {
  const bool raw = writer == Writer::kNvcaffe;
  NetParameter weights;
  for (int i = 0; i < 2; ++i) {
    LayerParameter* l = weights.add_layer();
    l->set_name(i == 0 ? "a" : "b");
    std::vector<double> w;
    for (int e = 0; e < 4; ++e) w.push_back(WeightValue(i, e));
    *l->add_blobs() = raw ? RawBlob({2, 2}, FLOAT16, w) : FloatBlob({2, 2}, w);
  }
  WriteBinaryProto(dir / "twin.caffemodel", weights);
  SolverState state;
  state.set_iter(3);
  state.set_learned_net(raw ? "/a/folder/of/the/nvcaffe/run/twin.caffemodel" : "twin.caffemodel");
  if (raw) {
    state.set_minimum_loss(2.5f);
    state.set_iter_last_event(1);
  }
  auto add = [&](int i, int k) {
    std::vector<double> h;
    for (int e = 0; e < 4; ++e) h.push_back(HistoryValue(i, k, e));
    *state.add_history() = raw ? RawBlob({2, 2}, FLOAT16, h) : FloatBlob({2, 2}, h);
  };
  if (writer == Writer::kCortadoInterleaved) {
    set_random_seed(5);
    state.set_rng_state(rng_state());
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 2; ++k) add(i, k);
  } else {
    for (int k = 0; k < 2; ++k)
      for (int i = 0; i < 2; ++i) add(i, k);
  }
  const std::string path = dir / "twin.solverstate";
  WriteBinaryProto(path, state);
  return path;
}

void ExpectTwinRestored(Solver& s) {
  EXPECT_EQ(s.iter(), 3);
  for (int i = 0; i < 2; ++i) {
    const Blob& w = *s.net()->learnable_params()[i];
    for (int e = 0; e < 4; ++e) EXPECT_EQ(w.cpu_data<float>()[e], WeightValue(i, e)) << "param " << i << " index " << e;
    for (int k = 0; k < 2; ++k)
      for (int e = 0; e < 4; ++e)
        EXPECT_EQ(s.history(i, k).cpu_data<float>()[e], HistoryValue(i, k, e))
            << "param " << i << " buffer " << k << " index " << e;
  }
}

const char* kAdam = "type: 'Adam' base_lr: 0.01 momentum: 0.9 momentum2: 0.999 delta: 1e-8 lr_policy: 'fixed' max_iter: 10";
const char* kAdaDelta = "type: 'AdaDelta' base_lr: 1 momentum: 0.95 delta: 1e-6 lr_policy: 'fixed' max_iter: 10";

// After the restore, one Adam step at t = 4 moves b's weights by Adam's
// formula with the restored m and v: swapped buffers would move them far
// otherwise. b's gradient: dL/dWb[j][k] = sum_n ya[n][k] = 2 * sum_m Wa[k][m].
void ExpectAdamStepUsesRestoredBuffers(Solver& s) {
  s.Step(1);
  const double b1 = 0.9f, b2 = 0.999f, delta = 1e-8f, lr = 0.01f;
  const double step = lr * std::sqrt(1 - std::pow(b2, 4)) / (1 - std::pow(b1, 4));
  const Blob& wb = *s.net()->learnable_params()[1];
  for (int j = 0; j < 2; ++j)
    for (int k = 0; k < 2; ++k) {
      const int e = j * 2 + k;
      const double g = 2 * (WeightValue(0, k * 2) + WeightValue(0, k * 2 + 1));
      const double m = b1 * HistoryValue(1, 0, e) + (1 - b1) * g;
      const double v = b2 * HistoryValue(1, 1, e) + (1 - b2) * g * g;
      const double want = WeightValue(1, e) - step * m / (std::sqrt(v) + delta);
      EXPECT_NEAR(wb.cpu_data<float>()[e], want, 1e-6) << "b's weight " << e;
    }
}

TEST(CaffeFiles, ResumeBvlcAdamAndAdaDeltaStateInCaffesOrder) {
  for (const char* solver : {kAdam, kAdaDelta}) {
    SCOPED_TRACE(solver);
    test::TempDir dir;
    const std::string state = WriteTwinState(dir, Writer::kBvlc);
    auto s = MakeSolver(solver, TwinNet());
    s->Restore(state);
    ExpectTwinRestored(*s);
    if (solver == kAdam) ExpectAdamStepUsesRestoredBuffers(*s);
  }
}

TEST(CaffeFiles, ResumeNvcaffeRawFp16AdamState) {
  for (Type data : {FLOAT, FLOAT16}) {
    SCOPED_TRACE(type_name(data));
    test::TempDir dir;
    const std::string state = WriteTwinState(dir, Writer::kNvcaffe);
    auto s = MakeSolver(str_cat(kAdam, " solver_data_type: ", type_name(data)), TwinNet());
    s->Restore(state);  // the weights' path of the NVCaffe run is not here: the file beside the state is read
    ExpectTwinRestored(*s);
    if (data == FLOAT) ExpectAdamStepUsesRestoredBuffers(*s);
  }
}

TEST(CaffeFiles, ResumeEarlierCortadoInterleavedState) {
  test::TempDir dir;
  const std::string path = WriteTwinState(dir, Writer::kCortadoInterleaved);
  auto s = MakeSolver(kAdam, TwinNet());
  s->Restore(path);
  ExpectTwinRestored(*s);
  ExpectAdamStepUsesRestoredBuffers(*s);

  // history_order, where present, decides; an unknown order is an error.
  SolverState state;
  ReadBinaryProto(path, &state);
  state.set_history_order(1);
  WriteBinaryProto(path, state);
  auto explicit_order = MakeSolver(kAdam, TwinNet());
  explicit_order->Restore(path);
  ExpectTwinRestored(*explicit_order);
  state.set_history_order(7);
  WriteBinaryProto(path, state);
  CORTADO_EXPECT_CONTAINS(ErrorOf([&] { MakeSolver(kAdam, TwinNet())->Restore(path); }), path + ": history_order = 7");
}

TEST(CaffeFiles, ResumeStateWithWrongShapeNamesTheParameterAndFile) {
  test::TempDir dir;
  const std::string path = WriteTwinState(dir, Writer::kBvlc);
  SolverState state;
  ReadBinaryProto(path, &state);
  *state.mutable_history(3) = FloatBlob({4}, {1, 2, 3, 4});  // b's second buffer in Caffe's order
  WriteBinaryProto(path, state);
  const std::string e = ErrorOf([&] { MakeSolver(kAdam, TwinNet())->Restore(path); });
  CORTADO_EXPECT_CONTAINS(e, path + ": history blob 3 (buffer 1 of layer 'b' parameter 0, Caffe's order)");
  CORTADO_EXPECT_CONTAINS(e, "has shape (4) in the file and (2, 2) in the net");
}

// What Cortado writes: Caffe's order with history_order 0 said explicitly.
TEST(CaffeFiles, SnapshotWritesCaffesOrderAndSaysSo) {
  test::TempDir dir;
  auto s = MakeSolver(str_cat(kAdam, " random_seed: 3 snapshot_prefix: '", dir / "run", "'"), TwinNet());
  s->Step(2);
  s->Snapshot();
  SolverState state;
  ReadBinaryProto(dir / "run_iter_2.solverstate", &state);
  ASSERT_TRUE(state.has_history_order());
  EXPECT_EQ(state.history_order(), 0);
  ASSERT_EQ(state.history_size(), 4);
  for (int k = 0; k < 2; ++k)
    for (int i = 0; i < 2; ++i) {
      const BlobProto& b = state.history(k * 2 + i);
      ASSERT_EQ(b.data_size(), 4);
      for (int e = 0; e < 4; ++e)
        EXPECT_EQ(b.data(e), s->history(i, k).cpu_data<float>()[e]) << "param " << i << " buffer " << k;
    }
  // The two buffers differ (m and v), so the check above tells the orders apart.
  EXPECT_NE(s->history(0, 0).cpu_data<float>()[0], s->history(0, 1).cpu_data<float>()[0]);
}

// ---- store_blobs_in_old_format -----------------------------------------------------

std::string HalfNet() {
  return R"(default_forward_type: FLOAT16 default_backward_type: FLOAT16
  layer { name: "x" type: "DummyData" top: "x"
    dummy_data_param { shape { dim: 2 dim: 3 } data_filler { type: "uniform" min: 0.5 max: 1.5 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
    inner_product_param { num_output: 2 weight_filler { type: "uniform" min: 1 max: 2 }
                          bias_filler { type: "constant" value: 2 } } }
  layer { name: "l" type: "Flatten" bottom: "y" top: "loss" loss_weight: 1 })";
}

TEST(CaffeFiles, SnapshotRawFp16WhenStoreBlobsInOldFormatIsFalse) {
  test::TempDir dir;
  const std::string text = str_cat("base_lr: 0.01 momentum: 0.9 lr_policy: 'fixed' max_iter: 4 random_seed: 7 ",
                                   "solver_data_type: FLOAT16 store_blobs_in_old_format: false snapshot_prefix: '",
                                   dir / "raw", "'");
  auto full = MakeSolver(text, HalfNet());
  full->Step(4);
  auto first = MakeSolver(text, HalfNet());
  first->Step(2);
  first->Snapshot();

  NetParameter weights;
  ReadBinaryProto(dir / "raw_iter_2.caffemodel", &weights);
  const LayerParameter* ip = nullptr;
  for (const LayerParameter& l : weights.layer())
    if (l.name() == "ip") ip = &l;
  ASSERT_NE(ip, nullptr);
  ASSERT_EQ(ip->blobs_size(), 2);
  for (int j = 0; j < 2; ++j) {
    const BlobProto& b = ip->blobs(j);
    const Blob& w = *first->net()->learnable_params()[j];
    EXPECT_EQ(b.data_size(), 0);
    ASSERT_EQ(b.raw_data_type(), FLOAT16);
    EXPECT_EQ(b.raw_data(), BitsOf(w.cpu_data<float16>(), w.count())) << "parameter " << j;
  }
  SolverState state;
  ReadBinaryProto(dir / "raw_iter_2.solverstate", &state);
  EXPECT_TRUE(state.has_history_order());
  ASSERT_EQ(state.history_size(), 2);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(state.history(i).raw_data_type(), FLOAT16);
    const Blob& h = first->history(i);
    EXPECT_EQ(state.history(i).raw_data(), BitsOf(h.cpu_data<float16>(), h.count())) << "history " << i;
  }

  // Read back bit for bit, and the run goes on as if it had never stopped.
  auto resumed = MakeSolver(text, HalfNet());
  resumed->Restore(dir / "raw_iter_2.solverstate");
  for (int i = 0; i < 2; ++i) {
    const Blob& a = *first->net()->learnable_params()[i];
    const Blob& b = *resumed->net()->learnable_params()[i];
    EXPECT_EQ(BitsOf(a.cpu_data<float16>(), a.count()), BitsOf(b.cpu_data<float16>(), b.count()));
  }
  resumed->Step(2);
  for (int i = 0; i < 2; ++i) {
    const Blob& a = *full->net()->learnable_params()[i];
    const Blob& b = *resumed->net()->learnable_params()[i];
    EXPECT_EQ(BitsOf(a.cpu_data<float16>(), a.count()), BitsOf(b.cpu_data<float16>(), b.count())) << "param " << i;
    EXPECT_EQ(BitsOf(full->history(i).cpu_data<float16>(), a.count()),
              BitsOf(resumed->history(i).cpu_data<float16>(), b.count()))
        << "history " << i;
  }
}

// FP16 layers with FLOAT solver data hold FP32 master weights: the raw
// format writes them as FLOAT (as NVCaffe, whose update leaves them in the
// solver's type), so nothing of them is lost.
TEST(CaffeFiles, SnapshotRawKeepsFp32MasterWeights) {
  test::TempDir dir;
  auto s = MakeSolver(str_cat("base_lr: 0.01 momentum: 0.9 lr_policy: 'fixed' max_iter: 2 random_seed: 7 ",
                              "store_blobs_in_old_format: false snapshot_prefix: '", dir / "m", "'"),
                      HalfNet());
  s->Step(2);
  s->Snapshot();
  NetParameter weights;
  ReadBinaryProto(dir / "m_iter_2.caffemodel", &weights);
  const Blob& w = *s->net()->learnable_params()[0];
  ASSERT_EQ(w.data_type(), FLOAT);
  for (const LayerParameter& l : weights.layer()) {
    if (l.name() != "ip") continue;
    ASSERT_EQ(l.blobs(0).raw_data_type(), FLOAT);
    EXPECT_EQ(l.blobs(0).raw_data(), BitsOf(w.cpu_data<float>(), w.count()));
  }
}

TEST(CaffeFiles, SnapshotDefaultWritesCaffesFloatData) {
  for (const char* field : {"", "store_blobs_in_old_format: true"}) {
    SCOPED_TRACE(field);
    test::TempDir dir;
    auto s = MakeSolver(str_cat("base_lr: 0.01 momentum: 0.9 lr_policy: 'fixed' max_iter: 2 random_seed: 7 ",
                                "solver_data_type: FLOAT16 ", field, " snapshot_prefix: '", dir / "f", "'"),
                        HalfNet());
    s->Step(1);
    s->Snapshot();
    NetParameter weights;
    ReadBinaryProto(dir / "f_iter_1.caffemodel", &weights);
    int blobs = 0;
    for (const LayerParameter& l : weights.layer())
      for (const BlobProto& b : l.blobs()) {
        ++blobs;
        EXPECT_FALSE(b.has_raw_data());
        EXPECT_EQ(b.data_size(), b.shape().dim(0) * (b.shape().dim_size() > 1 ? b.shape().dim(1) : 1));
      }
    EXPECT_EQ(blobs, 2);
    SolverState state;
    ReadBinaryProto(dir / "f_iter_1.solverstate", &state);
    for (const BlobProto& h : state.history()) {
      EXPECT_FALSE(h.has_raw_data());
      EXPECT_GT(h.data_size(), 0);
    }
  }
}

// ---- Cortado's earlier field numbers -------------------------------------------------

// Protobuf's wire format, for the fields the schema no longer names.
std::string Varint(uint64_t v) {
  std::string out;
  do {
    out.push_back(static_cast<char>((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
    v >>= 7;
  } while (v);
  return out;
}
std::string Field(int number, const std::string& bytes) {  // length-delimited
  return Varint(static_cast<uint64_t>(number) << 3 | 2) + Varint(bytes.size()) + bytes;
}
std::string FieldVarint(int number, uint64_t v) { return Varint(static_cast<uint64_t>(number) << 3) + Varint(v); }

// Weights written before Cortado took NVCaffe's numbers: a LayerParameter
// with recurrent_param at 1003 (num_output 4 inside) and a DataParameter
// with threads at 1000 still read, their blobs intact.
TEST(CaffeFiles, WeightsWithEarlierCortadoFieldNumbersStillRead) {
  test::TempDir dir;
  LayerParameter ip;
  ip.set_name("ip");
  ip.set_type("InnerProduct");
  *ip.add_blobs() = FloatBlob({2, 3}, kW);
  *ip.add_blobs() = FloatBlob({2}, kB);
  LayerParameter data;
  data.set_name("x");
  data.set_type("Data");
  const std::string ip_bytes = ip.SerializeAsString() + Field(1003, FieldVarint(1, 4));
  const std::string data_bytes = data.SerializeAsString() + Field(107, FieldVarint(1000, 3) + FieldVarint(4, 8));
  const std::string file = Field(1, "old") + Field(100, data_bytes) + Field(100, ip_bytes);
  NetParameter parsed;
  ASSERT_TRUE(parsed.ParseFromString(file));
  ASSERT_EQ(parsed.layer_size(), 2);
  EXPECT_EQ(parsed.layer(0).data_param().batch_size(), 8u);  // the known field beside the old one
  const std::string path = dir / "old.caffemodel";
  {
    std::ofstream out(path, std::ios::binary);
    out << file;
  }
  Net net(ParseNet(IpNet(FLOAT)));
  net.CopyTrainedLayersFrom(path);
  const Blob& w = *net.layer_by_name("ip")->blobs()[0];
  for (size_t i = 0; i < kW.size(); ++i) EXPECT_EQ(w.cpu_data<float>()[i], static_cast<float>(kW[i]));
  EXPECT_EQ(net.layer_by_name("ip")->blobs()[1]->cpu_data<float>()[0], static_cast<float>(kB[0]));
}

}  // namespace
}  // namespace cortado
