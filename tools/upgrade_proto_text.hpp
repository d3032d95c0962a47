#pragma once
// The body of upgrade_net_proto_text and upgrade_solver_proto_text: read IN
// as Cortado reads it (io/upgrade_proto.hpp upgrades it), write the message in
// text format to OUT (OUT.tmp, renamed), say on stdout whether IN needed the
// upgrade. Errors print "<tool>: error: <message>" and give status 1.

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <google/protobuf/text_format.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "cortado/common.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/util/tool_flags.hpp"

namespace cortado {

template <typename M>
int UpgradeProtoTextMain(const char* tool, const char* usage, bool (*needs_upgrade)(const M&), int argc,
                         char** argv) {
  FLAGS_alsologtostderr = 1;
  gflags::SetUsageMessage(usage);
  cortado::InitTool(&argc, &argv);  // util/tool_flags.hpp: flags, and glog with Caffe's prefix
  if (argc != 3) {
    std::cerr << tool << ": error: expected IN OUT, got " << (argc - 1) << " argument(s)\n";
    return 1;
  }
  try {
    M upgraded;
    ReadTextProto(argv[1], &upgraded);
    // The file as written (it parsed above), to say whether it needed the upgrade.
    std::ifstream in(argv[1]);
    std::stringstream text;
    text << in.rdbuf();
    M as_written;
    const bool needed = google::protobuf::TextFormat::ParseFromString(text.str(), &as_written) &&
                        needs_upgrade(as_written);
    WriteTextProto(argv[2], upgraded);
    std::cout << tool << ": " << argv[1] << (needed ? " upgraded" : " was already in the current format")
              << "; wrote " << argv[2] << "\n";
  } catch (const Error& e) {
    std::cerr << tool << ": error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace cortado
