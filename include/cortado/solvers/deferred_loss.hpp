#pragma once
// While a DeferLossReads lives on a thread, LayerBase::Forward leaves the loss
// tops unread and returns 0: on the GPU, reading them is a wait on the device
// per loss layer per iteration. Solver::Step's deferred iterations sum them
// on the device instead (UpdateExecutor::AddLoss) and read the sums at the
// next display. Scopes nest.
namespace cortado {

class DeferLossReads {
 public:
  DeferLossReads();
  ~DeferLossReads();
  DeferLossReads(const DeferLossReads&) = delete;
  DeferLossReads& operator=(const DeferLossReads&) = delete;

 private:
  bool before_;
};

/// Whether a DeferLossReads lives on this thread.
bool loss_reads_deferred();

}  // namespace cortado
