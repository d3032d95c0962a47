// NvjpegBatchDecoder (data/nvjpeg_batch.hpp): nvJPEG's handles and buffers,
// the per-record planning on the host, and the order of the work on the
// stream: the tables' upload, the decode, the transform kernel.
#include "cortado/data/nvjpeg_batch.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "cortado/bfloat16.hpp"
#include "cortado/layer.hpp"
#include "cortado/util/cuda.hpp"
#include "nvjpeg_api.hpp"
#include "nvjpeg_transform.hpp"

namespace cortado {

namespace {

void check_nvjpeg(int status, const char* call) {
  if (status != nvjpeg::kSuccess) fail(call, " failed: ", nvjpeg::status_name(status));
}

// nvjpegCreateEx with interpolated chroma upsampling where the library
// knows the flag (older ones refuse unknown flags).
int create_handle(const nvjpeg::Api* api, int backend, nvjpeg::Handle* handle) {
  int status = api->CreateEx(backend, nullptr, nullptr, nvjpeg::kFlagUpsamplingWithInterpolation, handle);
  if (status == nvjpeg::kInvalidParameter) status = api->CreateEx(backend, nullptr, nullptr, 0, handle);
  return status;
}

Datum encoded_datum(std::string_view bytes) {
  Datum d;
  d.set_encoded(true);
  d.set_data(std::string(bytes));
  return d;
}

// What the header of one record says, and where it is decoded.
struct Probe {
  bool gpu = false;       // false: the CPU transforms it (why says why)
  bool hardware = false;  // the hardware engine takes it
  int height = 0, width = 0;
  const char* why = "";
};

// One backend's share of a batch, in nvjpegDecodeBatched's arrays.
struct Group {
  std::vector<const unsigned char*> data;
  std::vector<size_t> lengths;
  std::vector<nvjpeg::Image> images;
  void Append(const Group& g) {
    data.insert(data.end(), g.data.begin(), g.data.end());
    lengths.insert(lengths.end(), g.lengths.begin(), g.lengths.end());
    images.insert(images.end(), g.images.begin(), g.images.end());
  }
};

}  // namespace

struct NvjpegBatchDecoder::State {
  DataTransformer transformer;
  std::unique_ptr<NvjpegLibrary> library;
  const nvjpeg::Api* api = nullptr;
  NvjpegOutput output;  // height = width = 0 without a crop
  nvjpeg::Handle hw = nullptr, sw = nullptr;  // the hardware engine (null: none), the default backend
  nvjpeg::State hw_state = nullptr, sw_state = nullptr;
  nvjpeg::Stream parser = nullptr;  // of hw where there is one (DecodeBatchedSupported reads it), else sw
  cudaEvent_t uploaded = nullptr;   // the last call's uploads from the pinned buffers are done
  cudaEvent_t finished = nullptr;   // the last call's work is done (its stream may be gone since)
  cudaStream_t stream = nullptr;    // of the call in progress; never used after it returns
  cudaStream_t last_stream = nullptr;  // compared only, never used: it may be destroyed
  uint8_t* planes = nullptr;        // device: the decoded images, C planes each
  size_t planes_bytes = 0;
  NvjpegJob* jobs = nullptr;  // device
  size_t jobs_bytes = 0;
  NvjpegJob* jobs_host = nullptr;  // pinned
  size_t jobs_host_bytes = 0;
  void* staging = nullptr;  // pinned: the CPU-transformed records
  size_t staging_bytes = 0;
  int64_t cpu_fallbacks = 0;

