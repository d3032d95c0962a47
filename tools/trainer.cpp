// trainer: the command-line front end, in the shape of Caffe's `caffe` tool.
//   trainer train --solver=S [--snapshot=F | --weights=W] [--gpu=...] [--precision=P] [--stage=S] [--tensorboard=DIR]
//   trainer train ... --gpu=0,1,...  (one rank per GPU in this process; run_ranks.hpp)
//   mpirun -np N trainer train ...   (N ranks, data-parallel; communicator.hpp)
//   trainer test  --model=M --weights=W [--iterations=N] [--precision=P]
//   trainer time  --model=M [--solver=S] [--batch_size=B] [--iterations=N] [--warmup=N] [--gpu=N] [--precision=P]
//                 [--reduce_buckets=N]
//   trainer grad_stats --model=M [--weights=W] [--iterations=N] [--csv=F] [--plot=F.png]
//   trainer device_query [--gpu=N]
// --precision=fp32|fp16|bf16 runs one net file and one solver file in that
// precision (precision.hpp: the defaults it sets where the files are silent);
// without it the files' own types run. Every command logs the types its nets
// and solver run with. The switches (switches.hpp: --share_diffs,
// --channels_last, --cudnn_api, --cuda_graphs, --cpu_share, ...) override
// the fields of the same names in every net and solver a command builds,
// over what the files state, and set the process's CPU work.
// A user error (bad prototxt, missing file, bad flag) prints one message and
// exits with status 1; with several ranks the rank that failed names itself
// and ends the whole job with status 1 (the others would wait for it forever).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <new>
#include <sstream>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cortado/comm/communicator.hpp"
#include "cortado/comm/gradient_reducer.hpp"
#include "cortado/comm/rank_phase.hpp"
#include "cortado/comm/run_ranks.hpp"
#include "cortado/context.hpp"
#include "cortado/net/net_engines.hpp"
#include "cortado/precision.hpp"
#include "cortado/solvers/grad_stats.hpp"
#include "cortado/solvers/signals.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/switches.hpp"
#include "cortado/util/cpu_parallel.hpp"
#include "cortado/util/cuda.hpp"
#include "cortado/util/device.hpp"
#include "cortado/util/gemm_bf16.hpp"
#include "cortado/util/logging.hpp"
#include "cortado/util/openmp_spin.hpp"
#include "cortado/util/tool_flags.hpp"

DEFINE_string(solver, "", "The solver prototxt (train; time: the update to time, and its net without --model).");
DEFINE_string(model, "", "The net prototxt (test, time).");
DEFINE_string(weights, "", "Comma-separated .caffemodel files to initialize from (train: fine-tune; test).");
DEFINE_string(snapshot, "", "A .solverstate to resume training from.");
DEFINE_int32(iterations, 50, "Iterations for test and time.");
DEFINE_int32(warmup, 5, "time: untimed iterations before the timed ones (at least 1 is run).");
DEFINE_int32(batch_size, 0, "time: the batch (first dimension) of the model's Data, DummyData and Input layers; "
             "0 keeps the model's.");
DEFINE_int32(reduce_buckets, -1, "time: the gradient buckets per type of the plan of the ranks' gradient sums it "
             "prints ('bucket:' and 'param:' lines, docs/scaling.md); -1: the solver's reduce_buckets.");
DEFINE_string(phase, "", "TRAIN or TEST: the phase of --model (test defaults to TEST, time to TRAIN).");
DEFINE_int32(level, 0, "The net state level.");
DEFINE_string(stage, "", "Comma-separated net state stages (train: of the train net, as in Caffe, and of its test "
              "nets too). The model folders' nets read DummyData instead of ImageNet with --stage=synthetic.");
DEFINE_string(precision, "", "fp32, fp16 or bf16 (train, test, time): the nets' default forward/backward types and "
              "math (for the layers that state none) and, unless the solver states them, solver_data_type FLOAT "
              "and, for fp16, dynamic_loss_scale (time without --solver keeps its unscaled stand-in update). "
              "Empty: the files' own types (FLOAT where they state none).");
DEFINE_string(gpu, "", "GPU ids ('0', '0,1', 'all') or 'cpu'. Empty: the CPU, except that train follows a "
              "solver's solver_mode: GPU and device_id (Caffe's rule). train with several ids runs one "
              "rank per id in this process; under mpirun each rank takes the id at its local rank (modulo their "
              "number).");
DEFINE_string(sigint_effect, "stop", "What SIGINT does during training: snapshot, stop or none.");
DEFINE_string(sighup_effect, "snapshot", "What SIGHUP does during training: snapshot, stop or none.");
DEFINE_string(csv, "", "grad_stats: write the gradient histograms to this CSV file.");
DEFINE_string(plot, "", "grad_stats: plot the overall histograms to this PNG (needs python3-matplotlib).");
DEFINE_string(plot_script, "", "grad_stats --plot: the plot_grad_stats.py to run. Empty: the source tree's "
              "scripts/plot_grad_stats.py.");
DEFINE_string(python, "", "grad_stats --plot: the python3 that runs it (it needs numpy and matplotlib). Empty: "
              "/usr/bin/python3 where it exists (the Debian packages'), else python3 on PATH.");
// The switches (switches.hpp; the usage message lists them from its table,
// which names each of these): empty keeps the files' values.
DEFINE_string(share_diffs, "", "0|1: the nets' share_diffs (blobs whose gradients never live at once share a "
              "buffer; 0: each its own, as in Caffe). Empty: the files' (default 1).");
DEFINE_string(share_data, "", "0|1: the nets' share_data (a residual sum computes in the memory of the bottom "
              "nothing reads after it). Empty: the files' (default 1).");
DEFINE_string(batch_norm_out_of_place, "", "0|1: the nets' batch_norm_out_of_place (0: an in-place BatchNorm "
              "of a training net keeps Caffe's copy of its input). Empty: the files' (default 1).");
