// The Solver's snapshots and resume (solvers/solver.hpp): the weights in
// Caffe's binary or HDF5 files, the state (iteration, schedules, loss scale,
// random generators, history) in a .solverstate.
#include <algorithm>
#include <functional>

#include "cortado/io/blob_io.hpp"
#include "cortado/io/hdf5.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/util/logging.hpp"
#include "cortado/util/rng.hpp"

namespace cortado {

namespace {
// NVCaffe's raw blobs in place of the float ones Net::ToProto wrote (one
// LayerParameter per layer, in order).
void write_raw_blobs(Net& net, bool write_diff, NetParameter* param) {
  for (size_t i = 0; i < net.layers().size(); ++i) {
    std::vector<std::shared_ptr<Blob>>& blobs = net.layers()[i]->blobs();
    for (size_t j = 0; j < blobs.size(); ++j)
      BlobToProto(*blobs[j], param->mutable_layer(static_cast<int>(i))->mutable_blobs(static_cast<int>(j)), write_diff,
                  BlobFormat::kRaw);
  }
}

// "layer 'conv1' parameter 0": where learnable parameter i lives.
std::string describe_param(const Net& net, int i) {
  const Blob* p = net.learnable_params()[static_cast<size_t>(i)];
  for (const auto& l : net.layers())
    for (size_t j = 0; j < l->blobs().size(); ++j)
      if (l->blobs()[j].get() == p) return str_cat("layer '", l->name(), "' parameter ", j);
  return str_cat("learnable parameter ", i);
}

// The weights a state names. Caffe writes the path its run used, often
// relative to that run's working directory: as given, then relative to the
// state's folder, then the file of that name beside the state.
std::string learned_net_path(const std::string& learned_net, const std::string& state_file) {
  std::string model = ResolvePath(learned_net, state_file);
  if (FileExists(model)) return model;
  const size_t slash = state_file.rfind('/');
  const std::string beside = (slash == std::string::npos ? "" : state_file.substr(0, slash + 1)) +
                             learned_net.substr(learned_net.rfind('/') + 1);
  if (FileExists(beside)) return beside;
  fail(state_file, ": learned_net '", learned_net, "' does not exist (nor beside the state file)");
}

// The history blobs of `state` into history(i, k). Order: history_order when
// the file has it; else Caffe's (BVLC, NVCaffe: slot k of parameter i at
// k * params + i) unless the file has rng_state, which marks Cortado's
// earlier files, interleaved per parameter (i * slots + k).
void read_history(const SolverState& state, const std::string& file, const Net& net, int slots,
                  const std::function<Blob&(int, int)>& history) {
  int order = state.has_rng_state() ? 1 : 0;
  if (state.has_history_order()) order = state.history_order();
  if (order != 0 && order != 1)
    fail(file, ": history_order = ", order, "; known orders: 0 (Caffe's: every parameter's first buffer, then every ",
         "second) and 1 (interleaved per parameter)");
  const int params = static_cast<int>(net.learnable_params().size());
  for (int i = 0; i < params; ++i)
    for (int k = 0; k < slots; ++k) {
      const int j = order == 0 ? k * params + i : i * slots + k;
      const BlobProto& b = state.history(j);
      Blob& h = history(i, k);
      const std::string what =
          str_cat(file, ": history blob ", j, " (buffer ", k, " of ", describe_param(net, i), ", ",
                  order == 0 ? "Caffe's order" : "the interleaved order of Cortado's earlier files", ")");
      if (!h.ShapeEquals(b))
        fail(what, " has shape ", shape_string(BlobProtoShape(b)), " in the file and ", h.shape_string(), " in the net");
      h.FromProto(b, false, what);
    }
}
}  // namespace

std::string Solver::Snapshot() {
  ResolvePending();  // the loss scale and the skipped steps it saves
  // Every rank's generator state goes into rank 0's file. A collective:
  // every rank snapshots at the same iteration (intervals, agreed actions).
  MarkPhase("a snapshot");
  std::vector<std::string> rank_states;
  if (ranks() > 1) {
    for (int k = 0; k < ranks(); ++k) {
      std::string s = rank() == k ? rng_state() : std::string();
      s.resize(static_cast<size_t>(comm_->Max(static_cast<int64_t>(s.size()))));  // rank k's length
      comm_->Broadcast(s.data(), static_cast<int64_t>(s.size()), k);
      rank_states.push_back(std::move(s));
    }
  }
  if (rank() != 0) return "";  // the ranks' weights are the same: rank 0 writes them
  std::string prefix = param_.snapshot_prefix();
  if (prefix.empty()) prefix = param_.net().substr(0, param_.net().rfind('.'));
  const std::string base = str_cat(prefix, "_iter_", iter_);
  const bool h5 = param_.snapshot_format() == SolverParameter::HDF5;
  const std::string model = base + (h5 ? ".caffemodel.h5" : ".caffemodel");
  // HDF5 weights are typed datasets: Caffe's float blobs feed them.
  const BlobFormat format = SnapshotBlobFormat(param_);
  NetParameter net_param;
  net_->ToProto(&net_param, param_.snapshot_diff());
  if (format == BlobFormat::kRaw && !h5) write_raw_blobs(*net_, param_.snapshot_diff(), &net_param);
  if (h5) {
    // Caffe's layout for the weights. The solver state stays a binary proto
    // (.solverstate, not Caffe's .solverstate.h5): it holds what Caffe's
    // HDF5 state has no place for (random generators, the loss scale).
    INFO_LOG << "Snapshotting to HDF5 file " << model;
    hdf5::WriteWeights(model, net_param);
  } else {
    INFO_LOG << "Snapshotting to binary proto file " << model;
    WriteBinaryProto(model, net_param);
  }
  SolverState state;
  state.set_iter(iter_);
  state.set_learned_net(model);
  state.set_current_step(current_step_);
  state.set_rng_state(rng_state());
  for (const std::string& s : rank_states) state.add_rank_rng_state(s);
  state.set_loss_scale(loss_scale_);
  state.set_clean_iterations(clean_iterations_);
  state.set_skipped_iterations(skipped_iterations_);
  state.set_minimum_loss(minimum_loss_);
  state.set_iter_last_event(iter_last_event_);
  if (param_.larc_turbo()) {
    LarcCorrelationToHost();
    for (double c : larc_corr_) state.add_larc_turbo_correlation(c);
  }
  // Caffe's order: every parameter's first buffer, then every second
  // (Adam's m then v, AdaDelta's mean g^2 then mean update^2), as BVLC and
  // NVCaffe lay out `history`; said explicitly, since a file with rng_state
  // and without history_order is one of Cortado's earlier, interleaved ones.
  state.set_history_order(0);
  const int params = static_cast<int>(net_->learnable_params().size());
  for (int k = 0; k < history_slots(); ++k)
    for (int i = 0; i < params; ++i) BlobToProto(history(i, k), state.add_history(), false, format);
  const std::string state_file = base + ".solverstate";
  INFO_LOG << "Snapshotting solver state to binary proto file " << state_file;
  WriteBinaryProto(state_file, state);
  return model;
}

void Solver::Restore(const std::string& state_file) {
  SolverState state;
  ReadBinaryProto(state_file, &state);
  iter_ = state.iter();
  current_step_ = state.current_step();
  minimum_loss_ = state.minimum_loss();
  iter_last_event_ = state.iter_last_event();
  larc_corr_.assign(state.larc_turbo_correlation().begin(), state.larc_turbo_correlation().end());
  larc_corr_on_device_ = false;
  if (!larc_corr_.empty() && larc_corr_.size() != net_->learnable_params().size())
    fail(state_file, ": holds ", larc_corr_.size(), " larc_turbo_correlation values for ",
         net_->learnable_params().size(), " parameters");
  if (state.has_learned_net()) net_->CopyTrainedLayersFrom(learned_net_path(state.learned_net(), state_file));
  // The weights and history now come from the host: a CUDA graph captured
  // before would read stale device copies. Capture again after two deferred
  // steps have brought them to the device.
  graphs_.Drop(true);
  const size_t slots = net_->learnable_params().size() * history_slots();
  if (static_cast<size_t>(state.history_size()) != slots)
    fail(state_file, ": holds ", state.history_size(), " history blobs; this ", type(), " solver over ",
         net_->learnable_params().size(), " parameters keeps ", slots);
  read_history(state, state_file, *net_, history_slots(), [this](int i, int k) -> Blob& { return history(i, k); });
  if (ranks() > 1 && state.rank_rng_state_size() == ranks()) {
    set_rng_state(state.rank_rng_state(rank()));
  } else {
    if (state.has_rng_state()) set_rng_state(state.rng_state());
    if (ranks() > 1 || state.rank_rng_state_size() > 0)
      LOG(WARNING) << state_file << " was written by a run of " << std::max(state.rank_rng_state_size(), 1)
                   << " rank(s), this one has " << ranks() << ": every rank restarts from rank 0's random "
                   << "generator, so random draws (dropout) differ from the run that wrote it";
  }
  if (state.has_loss_scale()) {
    clean_iterations_ = state.clean_iterations();
    skipped_iterations_ = state.skipped_iterations();
    SetLossScale(state.loss_scale());
  }
  net_->SeekData(static_cast<int64_t>(iter_) * param_.iter_size());
}

}  // namespace cortado
