// Exp's kernels: the elementwise family's (elementwise_kernels.cuh).
#include "cortado/layers/exp_layer.hpp"
#include "elementwise_kernels.cuh"

CORTADO_INSTANTIATE_ELEMENTWISE_GPU(cortado::ExpOp);
