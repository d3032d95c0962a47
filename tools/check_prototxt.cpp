// Reads net and solver prototxt files as Cortado's commands read them
// (parse, upgrade of older Caffe formats, notes), without building anything,
// and says for each file whether Cortado takes it:
//
//   check_prototxt [--solver] FILE...
//
// Each file gets one line on stdout, tab-separated:
//   OK           FILE  <layers> layers
//   UNAVAILABLE  FILE  <message>   a layer type Cortado does not have (by its
//                                  parameters, e.g. python_param, or by its
//                                  type string)
//   FAILED       FILE  <message>   any other error (file:line and field)
// --solver reads the files as solvers (the nets inside them are checked; net
// files they name are not opened), otherwise as nets. A solver's `type` must
// be one Cortado has. The exit status is 1 when any file FAILED, else 0.

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "cortado.pb.h"
#include "cortado/common.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/layer_registry.hpp"
#include "cortado/solvers/solver.hpp"
#include "cortado/util/tool_flags.hpp"

DEFINE_bool(solver, false, "Read the files as SolverParameter (default: NetParameter)");

namespace {

using cortado::Error;
using cortado::str_cat;

// Thrown for a layer type Cortado does not have.
struct Unavailable : Error {
  using Error::Error;
};

int check_net(const std::string& file, const cortado::NetParameter& net, const std::string& where) {
  for (const cortado::LayerParameter& l : net.layer()) {
    if (!cortado::IsKnownLayerType(l.type()))
      throw Unavailable(str_cat(file, ": ", where, "layer '", l.name(), "': layer type '", l.type(),
                                "' is not available in Cortado"));
  }
  return net.layer_size();
}

// The number of layers checked.
int check(const std::string& file) {
  if (!FLAGS_solver) {
    cortado::NetParameter net;
    cortado::ReadTextProto(file, &net);
    return check_net(file, net, "");
  }
  cortado::SolverParameter s;
  cortado::ReadTextProto(file, &s);
  const std::vector<std::string> types = cortado::Solver::Types();
  if (std::find(types.begin(), types.end(), s.type()) == types.end()) {
    std::string known;
    for (const std::string& t : types) known += (known.empty() ? "" : ", ") + t;
    throw Error(str_cat(file, ": type: \"", s.type(), "\" is not a solver type of Cortado; known: ", known));
  }
  int layers = 0;
  if (s.has_net_param()) layers += check_net(file, s.net_param(), "net_param: ");
  if (s.has_train_net_param()) layers += check_net(file, s.train_net_param(), "train_net_param: ");
  for (const cortado::NetParameter& n : s.test_net_param()) layers += check_net(file, n, "test_net_param: ");
  return layers;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\t', ' ');
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_logtostderr = 1;  // the upgrade lines and notes, beside the verdicts on stdout
  gflags::SetUsageMessage(
      "Says whether Cortado reads net (or, with --solver, solver) prototxt files.\n"
      "Usage: check_prototxt [--solver] FILE...");
  cortado::InitTool(&argc, &argv);  // util/tool_flags.hpp: flags, and glog with Caffe's prefix
  if (argc < 2) {
    std::cerr << "check_prototxt: error: expected one or more files\n";
    return 1;
  }
  bool failed = false;
  for (int i = 1; i < argc; ++i) {
    const std::string file = argv[i];
    try {
      const int layers = check(file);
      std::cout << "OK\t" << file << "\t" << layers << " layers\n";
    } catch (const Unavailable& e) {
      std::cout << "UNAVAILABLE\t" << file << "\t" << one_line(e.what()) << "\n";
    } catch (const Error& e) {
      const std::string msg = one_line(e.what());
      const bool unavailable = msg.find("is not available in Cortado") != std::string::npos;
      std::cout << (unavailable ? "UNAVAILABLE\t" : "FAILED\t") << file << "\t" << msg << "\n";
      failed |= !unavailable;
    }
  }
  return failed ? 1 : 0;
}
