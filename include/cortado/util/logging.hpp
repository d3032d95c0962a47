#pragma once
// INFO logs per thread. The ranks of one process (run_ranks.hpp) share one
// log, so every rank but 0 keeps to warnings and errors, as the other
// processes' ranks do under mpirun (the trainer raises their minloglevel).

#include <glog/logging.h>

namespace cortado {

/// Whether the calling thread writes INFO lines (true unless set off).
bool thread_logs_info();
void set_thread_logs_info(bool on);

}  // namespace cortado

/// LOG(INFO), on the threads that log INFO.
#define INFO_LOG LOG_IF(INFO, ::cortado::thread_logs_info())
