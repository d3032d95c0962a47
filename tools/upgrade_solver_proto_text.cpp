// Writes a solver prototxt of an older Caffe format (the solver_type enum;
// nets inside it in V0/V1 format) in today's format, as BVLC Caffe's tool of
// the same name does:
//
//   upgrade_solver_proto_text IN OUT
//
// IN is read as every Cortado command reads a solver (io/upgrade_proto.hpp
// upgrades it); OUT gets the upgraded SolverParameter in text format
// (written to OUT.tmp and renamed). A file that sets both solver_type and
// type to different solvers is an error; so is any parse error (exit
// status 1).

#include "cortado.pb.h"
#include "cortado/io/upgrade_proto.hpp"
#include "upgrade_proto_text.hpp"

int main(int argc, char** argv) {
  return cortado::UpgradeProtoTextMain<cortado::SolverParameter>(
      "upgrade_solver_proto_text",
      "Writes a Caffe solver prototxt (solver_type, V0/V1 nets inside) in today's format.\n"
      "Usage: upgrade_solver_proto_text IN OUT",
      cortado::SolverNeedsUpgrade, argc, argv);
}
