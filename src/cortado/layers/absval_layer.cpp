#include "cortado/layers/absval_layer.hpp"

namespace cortado {

CORTADO_INSTANTIATE_ELEMENTWISE(AbsValOp);

}  // namespace cortado
