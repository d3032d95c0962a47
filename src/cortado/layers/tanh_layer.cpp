#include "cortado/layers/tanh_layer.hpp"

namespace cortado {

CORTADO_INSTANTIATE_ELEMENTWISE(TanHOp);

}  // namespace cortado
