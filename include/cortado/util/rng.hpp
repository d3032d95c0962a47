#pragma once
// The process's random generator: one std::mt19937 per thread, seeded from the
// solver's random_seed (or from the clock when the seed is negative). Its
// state can be saved and restored, so that a resumed run draws the same
// numbers as one that never stopped. Draws are generated in double and stored
// in T.

#include <cstdint>
#include <random>
#include <string>

#include "cortado/bfloat16.hpp"

namespace cortado {

std::mt19937& rng();
/// Seeds the calling thread's generator; seed < 0 picks one from the clock.
void set_random_seed(int64_t seed);
std::string rng_state();
void set_rng_state(const std::string& state);

template <typename T> void rng_uniform(int64_t n, double a, double b, T* r);
template <typename T> void rng_gaussian(int64_t n, double mean, double sigma, T* r);
/// r[i] = 1 with probability p, else 0.
void rng_bernoulli(int64_t n, double p, unsigned* r);

}  // namespace cortado
