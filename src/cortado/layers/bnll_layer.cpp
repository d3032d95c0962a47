#include "cortado/layers/bnll_layer.hpp"

namespace cortado {

CORTADO_INSTANTIATE_ELEMENTWISE(BNLLOp);

}  // namespace cortado
