// trainer: the command-line front end, in the shape of Caffe's `caffe` tool.
//   trainer train --solver=S [--snapshot=F | --weights=W] [--gpu=...]
//   trainer test  --model=M --weights=W [--iterations=N]
//   trainer time  --model=M [--iterations=N] [--warmup=N] [--gpu=N]
//   trainer grad_stats --model=M [--weights=W] [--iterations=N] [--csv=F] [--plot=F.png]
//   trainer device_query [--gpu=N]
// A user error (bad prototxt, missing file, bad flag) prints one message and
// exits with status 1.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <map>
#include <new>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

#include "cortado/context.hpp"
#include "cortado/solver.hpp"
#include "cortado/util/device.hpp"
#include "cortado/util/grad_stats.hpp"
#include "cortado/util/signals.hpp"

DEFINE_string(solver, "", "The solver prototxt (train).");
DEFINE_string(model, "", "The net prototxt (test, time).");
DEFINE_string(weights, "", "Comma-separated .caffemodel files to initialize from (train: fine-tune; test).");
DEFINE_string(snapshot, "", "A .solverstate to resume training from.");
DEFINE_int32(iterations, 50, "Iterations for test and time.");
DEFINE_int32(warmup, 5, "time: untimed iterations before the timed ones (at least 1 is run).");
DEFINE_string(phase, "", "TRAIN or TEST: the phase of --model (test defaults to TEST, time to TRAIN).");
DEFINE_int32(level, 0, "The net state level.");
DEFINE_string(stage, "", "Comma-separated net state stages.");
DEFINE_string(gpu, "", "GPU ids ('0', '0,1', 'all'); empty runs on the CPU.");
DEFINE_string(sigint_effect, "stop", "What SIGINT does during training: snapshot, stop or none.");
DEFINE_string(sighup_effect, "snapshot", "What SIGHUP does during training: snapshot, stop or none.");
DEFINE_string(csv, "", "grad_stats: write the gradient histograms to this CSV file.");
DEFINE_string(plot, "", "grad_stats: plot the overall histograms to this PNG (needs python3-matplotlib).");

