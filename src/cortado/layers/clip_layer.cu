// Clip's kernels: the elementwise family's (elementwise_kernels.cuh).
#include "cortado/layers/clip_layer.hpp"
#include "elementwise_kernels.cuh"

CORTADO_INSTANTIATE_ELEMENTWISE_GPU(cortado::ClipOp);
