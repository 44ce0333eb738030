// Random global indices for the Bale-style benchmarks. Rank r's stream depends
// only on (r, salt), so a verifier on any rank can regenerate it.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/runtime/splitmix64.hpp"

namespace tessera::bench {

inline std::uint64_t stream_seed(int rank, std::uint64_t salt) {
  std::uint64_t s = 0x243f6a8885a308d3ull ^ (salt << 32) ^ static_cast<std::uint64_t>(rank);
  return splitmix64(s);
}

// `count` indices uniform in [0, range) (Lemire's multiply-shift, no modulo bias worth noting).
inline std::vector<std::uint64_t> random_indices(int rank, std::uint64_t salt, std::uint64_t count,
                                                 std::uint64_t range) {
  std::uint64_t state = stream_seed(rank, salt);
  std::vector<std::uint64_t> out(count);
  for (auto& v : out) v = static_cast<std::uint64_t>((static_cast<unsigned __int128>(splitmix64(state)) * range) >> 64);
  return out;
}

}  // namespace tessera::bench
