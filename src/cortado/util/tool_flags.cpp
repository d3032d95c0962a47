#include "cortado/util/tool_flags.hpp"

#include <gflags/gflags.h>
#include <glog/logging.h>

namespace cortado {

void InitTool(int* argc, char*** argv) {
  FLAGS_log_year_in_prefix = false;  // a default: the command line may set it
  gflags::ParseCommandLineFlags(argc, argv, true);
  google::InitGoogleLogging((*argv)[0]);
}

}  // namespace cortado
