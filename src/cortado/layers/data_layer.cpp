#include "cortado/layers/data_layer.hpp"

#include "cortado/net/net.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <random>
#include <string_view>
#include <thread>
#include <type_traits>

#include "cortado/util/logging.hpp"
#include "cortado/comm/machine_ranks.hpp"
#include "cortado/util/rng.hpp"
#include "cortado/util/cuda.hpp"
#ifdef CORTADO_USE_CUDA
#include "cortado/data/nvjpeg_batch.hpp"
#endif

namespace cortado {

#ifdef CORTADO_USE_CUDA
namespace {

// Makes `device` current for a scope (the destructors may run on any thread).
struct DeviceScope {
  int previous = -1;
  explicit DeviceScope(int device) {
    if (device >= 0 && cudaGetDevice(&previous) == cudaSuccess && previous != device) {
      cudaSetDevice(device);
    } else {
      previous = -1;
    }
  }
  ~DeviceScope() {
    if (previous >= 0) cudaSetDevice(previous);
  }
};

}  // namespace

// One non-blocking stream per worker and, with the GPU transform, one
// decoder per worker (a decoder serves one thread). The decoders go first:
// each waits for its own last work through its event, never through a
// stream; the streams' remaining work (the batches' copies) is waited for
// through the batches' events, which the layer's destructor has done by now.
struct DataLayerDevice {
  int device = -1;
  std::vector<cudaStream_t> streams;
  std::vector<std::unique_ptr<NvjpegBatchDecoder>> decoders;  // empty without the GPU transform
  ~DataLayerDevice() {
    DeviceScope scope(device);
    decoders.clear();
    for (cudaStream_t s : streams) cudaStreamDestroy(s);
  }
};
#else
struct DataLayerDevice {};
#endif

void DataLayerDeviceDelete::operator()(DataLayerDevice* d) const { delete d; }

template <typename Ftype, typename Btype>
DataLayer<Ftype, Btype>::~DataLayer() {
  StopReader();
  // The batches (which wait for their device work) before the streams and
  // decoders that did it.
  ready_.clear();
  free_.clear();
  device_.reset();
}

template <typename Ftype, typename Btype>
DataLayer<Ftype, Btype>::Batch::~Batch() {
#ifdef CORTADO_USE_CUDA
  if (!copied && !filled && !device_data) return;
  DeviceScope scope(device);
  for (CUevent_st* e : {copied, filled}) {
    if (e) {
      cudaEventSynchronize(e);  // the memory must outlive the copies into and out of it
      cudaEventDestroy(e);
    }
  }
  if (device_data) cudaFree(device_data);
  cudaGetLastError();
#endif
}

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::Batch::WaitIdle() {
#ifdef CORTADO_USE_CUDA
  if (copied) CORTADO_CUDA_CHECK(cudaEventSynchronize(copied));
  if (filled) CORTADO_CUDA_CHECK(cudaEventSynchronize(filled));
#endif
}

template <typename Ftype, typename Btype>
DataSourceParams DataLayer<Ftype, Btype>::SourceParams() const {
  return SourceParamsOf(this->layer_param().data_param(), "data_param.");
}

template <typename Ftype, typename Btype>
TransformationParameter DataLayer<Ftype, Btype>::MergedTransformParam() const {
  const DataParameter& dp = this->layer_param().data_param();
  TransformationParameter tp = MergeLegacyTransform(dp, "data_param.");
  if (dp.force_encoded_color()) tp.set_force_color(true);
  return tp;
}

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::ValidateMore() const {
  const DataParameter& dp = this->layer_param().data_param();
  if (dp.backend() == DataParameter::LEVELDB) {
    this->field_error("data_param.backend", "LEVELDB is not supported, use LMDB");
  }
}

template <typename Ftype, typename Btype>
std::vector<typename DataLayer<Ftype, Btype>::AcceptedField> DataLayer<Ftype, Btype>::AcceptedFields() const {
  const DataParameter& dp = this->layer_param().data_param();
  std::vector<AcceptedField> out;
  if (dp.has_cache() || dp.has_precache()) {
    out.push_back({"data_param.cache/precache: no record cache (the LMDB is read through the OS page cache)", false});
  }
  if (dp.has_parser_threads()) {
    out.push_back({"data_param.parser_threads: every worker reads its own records (data_param.threads sets them)", false});
  }
  if (dp.shuffle() && this->layer_param().phase() != TRAIN) {
    out.push_back({"data_param.shuffle: key order (records are shuffled at TRAIN only)", false});
  }
  for (AcceptedField& f : AcceptedTransformFields()) out.push_back(std::move(f));
  return out;
}

template <typename Ftype, typename Btype>
std::vector<typename DataLayer<Ftype, Btype>::AcceptedField> DataLayer<Ftype, Btype>::AcceptedTransformFields()
    const {
  const TransformationParameter& tp = this->layer_param().transform_param();
  std::vector<AcceptedField> out;
  if (tp.has_use_gpu_transform() && !gpu_transform_) {
    out.push_back({str_cat("transform_param.use_gpu_transform: transforms run on the CPU threads",
                           gpu_transform_off_.empty() ? std::string() : " (" + gpu_transform_off_ + ")"),
                   false});
  }
  if (tp.has_display()) out.push_back({"transform_param.display: no display", false});
  if (tp.has_num_labels()) out.push_back({"transform_param.num_labels: one label a record, from the record", false});
  if (tp.has_emit_constraint()) out.push_back({"transform_param.emit_constraint: no boxes to constrain", false});
  if (tp.has_resize_param()) {
    out.push_back({"transform_param.resize_param: SSD's resize is NOT applied (img_rand_resize_* and "
                   "ImageData's new_height/new_width/short_side are)", true});
  }
  if (tp.has_noise_param()) out.push_back({"transform_param.noise_param: the noise is NOT applied", true});
  if (tp.has_expand_param()) out.push_back({"transform_param.expand_param: the expansion is NOT applied", true});
  return out;
}

template <typename Ftype, typename Btype>
std::unique_ptr<RecordSource> DataLayer<Ftype, Btype>::OpenSource(uint64_t seed) {
  const bool shuffle = this->layer_param().data_param().shuffle() && this->layer_param().phase() == TRAIN;
  std::unique_ptr<RecordSource> s;
  try {
    s = std::make_unique<LmdbSource>(source_, shuffle, seed);
  } catch (const Error& e) {
    this->field_error("data_param.source", "cannot open '", source_, "': ", e.what());
  }
  if (s->entries() == 0) this->field_error("data_param.source", "'", source_, "' holds no records");
  return s;
}

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::ValidateParams(const DataSourceParams& p) const {
  ValidateMore();
  const std::string& f = p.prefix;
  if (p.source.empty()) this->field_error(f + "source", "is required");
  if (p.batch_size == 0) this->field_error(f + "batch_size", "must be positive, got 0");
  if (p.batch_size > (1u << 24)) this->field_error(f + "batch_size", "is too large: ", p.batch_size);
  if (p.prefetch == 0) this->field_error(f + "prefetch", "must be positive, got 0");
  if (p.prefetch > 1024) this->field_error(f + "prefetch", "is too large: ", p.prefetch);
  if (p.threads > 256) this->field_error(f + "threads", "is too large: ", p.threads, " (at most 256)");
  if (p.num_shards == 0) this->field_error(f + "num_shards", "must be positive, got 0");
  if (p.shard_id >= p.num_shards) {
    this->field_error(f + "shard_id", "= ", p.shard_id, " must be less than num_shards = ", p.num_shards);
  }
}

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  StopReader();
  const DataSourceParams p = SourceParams();
  ValidateParams(p);
  source_ = p.source;
  source_field_ = p.prefix + "source";
  threads_given_ = p.threads > 0;
  batch_size_ = static_cast<int>(p.batch_size);
  prefetch_ = static_cast<int>(p.prefetch);
  // data_param.threads, or this rank's share of the machine's cores
  // (comm/machine_ranks.hpp), at most 8.
  threads_ = p.threads > 0 ? static_cast<int>(p.threads) : std::clamp(CoresPerRank(), 1, 8);
  // By default at least 16 records a worker (small batches are not worth
  // the threads); data_param.threads is taken as given.
  workers_ = threads_given_ ? threads_ : std::max(1, std::min(threads_, batch_size_ / 16));
  shard_ = p.shard_id;
  shards_ = p.num_shards;
  transformer_ = std::make_unique<DataTransformer>(MergedTransformParam(), this->layer_param().phase(),
                                                   this->name(), this->type());
  ConfigureTransformer(transformer_.get());

