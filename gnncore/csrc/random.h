// Counter-based random bits shared by the kernels: every draw is a pure
// function of (seed, position), so results do not depend on thread counts.
#pragma once
#include <cstdint>

namespace gnncore {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

// The splitmix64 finaliser: a bijective 64-bit mixer.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Output `counter` of the splitmix64 stream that starts at `key`.
inline uint64_t stream(uint64_t key, uint64_t counter) {
  return mix64(key + (counter + 1) * kGolden);
}

// Uniform double in [0, 1).
inline double unit(uint64_t r) { return static_cast<double>(r >> 11) * 0x1.0p-53; }

}  // namespace gnncore
