// Builds a small net from prototxt text with an installed Cortado and runs one
// forward pass on the CPU; checks that the softmax rows sum to 1 and the loss
// is finite. Prints "tiny_forward: ok" on success, exits 1 otherwise.

#include <glog/logging.h>

#include <cmath>
#include <cstdio>
#include <exception>

#include "cortado/config.hpp"
#include "cortado/io/proto_io.hpp"
#include "cortado/net/net.hpp"

namespace {

const char* kNet = R"(
name: "tiny"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param {
    shape { dim: 4 dim: 3 } shape { dim: 4 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "relu" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "prob" type: "Softmax" bottom: "ip2" top: "prob" }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
)";

}  // namespace

int main(int argc, char** argv) {
  FLAGS_logtostderr = 1;
  FLAGS_minloglevel = 1;
  google::InitGoogleLogging(argv[0]);
  try {
    cortado::NetParameter param;
    cortado::ParseTextProto(kNet, "tiny.prototxt", &param);
    param.mutable_state()->set_phase(cortado::TEST);
    cortado::Net net(param);
    const double loss = net.Forward();
    const auto prob = net.blob_by_name("prob");
    const float* p = prob->cpu_data<float>();
    const int rows = prob->shape(0);
    const int cols = static_cast<int>(prob->count() / rows);
    for (int r = 0; r < rows; ++r) {
      double sum = 0;
      for (int c = 0; c < cols; ++c) sum += p[r * cols + c];
      if (std::fabs(sum - 1.0) > 1e-4) {
        std::fprintf(stderr, "tiny_forward: softmax row %d sums to %g\n", r, sum);
        return 1;
      }
    }
    if (!std::isfinite(loss) || loss <= 0) {
      std::fprintf(stderr, "tiny_forward: loss %g\n", loss);
      return 1;
    }
    std::printf("tiny_forward: Cortado %s, %zu layers, prob %s, loss %.4f: ok\n", CORTADO_VERSION,
                net.layers().size(), prob->shape_string().c_str(), loss);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tiny_forward: %s\n", e.what());
    return 1;
  }
  return 0;
}
