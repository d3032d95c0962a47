#include "cortado/layers/filler.hpp"

#include <cmath>
#include <vector>

#include "cortado/util/rng.hpp"

namespace cortado {

namespace {
const char* const kFillers[] = {"constant", "gaussian", "msra", "positive_unitball", "uniform", "xavier"};

double fan_scale_n(const FillerParameter& p, const Blob& blob) {
  const double count = static_cast<double>(blob.count());
  const double fan_in = blob.num_axes() > 0 && blob.shape(0) ? count / blob.shape(0) : count;
  const double fan_out = blob.num_axes() > 1 && blob.shape(1) ? count / blob.shape(1) : count;
  switch (p.variance_norm()) {
    case FillerParameter::FAN_OUT: return fan_out;
    case FillerParameter::AVERAGE: return (fan_in + fan_out) / 2;
    default: return fan_in;
  }
}
}  // namespace

void ValidateFiller(const FillerParameter& param, const std::string& where) {
  for (const char* f : kFillers)
    if (param.type() == f) return;
  std::string known;
  for (const char* f : kFillers) known += std::string(known.empty() ? "" : ", ") + f;
  fail(where.empty() ? "" : where + ".type: ", "unknown filler '", param.type(), "'; known fillers: ", known);
}

void Fill(const FillerParameter& p, Blob* blob, const std::string& where) {
  ValidateFiller(p, where);
  const int64_t n = static_cast<int64_t>(blob->count());
  std::vector<double> v(n);
  const std::string& t = p.type();
  if (t == "constant") {
    std::fill(v.begin(), v.end(), p.value());
  } else if (t == "uniform") {
    if (p.min() > p.max()) fail(where, ": uniform filler min ", p.min(), " > max ", p.max());
    rng_uniform<double>(n, p.min(), p.max(), v.data());
  } else if (t == "gaussian") {
    if (p.std() <= 0) fail(where, ".std: must be positive, got ", p.std());
    rng_gaussian<double>(n, p.mean(), p.std(), v.data());
    if (p.sparse() >= 0) {
      // Keep each weight with probability sparse / num_outputs, as in Caffe.
      const int outputs = blob->num_axes() > 0 ? blob->shape(0) : 1;
      const double keep = std::min(1.0, static_cast<double>(p.sparse()) / std::max(outputs, 1));
      std::vector<unsigned> mask(n);
      rng_bernoulli(n, keep, mask.data());
      for (int64_t i = 0; i < n; ++i) v[i] *= mask[i];
    }
  } else if (t == "xavier") {
    const double scale = std::sqrt(3.0 / fan_scale_n(p, *blob));
    rng_uniform<double>(n, -scale, scale, v.data());
  } else if (t == "msra") {
    rng_gaussian<double>(n, 0.0, std::sqrt(2.0 / fan_scale_n(p, *blob)), v.data());
  } else if (t == "positive_unitball") {
    rng_uniform<double>(n, 0, 1, v.data());
    const int rows = blob->num_axes() > 0 ? blob->shape(0) : 1;
    const int64_t dim = rows ? n / rows : 0;
    for (int r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t j = 0; j < dim; ++j) s += v[r * dim + j];
      for (int64_t j = 0; j < dim; ++j) v[r * dim + j] /= s;
    }
  }
  dispatch_type(blob->data_type(), [&](auto z) {
    using T = decltype(z);
    T* d = blob->mutable_cpu_data<T>();
    for (int64_t i = 0; i < n; ++i) d[i] = T(v[i]);
  });
}

}  // namespace cortado
