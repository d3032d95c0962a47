#include "cortado/layers/input_layer.hpp"

#include <climits>

namespace cortado {

template <typename Ftype, typename Btype>
void InputLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const InputParameter& p = this->layer_param().input_param();
  const int num_top = static_cast<int>(top.size());
  const int num_shape = p.shape_size();
  if (num_shape != 0 && num_shape != 1 && num_shape != num_top) {
    this->field_error("input_param.shape", "has ", num_shape, " shapes for ", num_top,
                      " tops; give none, one for every top, or one per top");
  }
  std::vector<std::vector<int>> shapes;
  for (int s = 0; s < num_shape; ++s) {
    std::vector<int> shape;
    for (int64_t d : p.shape(s).dim()) {
      if (d < 0 || d > INT_MAX) {
        this->field_error("input_param.shape", "shape ", s, " has dimension ", d, ", expected 0..", INT_MAX);
      }
      shape.push_back(static_cast<int>(d));
    }
    shapes.push_back(shape);
  }
  if (num_shape == 0) return;
  for (int i = 0; i < num_top; ++i) top[i]->Reshape(shapes[num_shape == 1 ? 0 : i]);
}

CORTADO_INSTANTIATE_LAYER(InputLayer);

}  // namespace cortado
