#pragma once
// Reads Caffe Datum records from an LMDB database, as Caffe's DataLayer.
// (ImageData, image_data_layer.hpp, is this layer reading an image list.)
//
// Tops:
//   top[0] data  (N, C, H', W') in Ftype: each record through the
//                DataTransformer (data/data_transformer.hpp: decode, crop,
//                mirror, subtract the mean, scale), written in Ftype.
//   top[1] label (N), optional, written as float whatever Ftype is (labels
//                stay exact): the record's integer label.
// N = batch_size; (C, H', W') comes from the first record (after crop_size).
// Every later record must give the same shape; one that does not, or that is
// corrupt (wrong payload size, undecodable image), is an Error naming the
// source and the record's key, raised by the Forward that would use it.
//
// data_param fields:
//   source (required): an LMDB directory (data.mdb, lock.mdb)
//   batch_size (required, > 0)
//   backend (default LMDB): LEVELDB is rejected
//   rand_skip (default 0): skip a number of records in [0, rand_skip) at the
//     start, chosen from the layer's seed
//   shuffle (default false): at TRAIN, every epoch reads the records in a new
//     order (EpochOrder, data/record_source.hpp: a permutation drawn from the
//     layer's seed and the epoch's number), so a resumed run, a Seek and the
//     shards see the order one uninterrupted reader sees. The reader keeps
//     the database's keys in memory (packed: their bytes plus 8 bytes a
//     record, and 4 bytes a record for the order) and reaches each record by
//     key. A TEST net reads in key order (NVCaffe shuffles at TRAIN only; it
//     also shuffles only with cache: true, Cortado whenever shuffle is set)
//   prefetch (default 4, > 0): how many whole batches the reader keeps ready
//   shard_id, num_shards (default 0 of 1): read one shard of the records
//     (below); the solver sets them on each rank's train net in a
//     multi-rank run
//   threads (default 0: this rank's share of the machine's cores, at most
//     8, comm/machine_ranks.hpp: all of them for one rank, 2 each for 8 GPUs
//     of one process on 16 cores; at most 256): how
//     many workers read and transform batches (below). JPEG decoding is what
//     bounds ImageNet training on a fast GPU; scripts/bench/imagenet_data.sh
//     measures the rate per thread.
//   scale, mean_file, crop_size, mirror, force_encoded_color: Caffe's legacy
//     copies of transform_param fields; used where transform_param leaves the
//     field unset (force_encoded_color means force_color). Setting a field in
//     both places is an error.
// transform_param: see DataTransformer. transform_param.random_seed >= 0
//   seeds the records' generators (record_rng_seed(random_seed, p) below)
//   instead of the layer's seed: the crops, flips, resizes and distortions
//   are then the same whatever the solver's seed.
// Accepted without effect, with one line in the log per layer saying so:
//   data_param.cache, precache (Cortado keeps no record cache),
//   parser_threads (every worker reads its own records: threads sets them),
//   shuffle at TEST; transform_param.use_gpu_transform where it cannot
//   apply (below: the line says why), display, num_labels, and the
//   augmentations Cortado does not apply: resize_param, noise_param,
//   expand_param, emit_constraint (SSD's, for AnnotatedData).
//
// Reading: W workers (threads) each own a source of their own
// (data/record_source.hpp: an LMDB cursor in its own read transaction, or
// the image list) and fill whole batches: worker w reads and transforms
// batches w, w + W, w + 2W, ... of the layer's stream, one record after the
// other, so reading and decoding run on every worker at once and no batch
// waits for a thread to start.
// Forward takes the batches in stream order; the workers stay at most
// max(prefetch, W) batches ahead of it. Records are read in key order (or
// shuffled) and wrap around at the end of the database, epoch after epoch.
// The destructor stops and joins the workers. By default a batch of fewer
// than 16 records per worker gets fewer workers (data_param.threads is
// taken as given).
//
// Determinism: the layer draws a 64-bit seed from the process RNG (cortado::
// rng()) at LayerSetUp, so it follows the solver's random_seed. The record at
// stream position p (p = 0 is the first record of the first batch) is the
// database entry (skip + p) mod entries, and its crop offsets and mirror flip
// come from a generator seeded with record_rng_seed(seed, p) (with shuffle,
// the entry is the shuffled one: EpochOrder). The batches are therefore a
// function of (seed, p) only: Seek(b) restarts reading so that the next
// batch is batch b (counting from 0), exactly as an uninterrupted run would
// have read it.
//
// Shards: shard s of S reads the records at stream positions s, s + S,
// s + 2S, ... of the unsharded stream, with the crops and flips those
// positions have there; its own position p is unsharded position p * S + s.
// With the same seed, batch b of the S shards together is batch b of one
// unsharded reader whose batch is S times larger, record for record (the
// layer's seed follows the solver's random_seed, which the ranks share).
//
// Backward: none (no bottoms; AllowForceBackward is false).
//
// Layout: where the Net's layout plan (net_layout.hpp) makes top[0] channels
// last, the workers write each record (H', W', C) (the same values, moved),
// so that no conversion follows the layer; the labels are unchanged.
//
// GPU (a net on a CUDA device): every worker owns a non-blocking stream of
// the device. A worker transforms its batch into pinned host memory
// (SyncedMemory with pinned_host), copies it on its stream into the batch's
// device buffer and records an event (`filled`) after the copy; Forward_gpu
// makes the context's stream wait for that event (cudaStreamWaitEvent, no
// host wait), copies the device buffer into top[0] (device to device) and
// the labels from pinned memory, and records a second event (`copied`). The
// batch then goes back to the workers, which wait for `copied` (and
// `filled`) before refilling it: the host-to-device copy of a batch runs
// beside the net's work, and nothing synchronizes the context's stream.
//
// transform_param.use_gpu_transform (NVCaffe's; Data only): the workers read
// the records but do not decode them; each has an NvjpegBatchDecoder
// (data/nvjpeg_batch.hpp) that decodes the batch's JPEG records with nvJPEG
// and crops, resizes, mirrors and normalizes them on its stream straight into
// the batch's device buffer, then records `filled`; Forward_gpu is the same.
// Every record's generator is seeded as on the CPU path
// (record_rng_seed(seed, p)), so the same records come in the same order
// with the same crops and flips, Seek and shards included; the values differ
// from the CPU transform's by the decoders' difference (nvjpeg_batch.hpp
// states it: a few levels of 255). A record that is not encoded (raw or float
// pixels) is transformed on the worker's CPU and copied into its place; one
// that nvJPEG would not decode as the CPU does is transformed on the CPU by
// the decoder. The fields the GPU transform lacks (mean_file, distort_param,
// NVCaffe's random resize) are a FieldError at SetUp; its errors on a record
// are the layer's errors (naming the source and the batch's keys). It applies
// where the net runs on a CUDA device, nvJPEG loads
// (NvjpegBatchDecoder::Available), Ftype is float, float16 or bfloat16, and
// the first record is an encoded image of 3 channels (1 with force_gray);
// elsewhere the layer transforms on the CPU threads as without it and says
// why on its accepted-fields line (so a prototxt written for a GPU trains on
// a CPU). Device memory: a batch buffer per prefetched batch, and each
// decoder's buffer of one batch's decoded images at full size.

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cortado/config.hpp"
#include "cortado/data/data_transformer.hpp"
#include "cortado/data/record_source.hpp"
#include "cortado/layer.hpp"
#include "cortado/synced_memory.hpp"

