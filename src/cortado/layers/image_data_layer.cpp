#include "cortado/layers/image_data_layer.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "cortado/util/image_list.hpp"

namespace cortado {

namespace {

// The images of a list: entry i of epoch e is the list's entry order_e[i],
// where order_e is the list's order or, shuffled, a permutation drawn from
// (seed, e). The record is the file's bytes as an encoded Datum.
class ImageListSource : public RecordSource {
 public:
  ImageListSource(std::vector<ImageListEntry> entries, std::string list, std::string root, bool shuffle,
                  uint64_t seed)
      : entries_(std::move(entries)), list_(std::move(list)), root_(std::move(root)), shuffle_(shuffle),
        seed_(seed) {}
  int64_t entries() const override { return static_cast<int64_t>(entries_.size()); }

  void Read(int64_t i, std::string* key, std::string* value) override {
    const int64_t n = entries();
    const ImageListEntry& e = entries_[static_cast<size_t>(Order(i / n)[static_cast<size_t>(i % n)])];
    const std::string file = root_ + e.path;
    *key = str_cat(list_, ":", e.line, ": image '", file, "'");
    datum_.Clear();
    datum_.set_encoded(true);
    datum_.set_label(e.label);
    ReadFile(file, *key, datum_.mutable_data());
    datum_.SerializeToString(value);
  }

 private:
  // The order of epoch e (the last one computed is kept: readers go forward).
  const std::vector<int64_t>& Order(int64_t epoch) {
    if (order_epoch_ == epoch && !order_.empty()) return order_;
    order_.resize(entries_.size());
    for (size_t k = 0; k < order_.size(); ++k) order_[k] = static_cast<int64_t>(k);
    if (shuffle_) {
      // Fisher-Yates from a generator of (seed, epoch): the same order on
      // every platform and every shard.
      std::mt19937_64 gen(record_rng_seed(seed_, -2 - epoch));
      for (size_t k = order_.size(); k > 1; --k) std::swap(order_[k - 1], order_[gen() % k]);
    }
    order_epoch_ = epoch;
    return order_;
  }

  static void ReadFile(const std::string& file, const std::string& where, std::string* out) {
    std::error_code ec;
    if (std::filesystem::is_directory(file, ec)) fail(where, ": is a directory");
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(file.c_str(), "rb"), &std::fclose);
    if (!f) fail(where, ": cannot open: ", std::strerror(errno));
    out->clear();
    char buf[1 << 16];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof(buf), f.get())) > 0) out->append(buf, got);
    if (std::ferror(f.get())) fail(where, ": read error: ", std::strerror(errno));
  }

  std::vector<ImageListEntry> entries_;
  std::string list_, root_;
  bool shuffle_;
  uint64_t seed_;
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
  Datum datum_;
};

}  // namespace

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
                                {"new_width", ip.new_width()}}) {
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
}

CORTADO_INSTANTIATE_LAYER(ImageDataLayer);

}  // namespace cortado