  // The seed ties every random choice of this layer to the solver's seed.
  std::mt19937& gen = rng();
  const uint64_t hi = gen();
  seed_ = (hi << 32) | gen();
  const TransformationParameter& tp = this->layer_param().transform_param();
  transform_seed_ = tp.random_seed() >= 0 ? static_cast<uint64_t>(tp.random_seed()) : seed_;
  skip_ = p.rand_skip > 0 ? static_cast<int64_t>(record_rng_seed(seed_, -1) % p.rand_skip) : 0;
  sources_.clear();
  for (int w = 0; w < workers_; ++w) sources_.push_back(OpenSource(seed_));
  RecordSource* input = sources_[0].get();
  next_position_ = 0;

  // The first record this shard reads gives the shape.
  Datum first;
  std::string key, value;
  try {
    input->Read(skip_ + global_position(0), &key, &value);
  } catch (const FieldError&) {
    throw;
  } catch (const Error& e) {
    this->field_error(source_field_, "'", source_, "': ", e.what());
  }
  if (!first.ParseFromString(value)) {
    this->field_error(source_field_, "'", source_, "': record '", key, "' is not a Datum");
  }
  try {
    datum_shape_ = transformer_->InferShape(first);
  } catch (const FieldError&) {
    throw;
  } catch (const Error& e) {
    this->field_error(source_field_, "'", source_, "': record '", key, "': ", e.what());
  }
  channels_last_ = top[0]->layout() == Layout::NHWC && datum_shape_[0] > 1 && datum_shape_[1] * datum_shape_[2] > 1;
  SetUpDevice(first);
  INFO_LOG << this->type() << " layer '" << this->name() << "': " << source_ << ", " << input->entries()
           << " records, output (" << batch_size_ << ", " << datum_shape_[0] << ", " << datum_shape_[1]
           << ", " << datum_shape_[2] << ")"
           << (shards_ > 1 ? str_cat(", shard ", shard_, " of ", shards_) : std::string()) << ", " << workers_
           << (workers_ == 1 ? " worker" : " workers") << (gpu_transform_ ? ", transformed on the GPU" : "")
           << (channels_last_ ? ", written NHWC" : "");
  const std::vector<AcceptedField> accepted = AcceptedFields();
  if (!accepted.empty()) {
    bool warn = false;
    std::string notes;
    for (const AcceptedField& f : accepted) {
      notes += (notes.empty() ? "" : "; ") + f.note;
      warn = warn || f.changes_data;
    }
    const std::string line =
        str_cat(this->type(), " layer '", this->name(), "': fields accepted but not applied: ", notes);
    if (warn) {
      LOG_IF(WARNING, thread_logs_info()) << line;
    } else {
      INFO_LOG << line;
    }
  }
  StartReader();
}

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  top[0]->Reshape({batch_size_, datum_shape_[0], datum_shape_[1], datum_shape_[2]});
  if (top.size() > 1) top[1]->Reshape({batch_size_});
}

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::StartReader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = false;
    next_take_ = 0;
  }
  for (int w = 0; w < workers_; ++w) threads_running_.emplace_back([this, w] { WorkerLoop(w); });
}

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::StopReader() {
  if (threads_running_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  not_full_.notify_all();
  for (std::thread& t : threads_running_) t.join();
  threads_running_.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [seq, batch] : ready_) free_.push_back(std::move(batch));
  ready_.clear();
  errors_.clear();
}