DEFINE_string(channels_last, "", "0|1|all: the nets' channels_last (1, GPU_16BIT: 16-bit nets on a GPU store "
              "their blobs NHWC; all: every net and type). Empty: the files' (default 0, OFF).");
DEFINE_string(sync_layers, "", "0|1: the nets' sync_layers (1: a GPU net waits after every layer, so that a CUDA "
              "fault names its layer; slow, no CUDA graphs). Empty: the files' (default 0).");
DEFINE_string(cudnn_api, "", "legacy|graph: the nets' cudnn.api (graph: convolutions through cuDNN's graph API). "
              "Empty: the files' (default legacy).");
DEFINE_string(cudnn_batch_norm, "", "0|1: the nets' cudnn.batch_norm (1, with channels_last: FP16 BatchNorms "
              "on cuDNN's NHWC kernels). Empty: the files' (default 0).");
DEFINE_string(cudnn_pad_channels, "", "0|4|8: the nets' cudnn.pad_channels (channels-last convolutions pad "
              "their input channels to a multiple of it). Empty: the files' (default 0).");
DEFINE_string(cudnn_workspace_mb, "", "N: the nets' cudnn.workspace_mb (the most workspace one cuDNN "
              "convolution may use, MiB). Empty: the files' (default 1024).");
DEFINE_string(cuda_graphs, "", "0|1: the solver's cuda_graphs (replay GPU training iterations as CUDA graphs). "
              "Empty: the file's (default 1).");
DEFINE_string(defer_steps, "", "0|1: the solver's defer_steps (0: each GPU step's loss, overflow check and loss "
              "scale are read at the step, not at the next display). Empty: the file's (default 1).");
DEFINE_string(collective_timeout, "", "S: the solver's collective_timeout (the most seconds a rank waits in one "
              "collective for the others before it ends the job; 0: no limit). Empty: the file's (default 600).");
DEFINE_string(cpu_share, "", "0|1: CPU layers follow the cores other processes leave free (1, the default); 0: "
              "every thread with libgomp's spinning, and the fully connected GEMMs on OpenBLAS's threads.");
DEFINE_string(cpu_bf16_dot, "", "0|1: BF16 CPU GEMMs on AVX-512 BF16 where the CPU has it (1, the default); 0: "
              "widened to FP32 for OpenBLAS.");
DEFINE_string(inject_fault, "",
              "train: RANK:ITERATION:ACTION (throw, kill or hang) carries out a fault on purpose in the middle of that "
              "rank's backward at that iteration, to check that the job ends as a whole (docs/multi_gpu.md); turns "
              "CUDA graphs off. Empty: none.");
DEFINE_string(tensorboard, "", "train: write TensorBoard event files into this folder (created where missing): "
              "the log's losses, outputs, rate, loss scale, skipped steps and images/s, and gradient histograms. "
              "Overrides the solver's tensorboard_dir.");

