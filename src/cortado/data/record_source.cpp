#include "cortado/data/record_source.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <string_view>
#include <utility>

#include "cortado/data/data_transformer.hpp"

namespace cortado {

EpochOrder::EpochOrder(int64_t n, bool shuffle, uint64_t seed) : n_(n), shuffle_(shuffle), seed_(seed) {
  if (shuffle_ && n_ > int64_t{UINT32_MAX}) fail("cannot shuffle ", n_, " records (at most 2^32 - 1)");
}

int64_t EpochOrder::Entry(int64_t i) {
  const int64_t epoch = i / n_, k = i % n_;
  if (!shuffle_) return k;
  if (epoch != epoch_) {
    order_.resize(static_cast<size_t>(n_));
    std::iota(order_.begin(), order_.end(), 0u);
    // The same order on every platform and every shard: raw draws, no
    // std::*_distribution.
    std::mt19937_64 gen(record_rng_seed(seed_, -2 - epoch));
    for (size_t j = order_.size(); j > 1; --j) std::swap(order_[j - 1], order_[gen() % j]);
    epoch_ = epoch;
  }
  return order_[static_cast<size_t>(k)];
}

LmdbSource::LmdbSource(const std::string& path, bool shuffle, uint64_t seed)
    : cursor_(path, /*wrap_around=*/false), order_(cursor_.entries(), shuffle, seed) {
  if (!shuffle) return;
  key_end_.reserve(static_cast<size_t>(cursor_.entries()));
  for (cursor_.SeekToFirst(); cursor_.Valid(); cursor_.Next()) {
    keys_.append(cursor_.key());
    key_end_.push_back(keys_.size());
  }
  keys_.shrink_to_fit();
  cursor_.SeekToFirst();
}

void LmdbSource::Read(int64_t i, std::string* key, std::string* value) {
  if (order_.shuffled()) {
    const size_t k = static_cast<size_t>(order_.Entry(i));
    const size_t begin = k == 0 ? 0 : key_end_[k - 1];
    const std::string_view want(keys_.data() + begin, key_end_[k] - begin);
    // The cursor's read transaction is a snapshot: its keys stay.
    if (!cursor_.Seek(want)) fail("LMDB '", cursor_.path(), "': key '", want, "' is gone");
    key->assign(cursor_.key());
    value->assign(cursor_.value());
    return;
  }
  const int64_t target = i % entries();
  if (target < at_) {  // the next epoch: from the first record again
    cursor_.SeekToFirst();
    at_ = 0;
  }
  for (; at_ < target; ++at_) cursor_.Next();
  key->assign(cursor_.key());
  value->assign(cursor_.value());
}


namespace {

void read_file(const std::string& file, const std::string& where, std::string* out) {
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

}  // namespace

ImageListSource::ImageListSource(std::vector<ImageListEntry> entries, std::string list, std::string root,
                                 bool shuffle, uint64_t seed)
    : entries_(std::move(entries)), list_(std::move(list)), root_(std::move(root)),
      order_(static_cast<int64_t>(entries_.size()), shuffle, seed) {}

void ImageListSource::Read(int64_t i, std::string* key, std::string* value) {
  const ImageListEntry& e = entries_[static_cast<size_t>(order_.Entry(i))];
  const std::string file = root_ + e.path;
  *key = str_cat(list_, ":", e.line, ": image '", file, "'");
  datum_.Clear();
  datum_.set_encoded(true);
  datum_.set_label(e.label);
  read_file(file, *key, datum_.mutable_data());
  datum_.SerializeToString(value);
}

}  // namespace cortado