template <typename Ftype, typename Btype>
bool DataLayer<Ftype, Btype>::Stopping() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stop_;
}

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::WorkerLoop(int w) {
#ifdef CORTADO_USE_CUDA
  // Pinned batch memory and event waits then belong to the net's device.
  if (this->on_gpu()) cudaSetDevice(this->context().device());
#endif
  // At most `ahead` batches past the one Forward takes next are filled or
  // being filled: every worker has one to fill, and prefetch are kept.
  const int64_t ahead = std::max(prefetch_, workers_);
  for (int64_t seq = w;; seq += workers_) {
    std::unique_ptr<Batch> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      not_full_.wait(lock, [&] { return stop_ || seq < next_take_ + ahead; });
      if (stop_) return;
      if (!free_.empty()) {
        batch = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (!batch) batch = std::make_unique<Batch>();
    try {
      batch->WaitIdle();
      FillBatch(w, seq, batch.get());
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!stop_) errors_.emplace(seq, std::current_exception());
      not_empty_.notify_all();
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) return;  // a partial batch (stopped mid-way) is dropped
    ready_.emplace(seq, std::move(batch));
    not_empty_.notify_all();
  }
}

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::FillBatch(int w, int64_t seq, Batch* batch) {
  const size_t label_bytes = static_cast<size_t>(batch_size_) * sizeof(float);
  if (!batch->label || batch->label->size() != label_bytes) {
    batch->label = std::make_unique<SyncedMemory>(label_bytes, /*pinned_host=*/true);
  }
  // Each record's crop and mirror come from (seed, stream position) alone,
  // so the batch is the same whichever worker fills it.
  const int64_t first = next_position_ + seq * batch_size_;
  if (gpu_transform_) {
    FillBatchOnGpu(w, first, batch);
    return;
  }
  const size_t image = static_cast<size_t>(datum_shape_[0]) * datum_shape_[1] * datum_shape_[2];
  const size_t data_bytes = image * batch_size_ * sizeof(Ftype);
  if (!batch->data || batch->data->size() != data_bytes)
    batch->data = std::make_unique<SyncedMemory>(data_bytes, /*pinned_host=*/true);
  Ftype* data = static_cast<Ftype*>(batch->data->mutable_cpu_data());
  float* label = static_cast<float*>(batch->label->mutable_cpu_data());
  RecordSource* source = sources_[static_cast<size_t>(w)].get();
  std::string key, value;
  Datum datum;
  std::mt19937 gen;
  for (int i = 0; i < batch_size_; ++i) {
    if ((i & 15) == 0 && Stopping()) return;
    const int64_t position = global_position(first + i);
    ReadDatum(source, position, &key, &value, &datum);
    try {
      gen.seed(static_cast<std::mt19937::result_type>(record_rng_seed(transform_seed_, position)));
      transformer_->Transform(datum, data + i * image, &gen, datum_shape_, channels_last_);
    } catch (const FieldError& e) {
      throw FieldError(this->name(), this->type(), e.field(),
                       str_cat(e.message(), " (source '", source_, "', record '", key, "')"));
    } catch (const Error& e) {
      this->field_error(source_field_, "'", source_, "': record '", key, "': ", e.what());
    }
    label[i] = static_cast<float>(datum.label());
  }
#ifdef CORTADO_USE_CUDA
  if (device_) {  // the copy to the device runs on the worker's stream, beside the net's work
    PrepareDeviceBatch(batch);
    cudaStream_t stream = device_->streams[static_cast<size_t>(w)];
    CORTADO_CUDA_CHECK(cudaMemcpyAsync(batch->device_data, data, data_bytes, cudaMemcpyHostToDevice, stream));
    CORTADO_CUDA_CHECK(cudaEventRecord(batch->filled, stream));
  }
#endif
}

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::ReadDatum(RecordSource* source, int64_t position, std::string* key, std::string* value,
                                        Datum* datum) {
  try {
    source->Read(skip_ + position, key, value);
  } catch (const FieldError&) {
    throw;
  } catch (const Error& e) {
    this->field_error(source_field_, "'", source_, "': ", e.what());
  }
  if (!datum->ParseFromString(*value)) {
    this->field_error(source_field_, "'", source_, "': record '", *key, "': not a Datum");
  }
}

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::SetUpDevice(const Datum& first) {
  device_.reset();
  gpu_transform_ = false;
  gpu_transform_off_.clear();
  const bool wanted = this->layer_param().transform_param().use_gpu_transform();
  if (!this->on_gpu()) {
    if (wanted) gpu_transform_off_ = "the net runs on the CPU";
    return;
  }
#ifdef CORTADO_USE_CUDA
  const TransformationParameter tp = MergedTransformParam();
  if (wanted) {
    std::string why;
    const int channels = tp.force_gray() ? 1 : 3;
    if (SourceParams().prefix != "data_param.") {
      gpu_transform_off_ = "the GPU transform reads the records of a Data layer only";
    } else if (std::is_same_v<Ftype, double>) {
      gpu_transform_off_ = "the GPU transform writes float, float16 or bfloat16, not double";
    } else if (!NvjpegBatchDecoder::Available(&why)) {
      gpu_transform_off_ = "nvJPEG is not available: " + why;
    } else if (!first.encoded()) {
      gpu_transform_off_ = "the records are not encoded images";
    } else if (datum_shape_[0] != channels) {
      gpu_transform_off_ = str_cat("the records give ", datum_shape_[0],
                                   " channels; the GPU transform writes 3 (1 with force_gray)");
    } else {
      gpu_transform_ = true;
    }
  }
  DeviceScope scope(this->context().device());
  device_.reset(new DataLayerDevice);
  device_->device = this->context().device();
  for (int w = 0; w < workers_; ++w) {
    cudaStream_t stream = nullptr;
    CORTADO_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    device_->streams.push_back(stream);
  }
  if (!gpu_transform_) return;
  if constexpr (!std::is_same_v<Ftype, double>) {
    // The fields the GPU transform lacks are a FieldError here, before any batch.
    for (int w = 0; w < workers_; ++w) {
      device_->decoders.push_back(std::make_unique<NvjpegBatchDecoder>(tp, this->layer_param().phase(), this->name()));
      device_->decoders.back()->set_channels_last(channels_last_);
    }
  }
#else
  (void)first;
#endif
}

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::PrepareDeviceBatch(Batch* batch) {
#ifdef CORTADO_USE_CUDA
  const size_t bytes =
      static_cast<size_t>(datum_shape_[0]) * datum_shape_[1] * datum_shape_[2] * batch_size_ * sizeof(Ftype);
  if (batch->device_data && batch->device_bytes != bytes) {  // idle (WaitIdle)
    CORTADO_CUDA_CHECK(cudaFree(batch->device_data));
    batch->device_data = nullptr;
    batch->device_bytes = 0;
  }
  if (!batch->device_data) {
    CORTADO_CUDA_CHECK(cudaMalloc(&batch->device_data, bytes));
    batch->device_bytes = bytes;
    batch->device = this->context().device();
  }
  if (!batch->filled) CORTADO_CUDA_CHECK(cudaEventCreateWithFlags(&batch->filled, cudaEventDisableTiming));
#else
  (void)batch;
#endif
}