struct CUevent_st;

namespace cortado {

/// A Data layer's device resources (data_layer.cpp); deleted there (the
/// layer's inline constructor must not need the type).
class Net;
/// The records an epoch of `net` reads: its first Data or ImageData layer's
/// (0: none, a DummyData or Input net). The Solver's display counts epochs
/// with it.
int64_t EpochRecords(const Net& net);

struct DataLayerDevice;
struct DataLayerDeviceDelete {
  void operator()(DataLayerDevice* d) const;
};

/// The fields a data layer reads, whichever message holds them.
struct DataSourceParams {
  std::string prefix;  // "data_param." or "image_data_param.", for messages
  std::string source;
  uint32_t batch_size = 0, rand_skip = 0, prefetch = 4, threads = 0, shard_id = 0, num_shards = 1;
};

template <typename Ftype, typename Btype>
class DataLayer : public Layer<Ftype, Btype> {
 public:
  CORTADO_LAYER_HEAD(Layer, "Data", BlobRules().Bottoms(0).Tops(1, 2).NoForcedBackward())
  ~DataLayer() override;

  CORTADO_LAYER_SETUP
  void Seek(int64_t batches) override;

  /// The (C, H', W') of one transformed record.
  const std::vector<int>& datum_shape() const { return datum_shape_; }
  /// The workers reading and transforming batches (threads, fewer for small
  /// batches unless threads was given).
  int workers() const { return workers_; }
  /// The records of its source, all shards' (an epoch); 0 before set-up.
  int64_t records() const;

