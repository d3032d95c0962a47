// ReLU's kernels: the elementwise family's (elementwise_kernels.cuh).
#include "cortado/layers/relu_layer.hpp"
#include "elementwise_kernels.cuh"

CORTADO_INSTANTIATE_ELEMENTWISE_GPU(cortado::ReLUOp);
