#include "cortado/layers/dummy_data_layer.hpp"

#include <climits>

#include "cortado/layers/filler.hpp"
#include "cortado/layers/permute_layer.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
std::vector<std::vector<int>> DummyDataLayer<Ftype, Btype>::ReadShapes(int num_top) const {
  const DummyDataParameter& p = this->layer_param().dummy_data_param();
  auto check_dim = [&](const char* field, int64_t d) {
    if (d < 0 || d > INT_MAX) {
      this->field_error(std::string("dummy_data_param.") + field, "dimension ", d, " is out of range 0..", INT_MAX);
    }
    return static_cast<int>(d);
  };
  std::vector<std::vector<int>> shapes(num_top);
  const bool legacy = p.num_size() > 0 || p.channels_size() > 0 || p.height_size() > 0 || p.width_size() > 0;
  if (legacy) {
    if (p.shape_size() > 0) {
      this->field_error("dummy_data_param.shape", "give either shape or num/channels/height/width, not both");
    }
    const std::pair<const char*, const google::protobuf::RepeatedField<uint32_t>*> dims[] = {
        {"num", &p.num()}, {"channels", &p.channels()}, {"height", &p.height()}, {"width", &p.width()}};
    for (const auto& [name, values] : dims) {
      if (values->size() != 1 && values->size() != num_top) {
        this->field_error(std::string("dummy_data_param.") + name, "has ", values->size(), " values for ",
                          num_top, " tops; give one for every top or one per top");
      }
    }
    for (int i = 0; i < num_top; ++i) {
      for (const auto& [name, values] : dims) {
        shapes[i].push_back(check_dim(name, values->Get(values->size() == 1 ? 0 : i)));
      }
    }
    return shapes;
  }
  if (p.shape_size() != 1 && p.shape_size() != num_top) {
    this->field_error("dummy_data_param.shape", "has ", p.shape_size(), " shapes for ", num_top,
                      " tops; give one for every top or one per top");
  }
  for (int i = 0; i < num_top; ++i) {
    const int s = p.shape_size() == 1 ? 0 : i;
    double values = 1;
    for (int64_t d : p.shape(s).dim()) {
      shapes[i].push_back(check_dim("shape", d));
      values *= static_cast<double>(d);
    }
    if (values > static_cast<double>(kMaxBlobCount)) {
      this->field_error(str_cat("dummy_data_param.shape[", s, "]"), "holds ", values, " values, more than the ",
                        kMaxBlobCount, " a blob may hold");
    }
  }
  return shapes;
}

template <typename Ftype, typename Btype>
void DummyDataLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const DummyDataParameter& p = this->layer_param().dummy_data_param();
  const int num_top = static_cast<int>(top.size());
  const int num_fillers = p.data_filler_size();
  if (num_fillers != 0 && num_fillers != 1 && num_fillers != num_top) {
    this->field_error("dummy_data_param.data_filler", "has ", num_fillers, " fillers for ", num_top,
                      " tops; give none, one for every top, or one per top");
  }
  const std::vector<std::vector<int>> shapes = ReadShapes(num_top);
  fillers_.clear();
  refill_.clear();
  for (int i = 0; i < num_top; ++i) {
    FillerParameter f;  // default: constant 0
    if (num_fillers > 0) f = p.data_filler(num_fillers == 1 ? 0 : i);
    try {
      ValidateFiller(f, "");
    } catch (const Error& e) {
      this->field_error("dummy_data_param.data_filler", e.what());
    }
    fillers_.push_back(f);
    refill_.push_back(f.type() != "constant" && p.redraw());
  }
  // The first fill also checks the filler's values (uniform min <= max ...).
  for (int i = 0; i < num_top; ++i) {
    top[i]->Reshape(shapes[i]);
    try {
      Draw(static_cast<size_t>(i), top[i], "filler");
    } catch (const Error& e) {
      this->field_error("dummy_data_param.data_filler", e.what());
    }
  }
}

template <typename Ftype, typename Btype>
void DummyDataLayer<Ftype, Btype>::Draw(size_t i, Blob* top, const char* where) {
  if (top->layout() != Layout::NHWC || fillers_[i].type() == "constant") {
    Fill(fillers_[i], top, where);
    return;
  }
  // Channels last (net_layout.hpp): drawn in Caffe's order, then moved, so
  // that every value sits where the NCHW net has it.
  nchw_.ReshapeLike(*top);
  nchw_.set_layout(Layout::NCHW);
  Fill(fillers_[i], &nchw_, where);
  CopyLayout(top->shape(), Layout::NCHW, Layout::NHWC, type_of<Ftype>(), nchw_.data().data_raw(type_of<Ftype>()),
             top->data().mutable_data_raw(type_of<Ftype>()), false, nullptr);
}

template <typename Ftype, typename Btype>
void DummyDataLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  for (size_t i = 0; i < top.size(); ++i) {
    if (refill_[i]) Draw(i, top[i], "dummy_data_param.data_filler");
  }
}

CORTADO_INSTANTIATE_LAYER(DummyDataLayer);

}  // namespace cortado