// The records are read on the host as on the CPU path (same positions, same
// generators); runs of encoded records go to the decoder, a record that is
// not encoded is transformed here and copied into its place.
template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::FillBatchOnGpu(int w, int64_t first, Batch* batch) {
#ifdef CORTADO_USE_CUDA
  if constexpr (std::is_same_v<Ftype, double>) {
    (void)w, (void)first, (void)batch;
    CORTADO_CHECK(false) << "the GPU transform does not write double";
  } else {
    const size_t n = static_cast<size_t>(batch_size_);
    const int64_t image = int64_t{datum_shape_[0]} * datum_shape_[1] * datum_shape_[2];
    float* label = static_cast<float*>(batch->label->mutable_cpu_data());
    RecordSource* source = sources_[static_cast<size_t>(w)].get();
    std::vector<std::string> keys(n);
    std::vector<Datum> datums(n);
    std::vector<std::mt19937> gens(n);
    std::string value;
    for (size_t i = 0; i < n; ++i) {
      if ((i & 15) == 0 && Stopping()) return;
      const int64_t position = global_position(first + static_cast<int64_t>(i));
      ReadDatum(source, position, &keys[i], &value, &datums[i]);
      gens[i].seed(static_cast<std::mt19937::result_type>(record_rng_seed(transform_seed_, position)));
      label[i] = static_cast<float>(datums[i].label());
    }
    PrepareDeviceBatch(batch);
    cudaStream_t stream = device_->streams[static_cast<size_t>(w)];
    NvjpegBatchDecoder& decoder = *device_->decoders[static_cast<size_t>(w)];
    Ftype* out = static_cast<Ftype*>(batch->device_data);
    // `filled` marks the end of what was enqueued, also when a record fails
    // part way (the batch's memory is then freed only after that work).
    struct RecordFilled {
      Batch* batch;
      cudaStream_t stream;
      ~RecordFilled() { cudaEventRecord(batch->filled, stream); }
    } record_filled{batch, stream};
    auto record_error = [&](size_t i, size_t j, const Error& e) {
      const std::string keys_named =
          j == i + 1 ? str_cat("record '", keys[i], "'") : str_cat("records '", keys[i], "' to '", keys[j - 1], "'");
      if (const auto* f = dynamic_cast<const FieldError*>(&e)) {
        throw FieldError(this->name(), this->type(), f->field(),
                         str_cat(f->message(), " (source '", source_, "', ", keys_named, ")"));
      }
      this->field_error(source_field_, "'", source_, "': ", keys_named, " (GPU transform): ", e.what());
    };
    for (size_t i = 0; i < n;) {
      if (!datums[i].encoded()) {  // raw or float pixels: the CPU transform, then its place on the device
        const size_t data_bytes = static_cast<size_t>(image) * n * sizeof(Ftype);
        if (!batch->data || batch->data->size() != data_bytes) {
          batch->data = std::make_unique<SyncedMemory>(data_bytes, /*pinned_host=*/true);
        }
        Ftype* host = static_cast<Ftype*>(batch->data->mutable_cpu_data()) + static_cast<int64_t>(i) * image;
        try {
          transformer_->Transform(datums[i], host, &gens[i], datum_shape_, channels_last_);
        } catch (const Error& e) {
          record_error(i, i + 1, e);
        }
        CORTADO_CUDA_CHECK(cudaMemcpyAsync(out + static_cast<int64_t>(i) * image, host, sizeof(Ftype) * image,
                                           cudaMemcpyHostToDevice, stream));
        ++i;
        continue;
      }
      size_t j = i;
      std::vector<std::string_view> jpegs;
      std::vector<std::mt19937*> rngs;
      for (; j < n && datums[j].encoded(); ++j) {
        jpegs.emplace_back(datums[j].data());
        rngs.push_back(&gens[j]);
      }
      std::vector<int> shape;
      try {
        shape = decoder.Decode(jpegs, rngs, out + static_cast<int64_t>(i) * image,
                               static_cast<int64_t>(n - i) * image, stream);
      } catch (const Error& e) {
        record_error(i, j, e);
      }
      const std::vector<int> want{static_cast<int>(j - i), datum_shape_[0], datum_shape_[1], datum_shape_[2]};
      if (shape != want) {
        this->field_error(source_field_, "'", source_, "': record '", keys[i], "' gives (", shape[1], ", ",
                          shape[2], ", ", shape[3], ") but the first record gives (", datum_shape_[0], ", ",
                          datum_shape_[1], ", ", datum_shape_[2], ")");
      }
      i = j;
    }
  }
#else
  (void)w, (void)first, (void)batch;
#endif
}

