#pragma once
// Where a data layer's records come from: a RecordSource hands out one
// serialized Datum per stream index, with a key that names the record in
// errors. Two sources: the records of an LMDB database (Data) and the image
// files of an image list (ImageData). A source serves one reader thread.
// Both read epoch after epoch, in their own order or shuffled by EpochOrder.

#include <cstdint>
#include <string>
#include <vector>

#include "cortado/data/image_list.hpp"
#include "cortado/data/lmdb.hpp"
#include "cortado.pb.h"

namespace cortado {

/// Where a data layer's records come from. Called from one of the layer's
/// reader threads only.
class RecordSource {
 public:
  virtual ~RecordSource() = default;
  virtual int64_t entries() const = 0;
  /// The record at stream index i >= 0 (index i and i + entries() are the
  /// same entry of a later epoch): a key that names it in errors, and a
  /// serialized Datum.
  virtual void Read(int64_t i, std::string* key, std::string* value) = 0;
};

/// Which entry of n a source reads at stream index i >= 0: entry i mod n,
/// or, shuffled, entry order_e[i mod n] where order_e, for the epoch
/// e = i / n, is a permutation of 0 .. n-1 drawn by Fisher-Yates from a
/// 64-bit Mersenne Twister seeded with record_rng_seed(seed, -2 - e). The
/// order is a function of (seed, e) only, so a resumed run and every shard
/// see the order of one uninterrupted reader. Keeps the order of the last
/// epoch asked for (4 bytes an entry): readers go forward.
class EpochOrder {
 public:
  EpochOrder(int64_t n, bool shuffle, uint64_t seed);
  int64_t Entry(int64_t i);
  bool shuffled() const { return shuffle_; }

 private:
  int64_t n_;
  bool shuffle_;
  uint64_t seed_;
  std::vector<uint32_t> order_;
  int64_t epoch_ = -1;
};

/// The records of an LMDB database, in key order or (shuffle) in the order
/// of EpochOrder, reached by key (the keys are read once, at construction).
class LmdbSource : public RecordSource {
 public:
  explicit LmdbSource(const std::string& path, bool shuffle = false, uint64_t seed = 0);
  int64_t entries() const override { return cursor_.entries(); }
  void Read(int64_t i, std::string* key, std::string* value) override;

 private:
  LmdbCursor cursor_;
  int64_t at_ = 0;  // the cursor's entry (in key order)
  EpochOrder order_;
  std::string keys_;               // shuffled: every key, one after the other
  std::vector<uint64_t> key_end_;  // key k ends at key_end_[k]
};

/// The images of a list (data/image_list.hpp), in the list's order or
/// shuffled (EpochOrder). A record is the file's bytes as an encoded Datum
/// with the entry's label; its key is "<list>:<line>: image '<root><path>'".
/// A file that is missing, unreadable or a directory is an Error naming the key.
class ImageListSource : public RecordSource {
 public:
  ImageListSource(std::vector<ImageListEntry> entries, std::string list, std::string root, bool shuffle,
                  uint64_t seed);
  int64_t entries() const override { return static_cast<int64_t>(entries_.size()); }
  void Read(int64_t i, std::string* key, std::string* value) override;

 private:
  std::vector<ImageListEntry> entries_;
  std::string list_, root_;
  EpochOrder order_;
  Datum datum_;
};

}  // namespace cortado