 protected:
  CORTADO_LAYER_FORWARD_PASSES

  /// The fields of data_param (ImageData: of image_data_param).
  virtual DataSourceParams SourceParams() const;
  /// transform_param with the legacy copies of its fields merged in.
  virtual TransformationParameter MergedTransformParam() const;
  /// Checks the fields beyond DataSourceParams' (FieldError).
  virtual void ValidateMore() const;
  /// Opens the records; `seed` is the layer's (for a shuffled order).
  virtual std::unique_ptr<RecordSource> OpenSource(uint64_t seed);
  /// Called on the new transformer at LayerSetUp.
  virtual void ConfigureTransformer(DataTransformer* t) const {}
  /// A field that is set and that Cortado accepts without applying it.
  struct AcceptedField {
    std::string note;  // the field and what Cortado does instead: "data_param.cache: ..."
    bool changes_data;  // NVCaffe would have changed the images (an augmentation not applied)
  };
  /// The accepted fields of this layer's parameters; LayerSetUp logs them on
  /// one line (a WARNING when one changes_data, else INFO).
  virtual std::vector<AcceptedField> AcceptedFields() const;
  /// Those of transform_param (both layers).
  std::vector<AcceptedField> AcceptedTransformFields() const;

  /// The DataSourceParams of a message with data_param's field names
  /// (`prefix` names it in messages).
  template <typename P>
  static DataSourceParams SourceParamsOf(const P& p, const std::string& prefix) {
    DataSourceParams s;
    s.prefix = prefix;
    s.source = p.source();
    s.batch_size = p.batch_size();
    s.rand_skip = p.rand_skip();
    s.prefetch = p.prefetch();
    s.threads = p.threads();
    s.shard_id = p.shard_id();
    s.num_shards = p.num_shards();
    return s;
  }
  /// transform_param with the legacy copies of its fields in `p` (scale,
  /// mean_file, crop_size, mirror) merged in; one set in both is an error.
  template <typename P>
  TransformationParameter MergeLegacyTransform(const P& p, const std::string& prefix) const {
    TransformationParameter tp = this->layer_param().transform_param();
    auto conflict = [&](bool in_p, bool in_transform, const char* name) {
      if (in_p && in_transform) this->field_error(prefix + name, "is also set in transform_param; set it in one place");
      return in_p;
    };
    if (conflict(p.has_scale(), tp.has_scale(), "scale")) tp.set_scale(p.scale());
    if (conflict(p.has_mean_file(), tp.has_mean_file(), "mean_file")) tp.set_mean_file(p.mean_file());
    if (conflict(p.has_crop_size(), tp.has_crop_size(), "crop_size")) tp.set_crop_size(p.crop_size());
    if (conflict(p.has_mirror(), tp.has_mirror(), "mirror")) tp.set_mirror(p.mirror());
    return tp;
  }

