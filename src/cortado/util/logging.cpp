#include "cortado/util/logging.hpp"

namespace cortado {

namespace {
thread_local bool t_logs_info = true;
}  // namespace

bool thread_logs_info() { return t_logs_info; }
void set_thread_logs_info(bool on) { t_logs_info = on; }

}  // namespace cortado
