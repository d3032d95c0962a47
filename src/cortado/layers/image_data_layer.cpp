#include "cortado/layers/image_data_layer.hpp"

#include <memory>
#include <utility>
#include <vector>

#include "cortado/data/image_list.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
DataSourceParams ImageDataLayer<Ftype, Btype>::SourceParams() const {
  return this->SourceParamsOf(this->layer_param().image_data_param(), "image_data_param.");
}

template <typename Ftype, typename Btype>
TransformationParameter ImageDataLayer<Ftype, Btype>::MergedTransformParam() const {
  const ImageDataParameter& ip = this->layer_param().image_data_param();
  TransformationParameter tp = this->MergeLegacyTransform(ip, "image_data_param.");
  if (tp.force_color() || tp.force_gray()) {
    this->field_error("transform_param.force_color", "ImageData decodes as image_data_param.is_color says; "
                      "leave transform_param's force_color and force_gray unset");
  }
  if (ip.is_color()) {
    tp.set_force_color(true);
  } else {
    tp.set_force_gray(true);
  }
  return tp;
}

template <typename Ftype, typename Btype>
void ImageDataLayer<Ftype, Btype>::ValidateMore() const {
  const ImageDataParameter& ip = this->layer_param().image_data_param();
  if ((ip.new_height() > 0) != (ip.new_width() > 0)) {
    this->field_error(ip.new_height() > 0 ? "image_data_param.new_width" : "image_data_param.new_height",
                      "new_height and new_width go together (got ", ip.new_height(), " and ", ip.new_width(), ")");
  }
  for (const auto& [name, v] : {std::pair<const char*, uint32_t>{"new_height", ip.new_height()},
                                {"new_width", ip.new_width()}, {"short_side", ip.short_side()}}) {
    if (v > (1u << 16)) this->field_error(std::string("image_data_param.") + name, "is too large: ", v);
  }
}

template <typename Ftype, typename Btype>
std::unique_ptr<RecordSource> ImageDataLayer<Ftype, Btype>::OpenSource(uint64_t seed) {
  const ImageDataParameter& ip = this->layer_param().image_data_param();
  std::vector<ImageListEntry> entries;
  try {
    entries = ReadImageList(ip.source());
  } catch (const Error& e) {
    this->field_error("image_data_param.source", e.what());
  }
  return std::make_unique<ImageListSource>(std::move(entries), ip.source(), ip.root_folder(), ip.shuffle(), seed);
}

template <typename Ftype, typename Btype>
void ImageDataLayer<Ftype, Btype>::ConfigureTransformer(DataTransformer* t) const {
  const ImageDataParameter& ip = this->layer_param().image_data_param();
  t->set_resize(static_cast<int>(ip.new_height()), static_cast<int>(ip.new_width()));
  t->set_short_side(static_cast<int>(ip.short_side()));
}

template <typename Ftype, typename Btype>
std::vector<typename DataLayer<Ftype, Btype>::AcceptedField> ImageDataLayer<Ftype, Btype>::AcceptedFields() const {
  const ImageDataParameter& ip = this->layer_param().image_data_param();
  std::vector<typename DataLayer<Ftype, Btype>::AcceptedField> out;
  if (ip.has_cache() || ip.has_precache()) {
    out.push_back(
        {"image_data_param.cache/precache: no image cache (files are read through the OS page cache)", false});
  }
  if (ip.has_dataset_share_per_node()) {
    // NVCaffe's TRAIN nets read the first 1/share of the list on each node.
    out.push_back({"image_data_param.dataset_share_per_node: the whole list is read (ranks read shards of it)",
                   ip.dataset_share_per_node() > 1.f && this->layer_param().phase() == TRAIN});
  }
  if (ip.short_side() > 0 && ip.new_height() > 0) {
    out.push_back({"image_data_param.new_height/new_width: short_side resizes instead (NVCaffe's rule)", false});
  }
  for (auto& f : this->AcceptedTransformFields()) out.push_back(std::move(f));
  return out;
}

CORTADO_INSTANTIATE_LAYER(ImageDataLayer);

}  // namespace cortado
