#include "cortado/util/rng.hpp"

#include <chrono>
#include <sstream>

#include "cortado/common.hpp"

namespace cortado {

std::mt19937& rng() {
  thread_local std::mt19937 gen(static_cast<uint32_t>(
      std::chrono::high_resolution_clock::now().time_since_epoch().count()));
  return gen;
}

void set_random_seed(int64_t seed) {
  if (seed < 0) seed = std::chrono::high_resolution_clock::now().time_since_epoch().count();
  rng().seed(static_cast<uint32_t>(seed));
}

std::string rng_state() {
  std::ostringstream os;
  os << rng();
  return os.str();
}

void set_rng_state(const std::string& state) {
  std::istringstream is(state);
  is >> rng();
  if (is.fail()) fail("the saved random generator state is corrupt");
}

template <typename T> void rng_uniform(int64_t n, double a, double b, T* r) {
  CORTADO_CHECK_LE(a, b);
  std::uniform_real_distribution<double> d(a, b);
  for (int64_t i = 0; i < n; ++i) r[i] = T(d(rng()));
}

template <typename T> void rng_gaussian(int64_t n, double mean, double sigma, T* r) {
  CORTADO_CHECK(sigma > 0);
  std::normal_distribution<double> d(mean, sigma);
  for (int64_t i = 0; i < n; ++i) r[i] = T(d(rng()));
}

void rng_bernoulli(int64_t n, double p, unsigned* r) {
  std::bernoulli_distribution d(p);
  for (int64_t i = 0; i < n; ++i) r[i] = d(rng()) ? 1u : 0u;
}

template void rng_uniform<double>(int64_t, double, double, double*);
template void rng_uniform<float>(int64_t, double, double, float*);
template void rng_uniform<float16>(int64_t, double, double, float16*);
template void rng_uniform<bfloat16>(int64_t, double, double, bfloat16*);
template void rng_gaussian<double>(int64_t, double, double, double*);
template void rng_gaussian<float>(int64_t, double, double, float*);
template void rng_gaussian<float16>(int64_t, double, double, float16*);
template void rng_gaussian<bfloat16>(int64_t, double, double, bfloat16*);

}  // namespace cortado