template <typename Ftype, typename Btype>
std::unique_ptr<typename DataLayer<Ftype, Btype>::Batch> DataLayer<Ftype, Btype>::TakeBatch() {
  std::unique_ptr<Batch> batch;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    CORTADO_CHECK(!threads_running_.empty()) << "DataLayer::Forward before SetUp";
    // Batches past a worker's failure may be ready; the failure comes first.
    auto failed = [this] { return !errors_.empty() && errors_.begin()->first <= next_take_; };
    not_empty_.wait(lock, [&] { return ready_.count(next_take_) > 0 || failed(); });
    if (failed()) std::rethrow_exception(errors_.begin()->second);
    auto it = ready_.find(next_take_);
    batch = std::move(it->second);
    ready_.erase(it);
    ++next_take_;
  }
  not_full_.notify_all();
  return batch;
}

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::ReturnBatch(std::unique_ptr<Batch> batch) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(batch));
  }
  not_full_.notify_all();
}

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  CORTADO_CHECK(!gpu_transform_) << "the GPU transform's batches are on the device";
  std::unique_ptr<Batch> batch = TakeBatch();
  std::memcpy(top[0]->mutable_cpu_data<Ftype>(), batch->data->cpu_data(), batch->data->size());
  if (top.size() > 1) std::memcpy(top[1]->mutable_cpu_data<float>(), batch->label->cpu_data(), batch->label->size());
  ReturnBatch(std::move(batch));
}

