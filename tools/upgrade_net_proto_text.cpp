// Writes a net prototxt of an older Caffe format (V0 or V1 layers, net-level
// inputs, BVLC's old BatchNorm ParamSpecs) in today's format, as BVLC
// Caffe's tool of the same name does:
//
//   upgrade_net_proto_text IN OUT
//
// IN is read as every Cortado command reads a net (io/upgrade_proto.hpp upgrades
// it); OUT gets the upgraded NetParameter in text format (written to
// OUT.tmp and renamed). A file already in today's format is written as it
// parses. Errors name the file and line; the exit status is then 1.

#include "cortado.pb.h"
#include "cortado/io/upgrade_proto.hpp"
#include "upgrade_proto_text.hpp"

int main(int argc, char** argv) {
  return cortado::UpgradeProtoTextMain<cortado::NetParameter>(
      "upgrade_net_proto_text",
      "Writes a V0/V1 Caffe net prototxt in today's format.\nUsage: upgrade_net_proto_text IN OUT",
      cortado::NetNeedsUpgrade, argc, argv);
}
