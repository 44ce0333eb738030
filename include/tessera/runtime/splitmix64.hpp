// SplitMix64 (Steele, Lea, Flood 2014): a tiny seedable generator that gives
// the same stream on every rank and platform, so any rank can regenerate
// another rank's random input to verify a result. The one copy for the
// benchmarks and the tests.
#pragma once
#include <cstdint>

namespace tessera {

// Advances `state` and returns the next value of its stream.
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace tessera