 private:
  struct Batch {
    std::unique_ptr<SyncedMemory> data;   // (N, C, H', W') Ftype, host side only (pinned with a device)
    std::unique_ptr<SyncedMemory> label;  // (N) float, likewise
    // GPU: the batch's data on the device, (N, C, H', W') Ftype, and the
    // device it is on.
    void* device_data = nullptr;
    size_t device_bytes = 0;
    int device = -1;
    CUevent_st* filled = nullptr;  // GPU: recorded on the worker's stream after device_data is written
    CUevent_st* copied = nullptr;  // GPU: recorded on the context's stream after the copy to the tops
    ~Batch();
    /// Waits until the device work recorded in `copied` and `filled` (if
    /// any) has finished: the batch's memory may then be written again.
    void WaitIdle();
  };
  /// The next batch in stream order (waits for its worker; rethrows the
  /// error of the worker that failed to fill it).
  std::unique_ptr<Batch> TakeBatch();
  /// Hands a used batch back to the workers.
  void ReturnBatch(std::unique_ptr<Batch> batch);

  void ValidateParams(const DataSourceParams& p) const;
  /// Starts the workers at stream position next_position_ (a batch boundary).
  void StartReader();
  void StopReader();
  void WorkerLoop(int w);
  /// Worker w's batch `seq` (counted from the start position); throws on a bad record.
  void FillBatch(int w, int64_t seq, Batch* batch);
  /// Reads the record at (unsharded) stream position `position` from a
  /// worker's source and parses it (FieldError naming the source and key).
  void ReadDatum(RecordSource* source, int64_t position, std::string* key, std::string* value, Datum* datum);
  /// FillBatch with the GPU transform: reads the records, decodes them on
  /// worker w's stream into batch->device_data.
  void FillBatchOnGpu(int w, int64_t first, Batch* batch);
  /// Decides whether use_gpu_transform applies (gpu_transform_off_ says why
  /// not) and creates the workers' streams and decoders.
  void SetUpDevice(const Datum& first);
  /// batch->device_data of the right size, and its events (worker thread).
  void PrepareDeviceBatch(Batch* batch);
  bool Stopping();

  std::string source_;
  std::string source_field_;  // "data_param.source" or "image_data_param.source", for errors
  bool threads_given_ = false;  // the param set threads (taken as given)
  int batch_size_ = 0;
  int prefetch_ = 4;
  uint64_t seed_ = 0;
  uint64_t transform_seed_ = 0;  // transform_param.random_seed, or seed_
  int64_t skip_ = 0;
  std::vector<int> datum_shape_;
  std::unique_ptr<DataTransformer> transformer_;
  std::vector<std::unique_ptr<RecordSource>> sources_;  // one per worker
  // GPU: the workers' streams and, with the GPU transform, decoders (one
  // each); null on the CPU.
  std::unique_ptr<DataLayerDevice, DataLayerDeviceDelete> device_;
  bool gpu_transform_ = false;     // use_gpu_transform applies
  // top[0] is channels last (the Net's layout plan, net_layout.hpp): every
  // record is written (H', W', C), by the CPU transform
  // (DataTransformer::Transform, channels_last) or the GPU's.
  bool channels_last_ = false;
  std::string gpu_transform_off_;  // use_gpu_transform is set but does not apply: why
  int64_t next_position_ = 0;  // this shard's stream position where the workers start
  int64_t shard_ = 0, shards_ = 1;
  /// The unsharded stream position of this shard's position p.
  int64_t global_position(int64_t p) const { return p * shards_ + shard_; }
  // data_param.threads, or this rank's share of the machine's cores, at most 8 (set at LayerSetUp).
  int threads_ = 1;
  int workers_ = 1;  // threads_, fewer for small batches unless threads was given

  std::vector<std::thread> threads_running_;
  std::mutex mutex_;
  std::condition_variable not_full_, not_empty_;
  std::map<int64_t, std::unique_ptr<Batch>> ready_;  // filled batches by sequence number
  std::vector<std::unique_ptr<Batch>> free_;
  int64_t next_take_ = 0;  // the sequence number Forward takes next
  std::map<int64_t, std::exception_ptr> errors_;  // a worker stops at the batch it failed to fill
  bool stop_ = false;
};

}  // namespace cortado
