// The C interface (include/cortado/c_api.h): every entry point catches what
// Cortado throws and turns it into -1 / NULL plus cortado_last_error(), so
// no C++ exception crosses into C or Python.
#include "cortado/c_api.h"

#include <glog/logging.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/io/hdf5.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/net/net.hpp"
#include "cortado/precision.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/switches.hpp"
#include "cortado/util/device.hpp"
#include "cortado/util/rng.hpp"

struct cortado_net {
  cortado::Net* net = nullptr;            // owned by `owned` or by a solver
  std::unique_ptr<cortado::Net> owned;
  // Whether a forward ran since the net was built or reshaped: backward
  // reads what forward left (on a GPU some layers check it with an abort).
  bool forwarded = false;
};

struct cortado_solver {
  std::unique_ptr<cortado::Solver> solver;
  cortado_net train;
  std::vector<cortado_net> tests;
};

namespace {

thread_local std::string t_error;

// Logging goes to stderr as the trainer's does (GLOG_minloglevel=1 hides
// the INFO lines); glog is set up once, unless the host program did.
void InitLogging() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!google::IsGoogleLoggingInitialized()) {
      FLAGS_log_year_in_prefix = false;  // Caffe's prefix, as the tools (util/tool_flags.hpp)
      google::InitGoogleLogging("cortado");
      FLAGS_logtostderr = true;
    }
  });
}

// Runs f, returning 0; on an exception records its message and returns -1.
template <typename F>
int Guarded(F&& f) {
  try {
    InitLogging();
    t_error.clear();
    f();
    return 0;
  } catch (const std::exception& e) {
    t_error = e.what();
  } catch (...) {
    t_error = "unknown error";
  }
  return -1;
}

std::shared_ptr<const cortado::Context> ContextFor(int gpu) {
  if (gpu < 0) return cortado::Context::Cpu();
  const int n = cortado::DeviceCount();
  if (gpu >= n) cortado::fail("gpu ", gpu, ": this build and machine have ", n, " CUDA device(s)");
  return cortado::Context::Create(gpu);
}

cortado::Blob* FindBlob(cortado_net* h, const char* blob, int layer, int param) {
  if (!h || !h->net) cortado::fail("no net");
  cortado::Net& net = *h->net;
  net.context().Activate();  // host copies go on the net's stream, on any thread
  if (layer < 0) {
    if (!blob || !net.has_blob(blob)) cortado::fail("net '", net.name(), "' has no blob '", blob ? blob : "", "'");
    return net.blob_by_name(blob).get();
  }
  if (layer >= static_cast<int>(net.layers().size())) cortado::fail("net '", net.name(), "' has no layer ", layer);
  auto& blobs = net.layers()[static_cast<size_t>(layer)]->blobs();
  if (param < 0 || param >= static_cast<int>(blobs.size())) {
    cortado::fail("layer '", net.layer_names()[static_cast<size_t>(layer)], "' has no parameter ", param, " (it has ",
                  blobs.size(), ")");
  }
  return blobs[static_cast<size_t>(param)].get();
}

void CheckCount(const cortado::Blob& b, int64_t count, const char* blob) {
  if (count != static_cast<int64_t>(b.count()))
    cortado::fail("blob '", blob ? blob : "parameter", "' of shape ", b.shape_string(), " holds ", b.count(),
                  " values, not ", count);
}

const char* NameAt(const std::vector<std::string>& names, int i) {
  return i >= 0 && i < static_cast<int>(names.size()) ? names[static_cast<size_t>(i)].c_str() : nullptr;
}

// The name of blob b in the net ("" if it has none).
const char* BlobName(const cortado::Net& net, const cortado::Blob* b) {
  for (size_t k = 0; k < net.blobs().size(); ++k)
    if (net.blobs()[k].get() == b) return net.blob_names()[k].c_str();
  return "";
}

// Checks that layers [lo, hi] exist (a range of Caffe's ForwardFromTo).
void CheckLayerRange(const cortado::Net& net, int lo, int hi, const char* what) {
  const int n = static_cast<int>(net.layers().size());
  if (lo < 0 || hi >= n || lo > hi)
    cortado::fail(what, ": layers ", lo, "..", hi, " are not a range of net '", net.name(), "' (", n, " layers)");
}