namespace {

using namespace cortado;

// The ranks of an mpirun job (null when not started by an MPI launcher).
std::shared_ptr<Communicator> g_comm;

// The switches given as flags, checked at the start (main).
Switches& flag_switches() {
  static Switches switches;
  return switches;
}

Switches switches_from_flags() {
  Switches s;
  for (const SwitchInfo& sw : SwitchTable()) {
    std::string value;
    CORTADO_CHECK(gflags::GetCommandLineOption(sw.name, &value)) << "the switch " << sw.name << " has no flag";
    if (!value.empty()) s.Set(sw.name, value, "--");
  }
  return s;
}

// The switch flags over a net's or a solver's own fields.
void apply_switches(NetParameter* p) { flag_switches().Apply(p); }
void apply_switches(SolverParameter* p) { flag_switches().Apply(p); }
bool several_ranks() { return g_comm && g_comm->size() > 1; }

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

// The devices --gpu asks for (empty or "cpu": the CPU).
std::vector<int> gpu_ids() {
  return FLAGS_gpu.empty() || FLAGS_gpu == "cpu" ? std::vector<int>() : ParseGpuFlag(FLAGS_gpu);
}

// Caffe's rule: without --gpu, a solver that sets solver_mode: GPU trains on
// its device_id (0 when unset). Where that cannot be (no CUDA backend, no
// device), the error says how to train on the CPU instead.
void apply_solver_device(const SolverParameter& param, const SourceInfo& info) {
  if (!FLAGS_gpu.empty() || !param.has_solver_mode() || param.solver_mode() != SolverParameter::GPU) return;
  const int id = param.has_device_id() ? param.device_id() : 0;
  const std::string where = info.where(info.root_field_line(SolverParameter::descriptor(), "solver_mode"));
  const char* fix = "; pass --gpu=cpu to train on the CPU, or set solver_mode: CPU";
#ifndef CORTADO_USE_CUDA
  fail(where, "solver_mode: GPU, but this build of Cortado has no CUDA backend", fix);
#endif
  const int n = DeviceCount();
  if (n == 0) fail(where, "solver_mode: GPU, but no CUDA device was found", fix);
  if (id < 0 || id >= n)
    fail(where, "solver_mode: GPU with device_id ", id, ", but ", n, " CUDA device(s) were found", fix);
  FLAGS_gpu = std::to_string(id);
  LOG(INFO) << "Using the solver's device: GPU " << id << " (solver_mode: GPU; --gpu overrides)";
}

// One GPU per rank of mpirun: the id at the rank's place among this
// machine's ranks (wrapping around when the machine runs more ranks than
// --gpu lists).
int rank_gpu(const std::vector<int>& ids) { return ids[static_cast<size_t>(MpiLocalRank()) % ids.size()]; }

// The context --gpu asks for: the CPU when empty, else one CUDA device.
std::shared_ptr<const Context> device_context(const char* command) {
  const std::vector<int> ids = gpu_ids();
  if (ids.empty()) return Context::Cpu();
  if (several_ranks()) {
    const int id = rank_gpu(ids);
    LOG(INFO) << "Rank " << g_comm->rank() << " uses GPU " << id;
    return Context::Create(id);
  }
  if (ids.size() > 1) fail("--gpu=", FLAGS_gpu, ": ", command, " runs on one GPU; give one device");
  LOG(INFO) << "Using GPU " << ids[0];
  return Context::Create(ids[0]);
}

Phase phase_flag(Phase fallback) {
  if (FLAGS_phase.empty()) return fallback;
  if (FLAGS_phase == "TRAIN") return TRAIN;
  if (FLAGS_phase == "TEST") return TEST;
  fail("--phase=", FLAGS_phase, ": expected TRAIN or TEST");
}

// --precision (precision.hpp), applied to a net or a solver parameter where
// the flag is given; a field the file states is kept, and said in the log
// where it differs from the flag's (a choice of the file, not a mistake:
// LeNet's solver states dynamic_loss_scale: false, say).
void apply_precision(NetParameter* p) {
  if (FLAGS_precision.empty()) return;
  for (const std::string& kept : ApplyPrecision(ParsePrecision(FLAGS_precision), p))
    INFO_LOG << "--precision=" << FLAGS_precision << ": net '" << p->name() << "' ("
                                        << (p->state().phase() == TRAIN ? "TRAIN" : "TEST") << ") keeps " << kept;
}

void apply_precision(SolverParameter* p) {
  if (FLAGS_precision.empty()) return;
  for (const std::string& kept : ApplyPrecision(ParsePrecision(FLAGS_precision), p))
    INFO_LOG << "--precision=" << FLAGS_precision << ": the solver keeps " << kept;
}

// The precision's line of the log, and the types each net runs with.
void log_types(const Net& net) {
  INFO_LOG << "Precision: " << (FLAGS_precision.empty() ? "the files' own types (no --precision)"
                                                        : "--precision=" + FLAGS_precision);
  if (!flag_switches().empty()) INFO_LOG << "Switches over the files' fields: " << flag_switches().Summary();
  INFO_LOG << NetTypesSummary(net);
}

void log_types(Solver& solver) {
  log_types(*solver.net());
  for (const auto& t : solver.test_nets()) INFO_LOG << NetTypesSummary(*t);
  INFO_LOG << SolverTypesSummary(solver.param(), solver.data_type(), solver.net()->global_grad_scale());
}

// train's edit of each net the solver builds: --precision, and --stage in
// the test nets too (the train net has it through train_state, as in
// Caffe), so that --stage=synthetic tests on the synthetic data as well.
void edit_train_net(NetParameter* p) {
  if (p->state().phase() == TEST) {
    NetState* state = p->mutable_state();
    for (const std::string& s : split(FLAGS_stage))
      if (std::find(state->stage().begin(), state->stage().end(), s) == state->stage().end()) state->add_stage(s);
  }
  apply_precision(p);
  apply_switches(p);
}

// One rank's training (the only one, or one of several).
void train_rank(const SolverParameter& param, const SourceInfo& info, SolverSetup setup,
                const SignalHandler* signals) {
  setup.edit_net = edit_train_net;
  std::unique_ptr<Solver> solver = Solver::Create(param, info, std::move(setup));
  log_types(*solver);
  // Rank 0 reads the signals; the ranks agree on its action every iteration.
  if (signals) solver->set_action_function([signals] { return signals->CheckForSignals(); });
  for (const std::string& w : split(FLAGS_weights)) {
    INFO_LOG << "Fine-tuning from " << w;
    solver->net()->CopyTrainedLayersFrom(w);
  }
  INFO_LOG << "Starting Optimization";
  solver->Solve(FLAGS_snapshot);
}

int train() {
  require(FLAGS_solver, "solver", "train");
  if (!FLAGS_snapshot.empty() && !FLAGS_weights.empty())
    fail("give --snapshot (resume) or --weights (fine-tune), not both");
  const SolverAction on_int = ParseSolverAction("sigint_effect", FLAGS_sigint_effect.c_str());
  const SolverAction on_hup = ParseSolverAction("sighup_effect", FLAGS_sighup_effect.c_str());
  SolverParameter param;
  SourceInfo info;
  ReadTextProto(FLAGS_solver, &param, &info);
  apply_solver_device(param, info);
  apply_precision(&param);
  apply_switches(&param);
  if (!FLAGS_tensorboard.empty()) param.set_tensorboard_dir(FLAGS_tensorboard);
  if (!FLAGS_stage.empty() || FLAGS_level) {
    param.mutable_train_state()->set_level(FLAGS_level);
    for (const std::string& s : split(FLAGS_stage)) param.mutable_train_state()->add_stage(s);
  }
  const InjectedFault fault = ParseInjectedFault(FLAGS_inject_fault);
  if (fault.armed()) {
    param.set_cuda_graphs(false);  // the fault fires in an eager backward
    LOG(WARNING) << "--inject_fault=" << FLAGS_inject_fault << ": rank " << fault.rank << " will fail on purpose at "
                 << "iteration " << fault.iteration;
  }
  const std::vector<int> ids = gpu_ids();
  if (ids.size() > 1 && !several_ranks()) {
    // One process, one rank (thread) per GPU.
    const RankEngine engine = ResolveEngine(ids);
    LOG(INFO) << "Training on " << ids.size() << " GPUs (" << FLAGS_gpu << ") in this process, one rank each ("
              << (engine == RankEngine::kNccl ? "NCCL" : "threads") << "); the log is rank 0's";
    SignalHandler signals(on_int, on_hup);
    RunRanks(ids, [&](const Rank& rank) {
      SolverSetup setup(rank.ctx);
      setup.comm = rank.comm;
      setup.fault = fault;
      train_rank(param, info, setup, rank.rank == 0 ? &signals : nullptr);
    }, engine, param.collective_timeout());
    return 0;
  }
  SolverSetup setup(device_context("train"));
  setup.comm = g_comm;
  setup.fault = fault;
  // mpirun's GPU ranks sum their gradients with NCCL where they can.
  if (several_ranks() && !ids.empty()) setup.comm = GpuProcessRank(g_comm, ids, MpiLocalRank());
  if (several_ranks())
    LOG(INFO) << "Training on " << g_comm->size() << " ranks (" << setup.comm->engine()
              << (setup.comm != g_comm ? " over MPI" : "") << "); the log is rank 0's";
  if (ids.empty()) LOG(INFO) << "Training on the CPU: " << cpu_threads_summary() << ", " << cpu_bf16_summary();
  SignalHandler signals(on_int, on_hup);
  train_rank(param, info, setup, &signals);
  return 0;
}

std::unique_ptr<Net> load_model(Phase phase, std::shared_ptr<const Context> ctx) {
  NetParameter p;
  SourceInfo info;
  ReadTextProto(FLAGS_model, &p, &info);
  p.mutable_state()->set_phase(phase);
  p.mutable_state()->set_level(FLAGS_level);
  for (const std::string& s : split(FLAGS_stage)) p.mutable_state()->add_stage(s);
  apply_precision(&p);
  apply_switches(&p);
  auto net = std::make_unique<Net>(p, info, std::move(ctx));
  log_types(*net);
  for (const std::string& w : split(FLAGS_weights)) net->CopyTrainedLayersFrom(w);
  return net;
}

void require_iterations() {
  if (FLAGS_iterations <= 0) fail("--iterations=", FLAGS_iterations, ": must be positive");
}

int test() {
  require(FLAGS_model, "model", "test");
  require_iterations();
  std::unique_ptr<Net> net = load_model(phase_flag(TEST), device_context("test"));
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

// time: Caffe's benchmark, grown for real benchmarking. After --warmup
// untimed iterations (at least one), each of --iterations timed iterations
// runs the net twice:
//  - once whole, as training runs it: forward, backward, then the update
//    (clearing the gradients and the solver's step), the context's stream
//    synchronized only at the end of each part. These give the forward,
//    backward, update and total milliseconds of an iteration; on a GPU the
//    kernels of consecutive layers still overlap their launches.
//  - once layer by layer, synchronizing after every layer (a no-op on the
//    CPU): the per-layer table. The synchronization adds a launch latency
//    per layer on a GPU, so the table sums to more than the whole pass.
// The update is the solver's: --solver's rule and settings when given (its
// net too, unless --model names one), else SGD with momentum 0.9 and weight
// decay 1e-4, the ImageNet recipe. A TEST-phase model has no update.
// Reports medians (robust to the odd slow iteration), images/second = batch
// / median total, and the peak memory: the device allocator's peak on a
// GPU, the process's peak resident set on the CPU. The timing lives here,
// in the tool; layers never synchronize.
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

// Applies --level, --stage, --batch_size, --precision and the switches to a net parameter of `phase`.
void apply_net_flags(NetParameter* p, Phase phase) {
  p->mutable_state()->set_phase(phase);
  p->mutable_state()->set_level(FLAGS_level);
  p->mutable_state()->clear_stage();
  for (const std::string& s : split(FLAGS_stage)) p->mutable_state()->add_stage(s);
  if (FLAGS_batch_size > 0 && SetBatchSize(p, FLAGS_batch_size) == 0)
    fail("--batch_size=", FLAGS_batch_size, ": ", FLAGS_model.empty() ? "the solver's net" : FLAGS_model,
         " has no Data, DummyData or Input layer to set it on");
  apply_precision(p);
  apply_switches(p);
}

// time measures the net, not the host's random generator: DummyData's random
// tops (the synthetic stage's images) are drawn once, one random batch as
// PyTorch's benchmarks use, instead of at every forward as in train.
void draw_dummy_data_once(NetParameter* p) {
  int n = 0;
  for (LayerParameter& lp : *p->mutable_layer()) {
    if (lp.type() != "DummyData") continue;
    lp.mutable_dummy_data_param()->set_redraw(false);
    ++n;
  }
  if (n > 0) INFO_LOG << "time: the random tops of " << n << " DummyData layer(s) are drawn once, not at every forward";
}

// The solver whose update time measures, around the --model (or --solver) net.
std::unique_ptr<Solver> timing_solver(std::shared_ptr<const Context> ctx) {
  SolverParameter sp;
  SourceInfo info;
  if (!FLAGS_solver.empty()) {
    ReadTextProto(FLAGS_solver, &sp, &info);
  } else {
    sp.set_type("SGD");
    sp.set_base_lr(0.001f);
    sp.set_lr_policy("fixed");
    sp.set_momentum(0.9f);
    sp.set_weight_decay(1e-4f);
  }
  // --precision reaches the solver given, as in train; the stand-in update
  // above is the tool's own, unscaled whatever the precision, so that a net
  // times the same with --precision as with the file's own types.
  if (!FLAGS_solver.empty()) apply_precision(&sp);
  apply_switches(&sp);  // the stand-in's too: --cuda_graphs and --defer_steps time as train runs
  if (!FLAGS_model.empty()) {
    sp.clear_net();
    sp.clear_net_param();
    sp.clear_train_net();
    sp.clear_train_net_param();
    sp.set_net(FLAGS_model);
  }
  // Only the train net: no test nets, display or snapshots while timing.
  sp.clear_test_net();
  sp.clear_test_net_param();
  sp.clear_test_iter();
  sp.clear_test_state();
  sp.set_test_interval(0);
  sp.set_display(0);
  sp.set_snapshot(0);
  sp.set_snapshot_after_train(false);
  sp.clear_tensorboard_dir();
  if (sp.iter_size() > 1)
    LOG(INFO) << "iter_size " << sp.iter_size() << ": time reports one forward and backward pass per update";
  sp.set_iter_size(1);
  SolverSetup setup(std::move(ctx));
  setup.edit_net = [](NetParameter* p) {
    apply_net_flags(p, TRAIN);
    draw_dummy_data_once(p);
  };
  return Solver::Create(sp, info, setup);
}

// Peak memory in bytes, and what it measured.
std::pair<double, std::string> peak_memory(const Context& ctx) {
#ifdef CORTADO_USE_CUDA
  if (ctx.on_gpu())
    return {static_cast<double>(cuda::device_bytes_peak()),
            str_cat("device allocator peak of live blocks; ", cuda::device_bytes_reserved_peak() >> 20,
                    " MiB reserved from the device at most")};
#endif
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return {ru.ru_maxrss * 1024.0, "process peak resident set"};
}

// The plan of the ranks' gradient sums (PlanGradientBuckets, the rule the
// GradientReducer follows), for scripts/bench/scaling_model.py: one 'bucket:'
// line per sum, in the order they start, then one 'param:' line per trained
// parameter in the order backward completes them (from which a script can
// plan other bucket counts).
void print_gradient_sums(const Net& net, int reduce_buckets) {
  const std::vector<GradientBucket> plan = PlanGradientBuckets(net, reduce_buckets);
  const auto& layers = net.layers();
  auto layer_name = [&](int layer) {
    return layer < 0 ? std::string("(after_backward)") : layers[static_cast<size_t>(layer)]->name();
  };
  std::ostringstream out;
  out << "Gradient sums across ranks, reduce_buckets " << reduce_buckets << ": " << plan.size() << " sums. NCCL "
      << "starts each bucket after the layer named (ready_layer); the MPI and threads engines, and reduce_buckets 1, "
      << "sum each type once after backward\n";
  for (size_t b = 0; b < plan.size(); ++b) {
    const GradientBucket& k = plan[b];
    out << "bucket: index=" << b << " type=" << type_name(k.type) << " values=" << k.count
        << " bytes=" << k.count * static_cast<int64_t>(type_size(k.type)) << " params=" << k.params.size()
        << " ready_layer=" << k.ready_layer << " ready_layer_name=" << layer_name(k.ready_layer) << "\n";
  }
  const std::vector<std::vector<int>>& ready = net.params_ready_after_layer();
  for (size_t layer = ready.size(); layer-- > 0;)
    for (int i : ready[layer]) {
      if (!TrainedParam(net, i)) continue;
      const Tensor& d = net.learnable_params()[static_cast<size_t>(i)]->diff();
      out << "param: index=" << i << " type=" << type_name(d.type()) << " values=" << d.count()
          << " ready_layer=" << layer << " ready_layer_name=" << layers[layer]->name() << "\n";
    }
  std::cout << out.str();
}

int time_net() {
  if (FLAGS_model.empty() && FLAGS_solver.empty()) fail("time needs --model (or --solver, whose net it times)");
  require_iterations();
  if (FLAGS_warmup < 0) fail("--warmup=", FLAGS_warmup, ": must be zero or positive");
  if (FLAGS_batch_size < 0) fail("--batch_size=", FLAGS_batch_size, ": must be positive (0 keeps the model's)");
  const Phase phase = phase_flag(TRAIN);
  if (phase == TEST && FLAGS_model.empty()) fail("--phase=TEST needs --model");
  std::shared_ptr<const Context> context = device_context("time");
  std::unique_ptr<Solver> solver;
  std::unique_ptr<Net> test_net;
  if (phase == TRAIN) {
    if (!FLAGS_model.empty()) {  // read it here first: the same messages as every other command
      NetParameter check;
      ReadTextProto(FLAGS_model, &check);
    }
    solver = timing_solver(context);
    log_types(*solver);
  } else {
    NetParameter p;
    SourceInfo info;
    ReadTextProto(FLAGS_model, &p, &info);
    apply_net_flags(&p, TEST);
    draw_dummy_data_once(&p);
    test_net = std::make_unique<Net>(p, info, context);
    log_types(*test_net);
    for (const std::string& w : split(FLAGS_weights)) test_net->CopyTrainedLayersFrom(w);
  }
  Net* net = solver ? solver->net() : test_net.get();
  if (solver)
    for (const std::string& w : split(FLAGS_weights)) net->CopyTrainedLayersFrom(w);
  const std::string model = FLAGS_model.empty() ? FLAGS_solver : FLAGS_model;
  const Context& ctx = net->context();
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  const auto& layers = net->layers();
  const auto& bottoms = net->bottom_vecs();
  const auto& tops = net->top_vecs();
  const size_t L = layers.size();

  int batch = 0;
  if (L > 0 && !tops[0].empty() && !tops[0][0]->shape().empty()) batch = tops[0][0]->shape()[0];
  // Caffe counts every parameter blob; "trained" leaves out those with
  // lr_mult 0 (BatchNorm's statistics), the count papers publish.
  size_t params = 0, trained = 0;
  for (size_t i = 0; i < net->learnable_params().size(); ++i) {
    params += net->learnable_params()[i]->count();
    if (net->params_lr()[i] != 0) trained += net->learnable_params()[i]->count();
  }
  LOG(INFO) << "Timing " << model << " on "
            << (ctx.on_gpu() ? "GPU " + std::to_string(ctx.device()) : "the CPU, " + cpu_threads_summary() + ", " + cpu_bf16_summary())
            << ": " << L << " layers, " << params << " parameters (" << trained << " trained), batch " << batch
            << (solver ? str_cat(", update: ", solver->type()) : std::string(", TEST phase: no update"));

  // Whole iteration parts. The update is followed by the clearing of the
  // gradients that the solver's Step does before every iteration (nothing
  // left to do after an applied update, which zeroes them in its own pass).
  int skipped = 0;  // timed updates skipped for Inf/NaN gradients
  auto update = [&] {
    if (!solver) return true;
    const bool applied = solver->ApplyUpdate();
    solver->ClearGradients();  // nothing to do after an applied update, which zeroes them itself
    return applied;
  };
  // Warm-up through the Net (at least once), so that an error in a layer is
  // reported with its file, line and layer like everywhere else.
  const int warmup = std::max(1, FLAGS_warmup);
  LOG(INFO) << "Warm-up: " << warmup << " iterations (not timed)";
  // With dynamic loss scaling the first steps of a fresh FP16 net overflow
  // and are skipped while the scale comes down; a skipped update costs less
  // than a real one, so the warm-up goes on until an update is applied (at
  // most 64 more iterations).
  bool applied = false;
  for (int it = 0; it < warmup || (!applied && it < warmup + 64); ++it) {
    net->ClearParamDiffs();
    net->Forward();
    net->Backward();
    applied = update();
    if (it == warmup - 1 && !applied) LOG(INFO) << "The last warm-up update was skipped (Inf/NaN gradients); warming up "
                                                << "until the loss scale lets one through";
  }
  ctx.Synchronize();

  std::vector<double> it_f, it_b, it_u, it_t;
  std::vector<std::vector<double>> lay_f(L), lay_b(L);
  int64_t conversions = 0;  // type conversions in the whole-iteration parts (device ones are launches)
  double last_loss = 0;     // the last timed forward's loss (NaN or Inf: a broken run, not a fast one)
  for (int it = 0; it < FLAGS_iterations; ++it) {
    net->ClearParamDiffs();  // the layer-by-layer pass below accumulated into them
    ctx.Synchronize();
    const int64_t conv0 = Tensor::total_conversions(ctx.on_gpu());
    auto t0 = clock::now();
    last_loss = net->Forward();
    ctx.Synchronize();
    const double f = ms_since(t0);
    t0 = clock::now();
    net->Backward();
    ctx.Synchronize();
    const double b = ms_since(t0);
    t0 = clock::now();
    if (!update()) ++skipped;
    ctx.Synchronize();
    const double u = solver ? ms_since(t0) : 0.0;  // a TEST-phase net has no update: 0, not the clock's noise
    conversions += Tensor::total_conversions(ctx.on_gpu()) - conv0;
    it_f.push_back(f);
    it_b.push_back(b);
    it_u.push_back(u);
    it_t.push_back(f + b + u);
    // Layer by layer.
    ctx.Activate();
    for (size_t i = 0; i < L; ++i) {
      t0 = clock::now();
      layers[i]->Forward(bottoms[i], tops[i]);
      ctx.Synchronize();
      lay_f[i].push_back(ms_since(t0));
    }
    for (size_t i = L; i-- > 0;) {
      if (!net->layer_need_backward()[i]) continue;
      t0 = clock::now();
      layers[i]->Backward(tops[i], net->bottom_need_backward()[i], bottoms[i]);
      ctx.Synchronize();
      lay_b[i].push_back(ms_since(t0));
    }
  }

  // The training loop as train runs it (Solver::Step): iterations back to
  // back, the data layer's batches included, one wait at the end. On the
  // GPU its steps are deferred (solver.hpp): no wait per iteration, which
  // the synchronized parts above have three of.
  double loop_ms = 0;
  int loop_skipped = 0;  // steps of the timed loop skipped for Inf/NaN gradients
  if (solver && FLAGS_iterations > 0) {
    // Not timed: the loop's own first steps (on the GPU, two deferred steps
    // and the capture of its CUDA graph).
    solver->Step(3);
    ctx.Synchronize();
    const int skipped_before = solver->skipped_iterations();
    const auto t0 = clock::now();
    solver->Step(FLAGS_iterations);  // waits for the device at its end
    loop_ms = ms_since(t0) / FLAGS_iterations;
    loop_skipped = solver->skipped_iterations() - skipped_before;
  }

  // Caffe's per-layer lines, in net order (its log parsers read them).
  LOG(INFO) << "Median time per layer over " << FLAGS_iterations
            << " iterations (stream synchronized after each layer):";
  std::vector<double> med_f(L), med_b(L);
  for (size_t i = 0; i < L; ++i) {
    med_f[i] = median_of(lay_f[i]);
    med_b[i] = median_of(lay_b[i]);
    LOG(INFO) << std::setw(20) << layers[i]->name() << "\tforward: " << med_f[i] << " ms.";
    LOG(INFO) << std::setw(20) << layers[i]->name() << "\tbackward: " << med_b[i] << " ms.";
  }
  const double mf = median_of(it_f), mb = median_of(it_b), mu = median_of(it_u), mt = median_of(it_t);
  LOG(INFO) << "Average Forward pass: " << mf << " ms.";
  LOG(INFO) << "Average Backward pass: " << mb << " ms.";
  LOG(INFO) << "Average Forward-Backward: " << mf + mb << " ms.";

  // Where the time goes: layers by cost, then the same summed by type.
  std::vector<size_t> order(L);
  double layer_sum = 0;
  for (size_t i = 0; i < L; ++i) {
    order[i] = i;
    layer_sum += med_f[i] + med_b[i];
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return med_f[x] + med_b[x] > med_f[y] + med_b[y]; });
  auto share = [&](double ms) { return layer_sum > 0 ? 100.0 * ms / layer_sum : 0.0; };
  std::ostringstream table;
  table << std::fixed << std::setprecision(3);
  table << "Layers by cost (median ms over " << FLAGS_iterations << " iterations, synchronized after each layer):\n";
  table << std::setw(5) << "rank" << "  " << std::left << std::setw(28) << "layer" << std::setw(22) << "type"
        << std::right << std::setw(11) << "forward" << std::setw(11) << "backward" << std::setw(11) << "total"
        << std::setw(8) << "share" << "\n";
  for (size_t r = 0; r < L; ++r) {
    const size_t i = order[r];
    table << std::setw(5) << r + 1 << "  " << std::left << std::setw(28) << layers[i]->name() << std::setw(22)
          << layers[i]->type() << std::right << std::setw(11) << med_f[i] << std::setw(11) << med_b[i]
          << std::setw(11) << med_f[i] + med_b[i] << std::setprecision(1) << std::setw(7) << share(med_f[i] + med_b[i])
          << "%" << std::setprecision(3) << "\n";
  }
  std::map<std::string, std::pair<int, double>> by_type;
  for (size_t i = 0; i < L; ++i) {
    auto& e = by_type[layers[i]->type()];
    ++e.first;
    e.second += med_f[i] + med_b[i];
  }
  std::vector<std::pair<std::string, std::pair<int, double>>> types(by_type.begin(), by_type.end());
  std::stable_sort(types.begin(), types.end(),
                   [](const auto& x, const auto& y) { return x.second.second > y.second.second; });
  table << "By layer type:\n";
  for (const auto& t : types)
    table << "  " << std::left << std::setw(22) << t.first << std::right << std::setw(4) << t.second.first
          << " layers" << std::setw(11) << t.second.second << " ms" << std::setprecision(1) << std::setw(7)
          << share(t.second.second) << "%" << std::setprecision(3) << "\n";
  const auto mem = peak_memory(ctx);
  table << std::setprecision(3) << "Median iteration: forward " << mf << " ms, backward " << mb << " ms, update " << mu
        << " ms, total " << mt << " ms; " << std::setprecision(1) << (mt > 0 ? batch * 1000.0 / mt : 0.0)
        << " images/s; peak memory " << mem.first / (1 << 20) << " MiB (" << mem.second << ")\n";
  if (solver)
    table << std::setprecision(3) << "Training loop (" << FLAGS_iterations << " iterations back to back, one wait at "
          << "the end): " << loop_ms << " ms per iteration, " << std::setprecision(1)
          << (loop_ms > 0 ? batch * 1000.0 / loop_ms : 0.0) << " images/s"
          << (loop_skipped ? str_cat(" (", loop_skipped, " of its steps skipped for Inf/NaN gradients)") : "") << "\n";
  const double conv_per_iter = FLAGS_iterations > 0 ? double(conversions) / FLAGS_iterations : 0.0;
  table << "Type conversions per iteration" << (ctx.on_gpu() ? " (kernel launches)" : "") << ": " << conv_per_iter
        << "\n";
  if (skipped)
    table << "Note: " << skipped << " of " << FLAGS_iterations << " timed updates were skipped for Inf/NaN gradients "
          << "(loss scale " << solver->loss_scale() << "); a skipped update costs less than an applied one\n";
  std::cout << table.str();
  if (solver) print_gradient_sums(*net, FLAGS_reduce_buckets >= 0 ? FLAGS_reduce_buckets
                                                                    : static_cast<int>(solver->param().reduce_buckets()));

  // One line for scripts: key=value.
  std::ostringstream line;
  line << std::fixed << std::setprecision(4) << "time: device=" << (ctx.on_gpu() ? "gpu" + std::to_string(ctx.device()) : "cpu")
       << " iterations=" << FLAGS_iterations << " warmup=" << warmup << " batch=" << batch
       << " params=" << params << " trained_params=" << trained << " forward_ms_median=" << mf << " backward_ms_median=" << mb
       << " update_ms_median=" << mu << " total_ms_median=" << mt << " total_ms_mean=" << mean_of(it_t)
       << std::setprecision(1) << " images_per_s=" << (mt > 0 ? batch * 1000.0 / mt : 0.0)
       << " loop_ms_mean=" << std::setprecision(4) << loop_ms << std::setprecision(1)
       << " loop_images_per_s=" << (loop_ms > 0 ? batch * 1000.0 / loop_ms : 0.0)
       << " loop_skipped_steps=" << loop_skipped
       << " peak_mem_mib=" << mem.first / (1 << 20) << " skipped_updates=" << skipped
       << " conversions_per_iter=" << conv_per_iter << std::setprecision(6) << " last_loss=" << last_loss
       << " loop_loss=" << (solver ? solver->smoothed_loss() : last_loss) << " " << EngineUseWords(CountEngines(*net));
  std::cout << line.str() << std::endl;
  return 0;
}

// grad_stats: where a net's gradients fall on FP16's range, measured in FP32
// (see cortado/solvers/grad_stats.hpp), and the static loss scale that fits them.
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The plot_grad_stats.py to run: --plot_script; else the installed one
// (<prefix>/share/cortado, beside <prefix>/bin/trainer); else the source
// tree's, for the trainer of a build tree.
std::string default_plot_script() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path installed =
        exe.parent_path().parent_path() / CORTADO_INSTALL_DATADIR / "cortado" / "plot_grad_stats.py";
    if (std::filesystem::exists(installed, ec)) return installed.string();
  }
  return CORTADO_SOURCE_DIR "/scripts/plot_grad_stats.py";
}