namespace {

using namespace cortado;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

void require(const std::string& value, const char* flag, const char* command) {
  if (value.empty()) fail(command, " needs --", flag);
}

// The context --gpu asks for: the CPU when empty, else one CUDA device.
std::shared_ptr<const Context> device_context() {
  if (FLAGS_gpu.empty()) return Context::Cpu();
  const std::vector<int> ids = ParseGpuFlag(FLAGS_gpu);
  if (ids.size() > 1)
    fail("--gpu=", FLAGS_gpu, ": training on several GPUs needs the communicator, which this version does not have "
         "yet; give one device");
  LOG(INFO) << "Using GPU " << ids[0];
  return Context::Create(ids[0]);
}

Phase phase_flag(Phase fallback) {
  if (FLAGS_phase.empty()) return fallback;
  if (FLAGS_phase == "TRAIN") return TRAIN;
  if (FLAGS_phase == "TEST") return TEST;
  fail("--phase=", FLAGS_phase, ": expected TRAIN or TEST");
}

int train() {
  require(FLAGS_solver, "solver", "train");
  if (!FLAGS_snapshot.empty() && !FLAGS_weights.empty())
    fail("give --snapshot (resume) or --weights (fine-tune), not both");
  const std::shared_ptr<const Context> ctx = device_context();
  const SolverAction on_int = ParseSolverAction("sigint_effect", FLAGS_sigint_effect.c_str());
  const SolverAction on_hup = ParseSolverAction("sighup_effect", FLAGS_sighup_effect.c_str());
  SolverParameter param;
  SourceInfo info;
  ReadTextProto(FLAGS_solver, &param, &info);
  if (!FLAGS_stage.empty() || FLAGS_level) {
    param.mutable_train_state()->set_level(FLAGS_level);
    for (const std::string& s : split(FLAGS_stage)) param.mutable_train_state()->add_stage(s);
  }
  std::unique_ptr<Solver> solver = Solver::Create(param, info, ctx);
  SignalHandler signals(on_int, on_hup);
  solver->set_action_function([&signals] { return signals.CheckForSignals(); });
  for (const std::string& w : split(FLAGS_weights)) {
    LOG(INFO) << "Fine-tuning from " << w;
    solver->net()->CopyTrainedLayersFrom(w);
  }
  LOG(INFO) << "Starting Optimization";
  solver->Solve(FLAGS_snapshot);
  return 0;
}

std::unique_ptr<Net> load_model(Phase phase, std::shared_ptr<const Context> ctx) {
  std::vector<std::string> stages = split(FLAGS_stage);
  auto net = std::make_unique<Net>(FLAGS_model, phase, FLAGS_level, stages, std::move(ctx));
  for (const std::string& w : split(FLAGS_weights)) net->CopyTrainedLayersFrom(w);
  return net;
}

void require_iterations() {
  if (FLAGS_iterations <= 0) fail("--iterations=", FLAGS_iterations, ": must be positive");
}

int test() {
  require(FLAGS_model, "model", "test");
  require_iterations();
  std::unique_ptr<Net> net = load_model(phase_flag(TEST), device_context());
  LOG(INFO) << "Running for " << FLAGS_iterations << " iterations.";
  std::vector<double> scores;
  std::vector<std::string> names;
  double loss = 0;
  for (int i = 0; i < FLAGS_iterations; ++i) {
    loss += net->Forward();
    size_t k = 0;
    for (size_t j = 0; j < net->output_blobs().size(); ++j) {
      const Blob* b = net->output_blobs()[j];
      const float* v = b->cpu_data<float>();
      for (size_t e = 0; e < b->count(); ++e, ++k) {
        if (scores.size() <= k) {
          scores.push_back(0);
          names.push_back(net->blob_names()[net->output_blob_indices()[j]]);
        }
        scores[k] += v[e];
      }
    }
  }
  LOG(INFO) << "Loss: " << loss / FLAGS_iterations;
  for (size_t k = 0; k < scores.size(); ++k) LOG(INFO) << names[k] << " = " << scores[k] / FLAGS_iterations;
  return 0;
}

// time: Caffe's benchmark. After --warmup untimed iterations (at least one), each of
// --iterations timed iterations runs the net twice:
//  - once whole, forward then backward, with the context's stream
//    synchronized only at the end of each pass: the forward, backward and
//    total milliseconds of the iteration (what training pays; on a GPU this
//    keeps the kernels of consecutive layers overlapping their launches);
//  - once layer by layer, synchronizing after every layer (a no-op on the
//    CPU): the per-layer breakdown. The synchronization adds a launch latency
//    per layer on a GPU, so these columns sum to more than the whole pass.
// Reports medians (robust to the odd slow iteration), the mean, and
// images/second = batch size / median total. The timing lives here, in the
// tool; layers never synchronize.
double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

int time_net() {
  require(FLAGS_model, "model", "time");
  require_iterations();
  if (FLAGS_warmup < 0) fail("--warmup=", FLAGS_warmup, ": must be zero or positive");
  std::unique_ptr<Net> net = load_model(phase_flag(TRAIN), device_context());
  const Context& ctx = net->context();
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  const auto& layers = net->layers();
  const auto& bottoms = net->bottom_vecs();
  const auto& tops = net->top_vecs();
  const size_t L = layers.size();
  auto forward_layer = [&](size_t i) { layers[i]->Forward(bottoms[i], tops[i]); };
  auto backward_layer = [&](size_t i) {
    if (net->layer_need_backward()[i]) layers[i]->Backward(tops[i], net->bottom_need_backward()[i], bottoms[i]);
  };

  int batch = 0;
  if (L > 0 && !tops[0].empty() && !tops[0][0]->shape().empty()) batch = tops[0][0]->shape()[0];
  size_t params = 0;
  for (const Blob* b : net->learnable_params()) params += b->count();
  LOG(INFO) << "Timing " << FLAGS_model << " on " << (ctx.on_gpu() ? "GPU " + std::to_string(ctx.device()) : "the CPU")
            << ": " << L << " layers, " << params << " learnable parameters, batch " << batch;

  // Warm-up through the Net (at least once), so that an error in a layer is
  // reported with its file, line and layer like everywhere else.
  const int warmup = std::max(1, FLAGS_warmup);
  LOG(INFO) << "Warm-up: " << warmup << " iterations (not timed)";
  for (int it = 0; it < warmup; ++it) {
    net->Forward();
    net->Backward();
  }
  ctx.Synchronize();

  std::vector<double> it_f, it_b, it_t;
  std::vector<std::vector<double>> lay_f(L), lay_b(L);
  for (int it = 0; it < FLAGS_iterations; ++it) {
    // Whole passes, as training runs them.
    auto t0 = clock::now();
    net->Forward();
    ctx.Synchronize();
    const double f = ms_since(t0);
    t0 = clock::now();
    net->Backward();
    ctx.Synchronize();
    const double b = ms_since(t0);
    it_f.push_back(f);
    it_b.push_back(b);
    it_t.push_back(f + b);
    // Layer by layer.
    ctx.Activate();
    for (size_t i = 0; i < L; ++i) {
      t0 = clock::now();
      forward_layer(i);
      ctx.Synchronize();
      lay_f[i].push_back(ms_since(t0));
    }
    for (size_t i = L; i-- > 0;) {
      if (!net->layer_need_backward()[i]) continue;
      t0 = clock::now();
      backward_layer(i);
      ctx.Synchronize();
      lay_b[i].push_back(ms_since(t0));
    }
  }

  LOG(INFO) << "Median time per layer over " << FLAGS_iterations
            << " iterations (stream synchronized after each layer):";
  for (size_t i = 0; i < L; ++i) {
    LOG(INFO) << std::setw(20) << layers[i]->name() << "\tforward: " << median_of(lay_f[i]) << " ms.";
    LOG(INFO) << std::setw(20) << layers[i]->name() << "\tbackward: " << median_of(lay_b[i]) << " ms.";
  }
  const double mf = median_of(it_f), mb = median_of(it_b), mt = median_of(it_t);
  // Caffe's three lines (its parsers read them), here the medians of whole passes.
  LOG(INFO) << "Average Forward pass: " << mf << " ms.";
  LOG(INFO) << "Average Backward pass: " << mb << " ms.";
  LOG(INFO) << "Average Forward-Backward: " << mt << " ms.";
  // One line for scripts: key=value.
  std::ostringstream line;
  line << std::fixed << std::setprecision(4) << "time: device=" << (ctx.on_gpu() ? "gpu" + std::to_string(ctx.device()) : "cpu")
       << " iterations=" << FLAGS_iterations << " warmup=" << warmup << " batch=" << batch
       << " params=" << params << " forward_ms_median=" << mf << " backward_ms_median=" << mb
       << " total_ms_median=" << mt << " total_ms_mean=" << mean_of(it_t) << std::setprecision(1)
       << " images_per_s=" << (mt > 0 ? batch * 1000.0 / mt : 0.0);
  std::cout << line.str() << std::endl;
  return 0;
}

// grad_stats: where a net's gradients fall on FP16's range, measured in FP32
// (see cortado/util/grad_stats.hpp), and the static loss scale that fits them.
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void plot_grad_stats(const GradStatsResult& result) {
  const char* env = std::getenv("CORTADO_SCRIPTS_DIR");
  const std::string dir = env && *env ? env : CORTADO_SOURCE_DIR "/scripts";
  const std::string script = dir + "/plot_grad_stats.py";
  if (!FileExists(script)) fail("--plot: ", script, " not found (set CORTADO_SCRIPTS_DIR to the scripts/ folder)");
  std::string csv = FLAGS_csv;
  bool temporary = false;
  if (csv.empty()) {  // the script reads the CSV: write one to a temporary file
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/cortado_grad_stats_XXXXXX";
    const int fd = mkstemp(pattern.data());
    if (fd < 0) fail("--plot: cannot create a temporary file in ", pattern.substr(0, pattern.rfind('/')));
    close(fd);
    csv = pattern;
    temporary = true;
    WriteGradStatsCsv(result, csv);
  }
  const char* python = std::getenv("CORTADO_PYTHON");  // e.g. /usr/bin/python3 beside a virtualenv's
  const std::string command = std::string(python && *python ? python : "python3") + " " + shell_quote(script) +
                              " " + shell_quote(csv) + " " + shell_quote(FLAGS_plot);
  const int status = std::system(command.c_str());
  if (temporary) std::remove(csv.c_str());
  if (status != 0)
    fail("--plot: `", command, "` failed (", WIFEXITED(status) ? str_cat("exit status ", WEXITSTATUS(status)) :
         std::string("killed"), "); it needs python3 with matplotlib (Debian: python3-matplotlib, see "
         "scripts/install_deps.sh; CORTADO_PYTHON names another interpreter)");
  LOG(INFO) << "Wrote " << FLAGS_plot;
}

int grad_stats() {
  require(FLAGS_model, "model", "grad_stats");
  require_iterations();
  const std::shared_ptr<const Context> ctx = device_context();
  NetParameter param;
  SourceInfo info;
  ReadTextProto(FLAGS_model, &param, &info);
  param.mutable_state()->set_phase(TRAIN);
  param.mutable_state()->set_level(FLAGS_level);
  for (const std::string& s : split(FLAGS_stage)) param.mutable_state()->add_stage(s);
  ForceFloatTypes(&param);  // measure what FP16 would have to hold, in FP32
  Net net(param, info, ctx);
  for (const std::string& w : split(FLAGS_weights)) net.CopyTrainedLayersFrom(w);
  if (FLAGS_weights.empty()) LOG(INFO) << "No --weights: measuring the gradients of the freshly initialized net.";
  LOG(INFO) << "Collecting gradient statistics over " << FLAGS_iterations << " iterations (FP32).";
  GradStats stats(&net);
  const GradStatsResult& result = stats.Run(FLAGS_iterations);
  std::cout << GradStatsReport(result) << std::flush;
  if (!FLAGS_csv.empty()) {
    WriteGradStatsCsv(result, FLAGS_csv);
    LOG(INFO) << "Wrote " << FLAGS_csv;
  }
  if (!FLAGS_plot.empty()) plot_grad_stats(result);
  return 0;
}

int device_query() {
  const std::vector<int> ids = ParseGpuFlag(FLAGS_gpu.empty() ? "all" : FLAGS_gpu);
  for (int id : ids) std::cout << DeviceQuery(id) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_alsologtostderr = 1;
  gflags::SetUsageMessage(
      "command [flags]\ncommands:\n"
      "  train         train or fine-tune a model (--solver, --snapshot or --weights)\n"
      "  test          score a model (--model, --weights, --iterations)\n"
      "  time          benchmark a model's forward and backward, median ms per iteration and\n"
      "                images/s (--model, --iterations, --warmup, --gpu)\n"
      "  grad_stats    histogram of a model's gradients against FP16's range, with a loss scale\n"
      "                (--model, --weights, --iterations, --csv, --plot)\n"
      "  device_query  show GPU diagnostic information");
  gflags::SetVersionString(CORTADO_VERSION);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  google::InstallFailureSignalHandler();
  if (argc != 2) {
    gflags::ShowUsageWithFlagsRestrict(argv[0], "tools/trainer");
    return 1;
  }
  static const std::map<std::string, int (*)()> commands = {
      {"train", &train}, {"test", &test}, {"time", &time_net},
      {"grad_stats", &grad_stats}, {"device_query", &device_query}};
  auto it = commands.find(argv[1]);
  if (it == commands.end()) {
    std::cerr << "trainer: unknown command '" << argv[1] << "'; commands: train, test, time, grad_stats, device_query\n";
    return 1;
  }
  try {
    return it->second();
  } catch (const cortado::Error& e) {
    std::cerr << "trainer " << argv[1] << ": error: " << e.what() << std::endl;
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "trainer " << argv[1] << ": error: out of memory (are the batch size and the blob shapes "
              << "what you meant?)" << std::endl;
    return 1;
  } catch (const std::exception& e) {
    // Not a user error Cortado recognized; still one message and status 1,
    // never an abort trace.
    std::cerr << "trainer " << argv[1] << ": error: " << e.what() << std::endl;
    return 1;
  }
}
