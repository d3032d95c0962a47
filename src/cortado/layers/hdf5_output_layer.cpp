#include "cortado/layers/hdf5_output_layer.hpp"

namespace cortado {

namespace {
const char* const kDatasets[] = {"data", "label"};  // Caffe's names
}  // namespace

template <typename Ftype, typename Btype>
void HDF5OutputLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const HDF5OutputParameter& p = this->layer_param().hdf5_output_param();
  if (p.file_name().empty()) this->field_error("hdf5_output_param.file_name", "is required");
  writer_.reset();  // a second SetUp closes the first file before replacing it
  try {
    writer_ = std::make_unique<hdf5::AppendWriter>(p.file_name());
  } catch (const Error& e) {
    this->field_error("hdf5_output_param.file_name", e.what());
  }
}

template <typename Ftype, typename Btype>
void HDF5OutputLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  // Caffe's rule: the label rows go with the data rows.
  auto rows = [](const Blob* b) { return b->num_axes() > 0 ? b->shape(0) : 1; };
  if (bottom.size() == 2 && rows(bottom[1]) != rows(bottom[0])) {
    this->field_error("bottom[1]", "has ", rows(bottom[1]), " rows (shape ", bottom[1]->shape_string(),
                      ") but bottom[0] has ", rows(bottom[0]), " (shape ", bottom[0]->shape_string(), ")");
  }
}

template <typename Ftype, typename Btype>
void HDF5OutputLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  for (size_t k = 0; k < bottom.size(); ++k) {
    const Blob& b = *bottom[k];
    std::vector<int64_t> dims(b.shape().begin(), b.shape().end());
    if (dims.empty()) dims.push_back(1);  // a scalar is one row
    try {
      writer_->Append(kDatasets[k], dims, b.cpu_data<float>());
    } catch (const Error& e) {
      fail("layer '", this->name(), "' (HDF5Output): ", e.what());
    }
  }
}

CORTADO_INSTANTIATE_LAYER(HDF5OutputLayer);

}  // namespace cortado