void plot_grad_stats(const GradStatsResult& result) {
  const std::string script = FLAGS_plot_script.empty() ? default_plot_script() : FLAGS_plot_script;
  if (!FileExists(script)) fail("--plot: ", script, " not found (--plot_script names the plot_grad_stats.py to run)");
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
  // The interpreter that has install_deps.sh's Debian packages (numpy,
  // matplotlib): the system's, not whichever python3 comes first on PATH (a
  // virtualenv's may lack them). --python names another.
  const std::string interpreter = !FLAGS_python.empty()                     ? FLAGS_python
                                  : access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3"
                                                                            : "python3";
  const std::string command = interpreter + " " + shell_quote(script) +
                              " " + shell_quote(csv) + " " + shell_quote(FLAGS_plot);
  const int status = std::system(command.c_str());
  if (temporary) std::remove(csv.c_str());
  if (status != 0)
    fail("--plot: `", command, "` failed (", WIFEXITED(status) ? str_cat("exit status ", WEXITSTATUS(status)) :
         std::string("killed"), "); it needs python3 with matplotlib (Debian: python3-matplotlib, see "
         "scripts/install_deps.sh; --python names another interpreter)");
  LOG(INFO) << "Wrote " << FLAGS_plot << " (" << script << ")";
}

int grad_stats() {
  require(FLAGS_model, "model", "grad_stats");
  if (!FLAGS_precision.empty())
    fail("--precision=", FLAGS_precision, ": grad_stats measures in FP32 whatever the net's types; drop --precision");
  require_iterations();
  const std::shared_ptr<const Context> ctx = device_context("grad_stats");
  NetParameter param;
  SourceInfo info;
  ReadTextProto(FLAGS_model, &param, &info);
  param.mutable_state()->set_phase(TRAIN);
  param.mutable_state()->set_level(FLAGS_level);
  for (const std::string& s : split(FLAGS_stage)) param.mutable_state()->add_stage(s);
  ForceFloatTypes(&param);  // measure what FP16 would have to hold, in FP32
  apply_switches(&param);
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

// --help's text: the commands, then the switches from their table.
std::string usage_message() {
  std::string s =
      "command [flags]\ncommands:\n"
      "  train         train or fine-tune a model (--solver, --snapshot or --weights)\n"
      "  test          score a model (--model, --weights, --iterations)\n"
      "  time          benchmark a model: median forward, backward and update ms, images/s,\n"
      "                layers by cost, peak memory (--model, --solver, --batch_size,\n"
      "                --iterations, --warmup, --gpu)\n"
      "  grad_stats    histogram of a model's gradients against FP16's range, with a loss scale\n"
      "                (--model, --weights, --iterations, --csv, --plot, --plot_script, --python)\n"
      "  device_query  show GPU diagnostic information\n"
      "train, test and time: --precision=fp32|fp16|bf16 chooses the types (default: the files' own);\n"
      "--stage=synthetic feeds the models/ nets synthetic data instead of ImageNet\n"
      "\nSwitches: each overrides the field it names in every net (net) or solver (solver) the command\n"
      "builds, or sets the process's CPU work; without it, the files' value, whose default is shown\n"
      "(the README's table says more):\n";
  for (const SwitchInfo& sw : SwitchTable()) {
    const std::string flag = str_cat("--", sw.name, "=", sw.values);
    const std::string where = sw.scope == SwitchScope::kNet      ? str_cat("net ", sw.field)
                              : sw.scope == SwitchScope::kSolver ? str_cat("solver ", sw.field)
                                                                 : std::string("the process");
    s += str_cat("  ", flag, std::string(flag.size() < 30 ? 30 - flag.size() : 1, ' '), where, ", default ",
                 sw.fallback, ":\n      ", sw.help, "\n");
  }
  return s;
}

int main(int argc, char** argv) {
  // The arguments as given, for limit_openmp_spinning (gflags takes the flags out of argv).
  std::vector<char*> given(argv, argv + argc + 1);
  FLAGS_alsologtostderr = 1;
  gflags::SetUsageMessage(usage_message());
  gflags::SetVersionString(CORTADO_VERSION);
  cortado::InitTool(&argc, &argv);  // util/tool_flags.hpp: flags, and glog with Caffe's prefix
  try {
    // A bad switch fails before anything is read; the process's ones first,
    // since limit_openmp_spinning follows --cpu_share.
    flag_switches() = switches_from_flags();
    flag_switches().ApplyToProcess();
  } catch (const cortado::Error& e) {
    std::cerr << "trainer: error: " << e.what() << std::endl;
    return 1;
  }
  // It may run the trainer again from its start with GOMP_SPINCOUNT set
  // (idle OpenMP threads then spin briefly; util/openmp_spin.hpp): before
  // any thread or log line.
  limit_openmp_spinning(given.data());
  WarnRetiredVariables();  // an old script's CORTADO_NHWC=1, say: one line each
  google::InstallFailureSignalHandler();
  // A run ended by SIGTERM (a timeout, a user's kill) says where each rank was.
  dump_rank_phases_on(SIGTERM);
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
  std::string who = str_cat("trainer ", argv[1]);
  static std::string signal_preamble;  // lives until the process ends, for the SIGTERM handler
  // Prints the message; a rank of several ends the job, telling the other
  // ranks which rank failed and where (stopped: this rank stops because
  // another failed, whose message it printed).
  auto error = [&](const std::string& message, bool stopped) {
    if (several_ranks()) {
      const std::string line = stopped ? message
                                       : str_cat("rank ", g_comm->rank(), " of ", g_comm->size(), " failed",
                                                 at_rank_phase(g_comm->rank()), ": ", message);
      std::cerr << who << ": error: " << line << std::endl;
      g_comm->Abort(1, stopped ? std::string() : line);
    }
    std::cerr << who << ": error: " << message << std::endl;
    if (ranks_left_running() > 0) {
      // RunRanks left a hung rank's thread running: end without the
      // destructors it may still be using.
      std::cerr.flush();
      google::FlushLogFiles(google::INFO);
      std::_Exit(1);
    }
    return 1;
  };
  try {
    if (!FLAGS_precision.empty()) ParsePrecision(FLAGS_precision);  // a bad value fails before anything is read
    CheckLauncher();
    if (LauncherRanks() > 1) {
      g_comm = MpiWorld();  // an Error naming the fix in a build without MPI
      if (several_ranks()) {
        who += str_cat(" (rank ", g_comm->rank(), " of ", g_comm->size(), ")");
        if (argv[1] != std::string("train")) fail("only train runs across ranks; start ", argv[1], " without mpirun");
        if (g_comm->rank() != 0) FLAGS_minloglevel = google::WARNING;  // rank 0 logs the run
        // The launcher ends the other ranks with SIGTERM when one dies.
        signal_preamble = str_cat(who, ": ended by the launcher, as it ends the job when another rank has died or "
                                       "failed (see that rank's message)");
        set_signal_preamble(signal_preamble.c_str());
      }
    }
    return it->second();
  } catch (const cortado::RankStopped& e) {
    return error(e.what(), true);
  } catch (const cortado::Error& e) {
    return error(e.what(), false);
  } catch (const std::bad_alloc&) {
    return error("out of memory (are the batch size and the blob shapes what you meant?)", false);
  } catch (const std::exception& e) {
    // Not a user error Cortado recognized; still one message and status 1,
    // never an abort trace.
    return error(e.what(), false);
  }
}