  State(const TransformationParameter& param, Phase phase, const std::string& layer_name)
      : transformer(param, phase, layer_name, "Data") {}
  ~State();
  void Validate(const std::string& layer_name);
  void Init(const std::vector<std::string>& library_names);
  Probe ProbeJpeg(std::string_view bytes) const;
  int DecodeGroup(nvjpeg::Handle handle, nvjpeg::State state, Group* g) const;
  void Decode(Group* hardware, Group* fallback);
  void UseStream(cudaStream_t s);
  void GrowDevice(void** p, size_t* have, size_t need) const;
  void GrowPinned(void** p, size_t* have, size_t need) const;
  template <typename T>
  size_t PlanBatch(const std::vector<std::string_view>& jpegs, const std::vector<std::mt19937*>& rngs,
                   const std::vector<Probe>& probes, const NvjpegOutput& o, std::vector<size_t>* offsets);
  template <typename T>
  void Enqueue(const std::vector<std::string_view>& jpegs, const std::vector<Probe>& probes,
               const std::vector<size_t>& offsets, const NvjpegOutput& o, T* out);
};

// The fields the GPU path lacks, and the mean against the channels.
void NvjpegBatchDecoder::State::Validate(const std::string& layer_name) {
  const TransformationParameter& p = transformer.param();
  auto reject = [&](const std::string& field, const std::string& why) {
    throw FieldError(layer_name, "Data", "transform_param." + field, why + " (use_gpu_transform)");
  };
  if (p.has_mean_file()) reject("mean_file", "the GPU transform subtracts mean_value only; give mean_value");
  if (p.has_distort_param()) reject("distort_param", "the GPU transform has no photometric distortions");
  if (transformer.random_resize()) {
    reject("img_rand_resize_lower", "the GPU transform has no NVCaffe random resize; the random-resized crop "
           "(rand_crop_area_lower) is its replacement");
  }
  output.channels = p.force_gray() ? 1 : 3;
  const int nmean = p.mean_value_size();
  if (nmean > 1 && nmean != output.channels) {
    reject("mean_value", str_cat("has ", nmean, " values; give one, or one per channel (", output.channels, ")"));
  }
  for (int c = 0; c < output.channels; ++c) output.mean[c] = nmean > 0 ? p.mean_value(nmean == 1 ? 0 : c) : 0.f;
  output.scale = p.scale();
  output.height = transformer.crop_h();
  output.width = transformer.crop_w();
}

void NvjpegBatchDecoder::State::Init(const std::vector<std::string>& library_names) {
  library = std::make_unique<NvjpegLibrary>(library_names);
  api = &library->api();
  if (create_handle(api, nvjpeg::kBackendHardware, &hw) == nvjpeg::kSuccess) {
    if (api->JpegStateCreate(hw, &hw_state) != nvjpeg::kSuccess) {
      api->Destroy(hw);
      hw = nullptr;
      hw_state = nullptr;
    }
  } else {
    hw = nullptr;
  }
  check_nvjpeg(create_handle(api, nvjpeg::kBackendDefault, &sw), "nvjpegCreateEx (default backend)");
  check_nvjpeg(api->JpegStateCreate(sw, &sw_state), "nvjpegJpegStateCreate");
  check_nvjpeg(api->JpegStreamCreate(hw ? hw : sw, &parser), "nvjpegJpegStreamCreate");
  CORTADO_CUDA_CHECK(cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming));
  CORTADO_CUDA_CHECK(cudaEventCreateWithFlags(&finished, cudaEventDisableTiming));
  LOG(INFO) << "GPU JPEG decoding: " << library->name() << ", "
            << (hw ? "the hardware JPEG engine (the default backend for the files it does not take)"
                   : "the default backend (no hardware JPEG engine)");
}

NvjpegBatchDecoder::State::~State() {
  if (!api) return;  // nvJPEG did not load: nothing was created
  // The caller's stream may be destroyed by now (the first GPU run crashed
  // synchronizing it here): wait for the last call's work through its event.
  for (cudaEvent_t* e : {&finished, &uploaded}) {
    if (*e) {
      cudaEventSynchronize(*e);
      cudaEventDestroy(*e);
    }
  }
  if (planes) cudaFree(planes);  // cudaFree also frees what cudaMallocAsync gave
  if (jobs) cudaFree(jobs);
  if (jobs_host) cudaFreeHost(jobs_host);
  if (staging) cudaFreeHost(staging);
  if (parser) api->JpegStreamDestroy(parser);
  if (hw_state) api->JpegStateDestroy(hw_state);
  if (sw_state) api->JpegStateDestroy(sw_state);
  if (hw) api->Destroy(hw);
  if (sw) api->Destroy(sw);
  cudaGetLastError();
}