// The switches given by name and value (c_api.h), checked; the process's
// ones take effect at once.
cortado::Switches SwitchesOf(const char* const* names, const char* const* values, int n) {
  if (n < 0 || (n > 0 && (!names || !values))) cortado::fail("no switches given");
  cortado::Switches s;
  for (int i = 0; i < n; ++i) {
    if (!names[i] || !values[i]) cortado::fail("switch ", i, " has no name or value");
    s.Set(names[i], values[i]);
  }
  s.ApplyToProcess();
  return s;
}

}  // namespace

extern "C" {

const char* cortado_last_error(void) { return t_error.c_str(); }
const char* cortado_version(void) { return CORTADO_VERSION; }
int cortado_set_switch(const char* name, const char* value) {
  return Guarded([&] {
    if (!name || !value) cortado::fail("no switch name or value given");
    for (const cortado::SwitchInfo& sw : cortado::SwitchTable())
      if (name == std::string(sw.name) && sw.scope != cortado::SwitchScope::kProcess)
        cortado::fail(name, " is a switch of ", sw.scope == cortado::SwitchScope::kNet ? "a net" : "a solver",
                      " (", sw.field, "): give it where the net or the solver is made");
    cortado::Switches s;
    s.Set(name, value);
    s.ApplyToProcess();
  });
}

void cortado_set_random_seed(uint64_t seed) { cortado::set_random_seed(static_cast<int64_t>(seed)); }
int cortado_device_count(void) {
  int n = 0;
  Guarded([&] { n = cortado::DeviceCount(); });
  return n;
}

cortado_net* cortado_net_open(const char* model, int phase, const char* weights, int gpu) {
  return cortado_net_open_precision(model, phase, weights, gpu, nullptr);
}

cortado_net* cortado_net_open_precision(const char* model, int phase, const char* weights, int gpu,
                                        const char* precision) {
  return cortado_net_open_state(model, phase, weights, gpu, precision, 0, nullptr, 0);
}

void cortado_net_close(cortado_net* net) {
  if (net && net->owned) delete net;  // a solver's nets go with the solver
}

int cortado_net_forward(cortado_net* h, double* loss) {
  return Guarded([&] {
    if (!h) cortado::fail("no net");
    const double l = h->net->Forward();
    h->net->context().Synchronize();
    h->forwarded = true;
    if (loss) *loss = l;
  });
}

int cortado_net_backward(cortado_net* h) {
  return Guarded([&] {
    if (!h) cortado::fail("no net");
    if (!h->forwarded) cortado::fail("backward needs a forward first (since the net was built or reshaped)");
    h->net->Backward();
    h->net->context().Synchronize();
  });
}

int cortado_net_reshape(cortado_net* h) {
  return Guarded([&] {
    if (!h) cortado::fail("no net");
    h->net->context().Activate();
    h->net->Reshape();
    h->forwarded = false;
  });
}

int cortado_net_copy_weights(cortado_net* h, const char* path) {
  return Guarded([&] {
    if (!h || !path) cortado::fail("no net or no path");
    h->net->context().Activate();
    h->net->CopyTrainedLayersFrom(std::string(path));
  });
}

int cortado_net_save(cortado_net* h, const char* path) {
  return Guarded([&] {
    if (!h || !path) cortado::fail("no net or no path");
    h->net->context().Activate();
    cortado::NetParameter p;
    h->net->ToProto(&p, false);
    if (cortado::hdf5::IsHdf5Name(path)) {
      cortado::hdf5::WriteWeights(path, p);
    } else {
      cortado::WriteBinaryProto(path, p);
    }
  });
}

int cortado_net_num_blobs(cortado_net* h) { return h ? static_cast<int>(h->net->blob_names().size()) : -1; }
const char* cortado_net_blob_name(cortado_net* h, int i) { return h ? NameAt(h->net->blob_names(), i) : nullptr; }
int cortado_net_num_layers(cortado_net* h) { return h ? static_cast<int>(h->net->layers().size()) : -1; }
const char* cortado_net_layer_name(cortado_net* h, int i) { return h ? NameAt(h->net->layer_names(), i) : nullptr; }
const char* cortado_net_layer_type(cortado_net* h, int i) {
  if (!h || i < 0 || i >= static_cast<int>(h->net->layers().size())) return nullptr;
  return h->net->layers()[static_cast<size_t>(i)]->type();
}
int cortado_net_layer_num_params(cortado_net* h, int i) {
  if (!h || i < 0 || i >= static_cast<int>(h->net->layers().size())) return -1;
  return static_cast<int>(h->net->layers()[static_cast<size_t>(i)]->blobs().size());
}
int cortado_net_num_inputs(cortado_net* h) { return h ? static_cast<int>(h->net->input_blobs().size()) : -1; }
const char* cortado_net_input_name(cortado_net* h, int i) {
  if (!h || i < 0 || i >= static_cast<int>(h->net->input_blobs().size())) return nullptr;
  const cortado::Blob* b = h->net->input_blobs()[static_cast<size_t>(i)];
  for (size_t k = 0; k < h->net->blobs().size(); ++k)
    if (h->net->blobs()[k].get() == b) return h->net->blob_names()[k].c_str();
  return nullptr;
}
int cortado_net_num_outputs(cortado_net* h) { return h ? static_cast<int>(h->net->output_blobs().size()) : -1; }
const char* cortado_net_output_name(cortado_net* h, int i) {
  if (!h || i < 0 || i >= static_cast<int>(h->net->output_blob_indices().size())) return nullptr;
  return h->net->blob_names()[static_cast<size_t>(h->net->output_blob_indices()[static_cast<size_t>(i)])].c_str();
}

int cortado_blob_shape(cortado_net* h, const char* blob, int layer, int param, int* dims, int max_dims) {
  int ndim = -1;
  Guarded([&] {
    const cortado::Blob* b = FindBlob(h, blob, layer, param);
    ndim = b->num_axes();
    for (int i = 0; i < ndim && i < max_dims; ++i) dims[i] = b->shape(i);
  });
  return ndim;
}

int cortado_blob_get(cortado_net* h, const char* blob, int layer, int param, int diff, float* out, int64_t count) {
  return Guarded([&] {
    const cortado::Blob* b = FindBlob(h, blob, layer, param);
    CheckCount(*b, count, blob);
    const float* v = diff ? b->cpu_diff<float>() : b->cpu_data<float>();
    std::copy(v, v + count, out);
  });
}

int cortado_blob_set(cortado_net* h, const char* blob, int layer, int param, int diff, const float* in,
                     int64_t count) {
  return Guarded([&] {
    cortado::Blob* b = FindBlob(h, blob, layer, param);
    CheckCount(*b, count, blob);
    float* v = diff ? b->mutable_cpu_diff<float>() : b->mutable_cpu_data<float>();
    std::copy(in, in + count, v);
  });
}

int cortado_blob_reshape(cortado_net* h, const char* blob, const int* dims, int ndim) {
  return Guarded([&] {
    if (!blob) cortado::fail("no blob name");
    if (ndim < 0) cortado::fail("negative number of axes");
    cortado::Blob* b = FindBlob(h, blob, -1, 0);
    b->Reshape(std::vector<int>(dims, dims + ndim));  // the layers follow at the next Forward
    h->forwarded = false;
  });
}

cortado_solver* cortado_solver_open(const char* solver, int gpu) {
  return cortado_solver_open_precision(solver, gpu, nullptr);
}

cortado_solver* cortado_solver_open_precision(const char* solver, int gpu, const char* precision) {
  return cortado_solver_open_switches(solver, gpu, precision, nullptr, nullptr, 0);
}

cortado_solver* cortado_solver_open_switches(const char* solver, int gpu, const char* precision,
                                             const char* const* names, const char* const* values, int num_switches) {
  auto h = std::make_unique<cortado_solver>();
  const int st = Guarded([&] {
    if (!solver) cortado::fail("no solver file given");
    const cortado::Switches switches = SwitchesOf(names, values, num_switches);
    cortado::SolverParameter param;
    cortado::SourceInfo info;
    cortado::ReadTextProto(solver, &param, &info);
    cortado::SolverSetup setup(ContextFor(gpu));
    const bool with_precision = precision && *precision;
    const cortado::Precision p = with_precision ? cortado::ParsePrecision(precision) : cortado::Precision::kFp32;
    if (with_precision) cortado::ApplyPrecision(p, &param);
    switches.Apply(&param);
    setup.edit_net = [p, with_precision, switches](cortado::NetParameter* net) {
      if (with_precision) cortado::ApplyPrecision(p, net);
      switches.Apply(net);
    };
    h->solver = cortado::Solver::Create(param, info, std::move(setup));
    h->train.net = h->solver->net();
    for (const auto& t : h->solver->test_nets()) {
      h->tests.emplace_back();
      h->tests.back().net = t.get();
    }
  });
  return st == 0 ? h.release() : nullptr;
}

void cortado_solver_close(cortado_solver* solver) { delete solver; }

int cortado_solver_step(cortado_solver* h, int iters) {
  return Guarded([&] {
    if (!h) cortado::fail("no solver");
    if (iters < 0) cortado::fail("iterations must not be negative, got ", iters);
    h->solver->net()->context().Activate();
    h->solver->DropGraphs();  // Python may have written weights through its views since the last step
    h->solver->Step(iters);
    h->train.forwarded = iters > 0 || h->train.forwarded;
  });
}

int cortado_solver_solve(cortado_solver* h, const char* resume) {
  return Guarded([&] {
    if (!h) cortado::fail("no solver");
    h->solver->net()->context().Activate();
    h->solver->DropGraphs();  // as in cortado_solver_step
    h->solver->Solve(resume ? std::string(resume) : std::string());
    h->solver->net()->context().Synchronize();  // Solve may end with device work
    h->train.forwarded = true;
  });
}

int cortado_solver_restore(cortado_solver* h, const char* state) {
  return Guarded([&] {
    if (!h || !state) cortado::fail("no solver or no state file");
    h->solver->net()->context().Activate();
    h->solver->Restore(std::string(state));
  });
}

int cortado_solver_snapshot(cortado_solver* h) {
  return Guarded([&] {
    if (!h) cortado::fail("no solver");
    h->solver->net()->context().Activate();
    h->solver->Snapshot();
  });
}

int cortado_solver_iter(cortado_solver* h) { return h ? h->solver->iter() : -1; }
cortado_net* cortado_solver_net(cortado_solver* h) { return h ? &h->train : nullptr; }
int cortado_solver_num_test_nets(cortado_solver* h) { return h ? static_cast<int>(h->tests.size()) : -1; }
cortado_net* cortado_solver_test_net(cortado_solver* h, int i) {
  if (!h || i < 0 || i >= static_cast<int>(h->tests.size())) return nullptr;
  return &h->tests[static_cast<size_t>(i)];
}


int cortado_blob_host_view(cortado_net* h, const char* blob, int layer, int param, int diff, int writable,
                           float** data, int64_t* count) {
  return Guarded([&] {
    if (!data || !count) cortado::fail("no place for the view");
    cortado::Blob* b = FindBlob(h, blob, layer, param);
    cortado::Tensor& t = diff ? b->diff() : b->data();
    // Both calls sync the host copy first (download or conversion, on the
    // net's stream); the mutable one also makes it the only valid copy.
    *data = writable ? t.mutable_data<float>() : const_cast<float*>(t.data<float>());
    *count = static_cast<int64_t>(b->count());
    if (h->net->context().on_gpu()) h->net->context().Synchronize();
  });
}

// Net::Forward and Net::Backward over a range of layers (Caffe's
// ForwardFromTo and BackwardFromTo): the same per-layer calls.
int cortado_net_forward_range(cortado_net* h, int start, int end, double* loss) {
  return Guarded([&] {
    if (!h) cortado::fail("no net");
    cortado::Net& net = *h->net;
    CheckLayerRange(net, start, end, "forward");
    net.context().Activate();
    double l = 0;
    for (int i = start; i <= end; ++i) {
      const auto k = static_cast<size_t>(i);
      l += net.layers()[k]->Forward(net.bottom_vecs()[k], net.top_vecs()[k]);
    }
    net.context().Synchronize();
    h->forwarded = true;
    if (loss) *loss = l;
  });
}

int cortado_net_backward_range(cortado_net* h, int start, int end) {
  return Guarded([&] {
    if (!h) cortado::fail("no net");
    if (!h->forwarded) cortado::fail("backward needs a forward first (since the net was built or reshaped)");
    cortado::Net& net = *h->net;
    CheckLayerRange(net, end, start, "backward");
    net.context().Activate();
    for (int i = start; i >= end; --i) {
      const auto k = static_cast<size_t>(i);
      if (net.layer_need_backward()[k])
        net.layers()[k]->Backward(net.top_vecs()[k], net.bottom_need_backward()[k], net.bottom_vecs()[k]);
    }
    net.context().Synchronize();
  });
}

int cortado_net_layer_num_bottoms(cortado_net* h, int i) {
  if (!h || i < 0 || i >= static_cast<int>(h->net->layers().size())) return -1;
  return static_cast<int>(h->net->bottom_vecs()[static_cast<size_t>(i)].size());
}
const char* cortado_net_layer_bottom_name(cortado_net* h, int i, int j) {
  if (j < 0 || j >= cortado_net_layer_num_bottoms(h, i)) return nullptr;
  return BlobName(*h->net, h->net->bottom_vecs()[static_cast<size_t>(i)][static_cast<size_t>(j)]);
}
int cortado_net_layer_num_tops(cortado_net* h, int i) {
  if (!h || i < 0 || i >= static_cast<int>(h->net->layers().size())) return -1;
  return static_cast<int>(h->net->top_vecs()[static_cast<size_t>(i)].size());
}
const char* cortado_net_layer_top_name(cortado_net* h, int i, int j) {
  if (j < 0 || j >= cortado_net_layer_num_tops(h, i)) return nullptr;
  return BlobName(*h->net, h->net->top_vecs()[static_cast<size_t>(i)][static_cast<size_t>(j)]);
}

cortado_net* cortado_net_open_state(const char* model, int phase, const char* weights, int gpu,
                                    const char* precision, int level, const char* const* stages, int num_stages) {
  return cortado_net_open_switches(model, phase, weights, gpu, precision, level, stages, num_stages, nullptr, nullptr,
                                   0);
}

cortado_net* cortado_net_open_switches(const char* model, int phase, const char* weights, int gpu,
                                       const char* precision, int level, const char* const* stages, int num_stages,
                                       const char* const* names, const char* const* values, int num_switches) {
  auto h = std::make_unique<cortado_net>();
  const int st = Guarded([&] {
    if (!model) cortado::fail("no model file given");
    const cortado::Switches switches = SwitchesOf(names, values, num_switches);
    if (phase != 0 && phase != 1) cortado::fail("phase must be 0 (TRAIN) or 1 (TEST), got ", phase);
    if (num_stages < 0 || (num_stages > 0 && !stages)) cortado::fail("no stages given");
    cortado::NetParameter p;
    cortado::SourceInfo info;
    cortado::ReadTextProto(model, &p, &info);
    cortado::NetState* state = p.mutable_state();
    state->set_phase(phase == 0 ? cortado::TRAIN : cortado::TEST);
    if (level != 0) state->set_level(level);  // else the file's own
    for (int i = 0; i < num_stages; ++i) {
      if (!stages[i]) cortado::fail("stage ", i, " is null");
      state->add_stage(stages[i]);
    }
    if (precision && *precision) cortado::ApplyPrecision(cortado::ParsePrecision(precision), &p);
    switches.Apply(&p);
    h->owned = std::make_unique<cortado::Net>(p, info, ContextFor(gpu));
    h->net = h->owned.get();
    if (weights && *weights) h->net->CopyTrainedLayersFrom(std::string(weights));
  });
  return st == 0 ? h.release() : nullptr;
}

}  // extern "C"