#ifdef CORTADO_USE_CUDA
template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  std::unique_ptr<Batch> batch = TakeBatch();
  cudaStream_t stream = this->context().stream();
  if (batch->filled) {  // filled on a worker's stream: wait for it there, not on the host
    CORTADO_CUDA_CHECK(cudaStreamWaitEvent(stream, batch->filled, 0));
    CORTADO_CUDA_CHECK(cudaMemcpyAsync(top[0]->mutable_gpu_data<Ftype>(), batch->device_data, batch->device_bytes,
                                       cudaMemcpyDeviceToDevice, stream));
  } else {
    CORTADO_CUDA_CHECK(cudaMemcpyAsync(top[0]->mutable_gpu_data<Ftype>(), batch->data->cpu_data(),
                                       batch->data->size(), cudaMemcpyHostToDevice, stream));
  }
  if (top.size() > 1) {
    CORTADO_CUDA_CHECK(cudaMemcpyAsync(top[1]->mutable_gpu_data<float>(), batch->label->cpu_data(),
                                       batch->label->size(), cudaMemcpyHostToDevice, stream));
  }
  if (!batch->copied) CORTADO_CUDA_CHECK(cudaEventCreateWithFlags(&batch->copied, cudaEventDisableTiming));
  CORTADO_CUDA_CHECK(cudaEventRecord(batch->copied, stream));
  ReturnBatch(std::move(batch));
}
#endif

template <typename Ftype, typename Btype>
void DataLayer<Ftype, Btype>::Seek(int64_t batches) {
  CORTADO_CHECK(!sources_.empty()) << "DataLayer::Seek before SetUp";
  CORTADO_CHECK_GE(batches, 0);
  StopReader();
  next_position_ = batches * batch_size_;
  StartReader();
}

template <typename Ftype, typename Btype>
int64_t DataLayer<Ftype, Btype>::records() const {
  return sources_.empty() ? 0 : sources_[0]->entries();
}

CORTADO_INSTANTIATE_LAYER(DataLayer);

#define CORTADO_DATA_RECORDS_(l, F, B) \
  if (auto* d = dynamic_cast<const DataLayer<F, B>*>(l)) return d->records();
int64_t EpochRecords(const Net& net) {
  for (const auto& layer : net.layers()) {
    const LayerBase* l = layer.get();
    CORTADO_FOR_EACH_PAIR(CORTADO_DATA_RECORDS_, l)
  }
  return 0;
}
#undef CORTADO_DATA_RECORDS_

}  // namespace cortado