// A record goes to the CPU wherever nvJPEG would not give the CPU's pixels
// (nvjpeg_batch.hpp).
Probe NvjpegBatchDecoder::State::ProbeJpeg(std::string_view bytes) const {
  Probe r;
  const auto* d = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 3 || d[0] != 0xFF || d[1] != 0xD8 || d[2] != 0xFF) {
    r.why = "not a JPEG";
    return r;
  }
  unsigned components = 0, width = 0, height = 0;
  if (api->JpegStreamParseHeader(hw ? hw : sw, d, bytes.size(), parser) != nvjpeg::kSuccess ||
      api->JpegStreamGetComponentsNum(parser, &components) != nvjpeg::kSuccess ||
      api->JpegStreamGetFrameDimensions(parser, &width, &height) != nvjpeg::kSuccess || width == 0 || height == 0 ||
      width > 65535 || height > 65535) {
    r.why = "nvJPEG cannot parse its header";
    return r;
  }
  if (components != 3 && !(components == 1 && output.channels == 1)) {
    r.why = components == 1 ? "a gray JPEG in a 3-channel batch" : "a CMYK or YCCK JPEG";
    return r;
  }
  int orientation = nvjpeg::kOrientationUnknown;
  if (api->JpegStreamGetExifOrientation &&
      api->JpegStreamGetExifOrientation(parser, &orientation) == nvjpeg::kSuccess &&
      orientation != nvjpeg::kOrientationUnknown && orientation != nvjpeg::kOrientationNormal) {
    r.why = "an EXIF orientation other than 1";
    return r;
  }
  r.gpu = true;
  r.height = static_cast<int>(height);
  r.width = static_cast<int>(width);
  int unsupported = 1;
  r.hardware = hw && api->DecodeBatchedSupported(hw, parser, &unsupported) == nvjpeg::kSuccess && unsupported == 0;
  return r;
}

int NvjpegBatchDecoder::State::DecodeGroup(nvjpeg::Handle handle, nvjpeg::State state, Group* g) const {
  if (g->data.empty()) return nvjpeg::kSuccess;
  const int format = output.channels == 1 ? nvjpeg::kOutputY : nvjpeg::kOutputBGR;
  int status = api->DecodeBatchedInitialize(handle, state, static_cast<int>(g->data.size()), 1, format);
  if (status == nvjpeg::kSuccess) {
    status = api->DecodeBatched(handle, state, g->data.data(), g->lengths.data(), g->images.data(), stream);
  }
  return status;
}

// The hardware engine's group, then the default backend's. A batch the
// engine fails goes to the default backend too; if that decodes it, the
// engine is left for good (it refuses something of this data set: an output
// format, a size), else the batch is corrupt (Error).
void NvjpegBatchDecoder::State::Decode(Group* hardware, Group* fallback) {
  int refused = nvjpeg::kSuccess;
  if (hw && !hardware->data.empty()) {
    refused = DecodeGroup(hw, hw_state, hardware);
    if (refused != nvjpeg::kSuccess) {
      CORTADO_CUDA_CHECK(cudaStreamSynchronize(stream));
      fallback->Append(*hardware);
    }
  }
  const int status = DecodeGroup(sw, sw_state, fallback);
  if (status != nvjpeg::kSuccess) {
    fail("nvJPEG could not decode a batch of ", fallback->data.size(), " JPEG records: ",
         nvjpeg::status_name(status), " (one of them is corrupt, or the device failed)");
  }
  if (refused == nvjpeg::kSuccess) return;
  LOG(WARNING) << "the hardware JPEG engine failed a batch that nvJPEG's default backend decodes ("
               << nvjpeg::status_name(refused) << "): the default backend decodes everything from now on";
  CORTADO_CUDA_CHECK(cudaStreamSynchronize(stream));
  api->JpegStreamDestroy(parser);  // the parser belongs to hw: a new one on sw
  parser = nullptr;
  api->JpegStateDestroy(hw_state);
  api->Destroy(hw);
  hw = nullptr;
  hw_state = nullptr;
  check_nvjpeg(api->JpegStreamCreate(sw, &parser), "nvjpegJpegStreamCreate");
}

void NvjpegBatchDecoder::State::UseStream(cudaStream_t s) {
  // The buffers are stream-ordered: a call on another stream waits for the
  // last call's work (through its event: that stream may be gone).
  if (s != last_stream) CORTADO_CUDA_CHECK(cudaEventSynchronize(finished));
  stream = s;
  last_stream = s;
}

void NvjpegBatchDecoder::State::GrowDevice(void** p, size_t* have, size_t need) const {
  if (need <= *have) return;
  need += need / 4;  // room for the next batch's larger images
  if (*p) CORTADO_CUDA_CHECK(cudaFreeAsync(*p, stream));
  *p = nullptr;
  *have = 0;
  CORTADO_CUDA_CHECK(cudaMallocAsync(p, need, stream));
  *have = need;
}

