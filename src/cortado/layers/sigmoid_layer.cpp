#include "cortado/layers/sigmoid_layer.hpp"

namespace cortado {

CORTADO_INSTANTIATE_ELEMENTWISE(SigmoidOp);

}  // namespace cortado
