#pragma once
// The model folders' nets (models/<folder>/train_val.prototxt) as trainer
// reads them with --stage=synthetic --precision=P: the DummyData in place of
// the Data layers, and P's default types. The tests that measure a real
// net (layout plans, memory plans, CUDA graphs) read them through this.
#include <string>

#include "cortado/io/proto_io.hpp"
#include "cortado/precision.hpp"
#include "test_paths.hpp"

namespace cortado {
namespace test {

inline NetParameter SyntheticModelNet(const std::string& folder, Precision precision) {
  NetParameter p;
  ReadTextProto(SourceRoot() + "/models/" + folder + "/train_val.prototxt", &p);
  p.mutable_state()->add_stage("synthetic");
  ApplyPrecision(precision, &p);
  return p;
}

}  // namespace test
}  // namespace cortado