// Only after `uploaded` has completed (Decode waits for it first).
void NvjpegBatchDecoder::State::GrowPinned(void** p, size_t* have, size_t need) const {
  if (need <= *have) return;
  need += need / 4;
  if (*p) CORTADO_CUDA_CHECK(cudaFreeHost(*p));
  *p = nullptr;
  *have = 0;
  CORTADO_CUDA_CHECK(cudaMallocHost(p, need));
  *have = need;
}

NvjpegBatchDecoder::NvjpegBatchDecoder(const TransformationParameter& param, Phase phase,
                                       const std::string& layer_name, const std::vector<std::string>& library_names)
    : s_(std::make_unique<State>(param, phase, layer_name)) {
  s_->Validate(layer_name);
  s_->Init(library_names);
}

NvjpegBatchDecoder::~NvjpegBatchDecoder() = default;

// The records' plans, in record order (each draws from its own generator);
// the CPU's records are transformed into the staging buffer. Returns the
// bytes of the decoded planes; offsets[i]: record i's.
template <typename T>
size_t NvjpegBatchDecoder::State::PlanBatch(const std::vector<std::string_view>& jpegs,
                                            const std::vector<std::mt19937*>& rngs, const std::vector<Probe>& probes,
                                            const NvjpegOutput& o, std::vector<size_t>* offsets) {
  const std::vector<int> image_shape{o.channels, o.height, o.width};
  const int64_t image_count = int64_t{o.channels} * o.height * o.width;
  size_t plane_bytes = 0;
  int slot = 0;
  for (size_t i = 0; i < jpegs.size(); ++i) {
    const Probe& p = probes[i];
    std::mt19937* rng = rngs.empty() ? nullptr : rngs[i];
    NvjpegJob& job = jobs_host[i];
    job = NvjpegJob{};
    if (!p.gpu) {
      if (cpu_fallbacks++ == 0) {
        LOG(WARNING) << "GPU transform: a record is transformed on the CPU instead (" << p.why
                     << "); logged once, cpu_fallbacks() counts them";
      }
      job.skip = 1;
      transformer.Transform(encoded_datum(jpegs[i]), static_cast<T*>(staging) + slot++ * image_count, rng,
                            image_shape, o.nhwc != 0);
      continue;
    }
    if (output.height == 0 && (p.height != o.height || p.width != o.width)) {
      fail("record ", i, " of the batch is ", p.height, "x", p.width, " but record 0 is ", o.height, "x", o.width,
           ": without a crop all records must have the same size (or use a crop)");
    }
    const TransformPlan plan = transformer.Plan(p.height, p.width, rng);
    job.height = p.height;
    job.width = p.width;
    job.crop_h0 = plan.crop_h0;
    job.crop_w0 = plan.crop_w0;
    job.window_h0 = plan.window_h0;
    job.window_w0 = plan.window_w0;
    job.window_h = plan.window_h;
    job.window_w = plan.window_w;
    job.mirror = plan.mirror ? 1 : 0;
    (*offsets)[i] = plane_bytes;
    plane_bytes += static_cast<size_t>(o.channels) * p.height * p.width;
  }
  return plane_bytes;
}

// Enqueues the uploads (the CPU's records into their slots of `out`, the
// jobs), then the decode; the planes and jobs buffers are large enough.
template <typename T>
void NvjpegBatchDecoder::State::Enqueue(const std::vector<std::string_view>& jpegs, const std::vector<Probe>& probes,
                                        const std::vector<size_t>& offsets, const NvjpegOutput& o, T* out) {
  const int64_t image_count = int64_t{o.channels} * o.height * o.width;
  Group hardware, fallback;
  int slot = 0;
  for (size_t i = 0; i < jpegs.size(); ++i) {
    const Probe& p = probes[i];
    if (!p.gpu) {
      CORTADO_CUDA_CHECK(cudaMemcpyAsync(out + static_cast<int64_t>(i) * image_count,
                                         static_cast<T*>(staging) + slot++ * image_count,
                                         sizeof(T) * static_cast<size_t>(image_count), cudaMemcpyHostToDevice, stream));
      continue;
    }
    jobs_host[i].src = planes + offsets[i];
    nvjpeg::Image image{};
    for (int c = 0; c < o.channels; ++c) {
      image.channel[c] = planes + offsets[i] + static_cast<size_t>(c) * p.height * p.width;
      image.pitch[c] = static_cast<size_t>(p.width);
    }
    Group& g = p.hardware && hw ? hardware : fallback;
    g.data.push_back(reinterpret_cast<const unsigned char*>(jpegs[i].data()));
    g.lengths.push_back(jpegs[i].size());
    g.images.push_back(image);
  }
  CORTADO_CUDA_CHECK(
      cudaMemcpyAsync(jobs, jobs_host, sizeof(NvjpegJob) * jpegs.size(), cudaMemcpyHostToDevice, stream));
  CORTADO_CUDA_CHECK(cudaEventRecord(uploaded, stream));
  Decode(&hardware, &fallback);
}

template <typename T>
std::vector<int> NvjpegBatchDecoder::Decode(const std::vector<std::string_view>& jpegs,
                                            const std::vector<std::mt19937*>& rngs, T* out, int64_t out_count,
                                            CUstream_st* stream) {
  State& s = *s_;
  CORTADO_CHECK(rngs.empty() || rngs.size() == jpegs.size());
  const int n = static_cast<int>(jpegs.size());
  if (n > 65535) fail("a batch of ", n, " records is more than the GPU transform takes at once (65535)");
  s.UseStream(stream);
  // `finished` marks the end of whatever this call enqueued, also when it
  // throws part way (the destructor waits for it before freeing the buffers).
  struct RecordFinished {
    State& s;
    ~RecordFinished() { cudaEventRecord(s.finished, s.stream); }
  } record_finished{s};
  CORTADO_CUDA_CHECK(cudaEventSynchronize(s.uploaded));  // the pinned buffers are free again
  std::vector<Probe> probes;
  int cpu_count = 0;
  for (std::string_view bytes : jpegs) {
    probes.push_back(s.ProbeJpeg(bytes));
    cpu_count += probes.back().gpu ? 0 : 1;
  }
  NvjpegOutput o = s.output;
  if (o.height == 0 && n > 0) {  // no crop: the first record's size
    const std::vector<int> shape = probes[0].gpu ? std::vector<int>{o.channels, probes[0].height, probes[0].width}
                                                 : s.transformer.InferShape(encoded_datum(jpegs[0]));
    o.height = shape[1];
    o.width = shape[2];
  }
  const int64_t image_count = int64_t{o.channels} * o.height * o.width;
  if (n * image_count > out_count) {
    fail("the GPU transform's output holds ", out_count, " values; a batch of ", n, " images of (", o.channels, ", ",
         o.height, ", ", o.width, ") needs ", n * image_count);
  }
  if (n == 0) return {0, o.channels, o.height, o.width};
  s.GrowPinned(reinterpret_cast<void**>(&s.jobs_host), &s.jobs_host_bytes, sizeof(NvjpegJob) * n);
  s.GrowPinned(&s.staging, &s.staging_bytes, sizeof(T) * static_cast<size_t>(image_count) * std::max(cpu_count, 1));
  std::vector<size_t> offsets(jpegs.size());
  const size_t plane_bytes = s.PlanBatch<T>(jpegs, rngs, probes, o, &offsets);
  s.GrowDevice(reinterpret_cast<void**>(&s.planes), &s.planes_bytes, std::max<size_t>(plane_bytes, 1));
  s.GrowDevice(reinterpret_cast<void**>(&s.jobs), &s.jobs_bytes, sizeof(NvjpegJob) * n);
  s.Enqueue(jpegs, probes, offsets, o, out);
  gpu::nvjpeg_transform<T>(n, s.jobs, o, out, stream);
  return {n, o.channels, o.height, o.width};
}

void NvjpegBatchDecoder::set_channels_last(bool on) { s_->output.nhwc = on ? 1 : 0; }
bool NvjpegBatchDecoder::hardware() const { return s_->hw != nullptr; }
const std::string& NvjpegBatchDecoder::library() const { return s_->library->name(); }
int64_t NvjpegBatchDecoder::cpu_fallbacks() const { return s_->cpu_fallbacks; }
const DataTransformer& NvjpegBatchDecoder::transformer() const { return s_->transformer; }

template std::vector<int> NvjpegBatchDecoder::Decode<float>(const std::vector<std::string_view>&,
                                                            const std::vector<std::mt19937*>&, float*, int64_t,
                                                            CUstream_st*);
template std::vector<int> NvjpegBatchDecoder::Decode<float16>(const std::vector<std::string_view>&,
                                                              const std::vector<std::mt19937*>&, float16*, int64_t,
                                                              CUstream_st*);
template std::vector<int> NvjpegBatchDecoder::Decode<bfloat16>(const std::vector<std::string_view>&,
                                                               const std::vector<std::mt19937*>&, bfloat16*, int64_t,
                                                               CUstream_st*);

}  // namespace cortado
