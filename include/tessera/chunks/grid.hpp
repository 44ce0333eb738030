// A 3D grid of chunks (di x dj x dk) for grid problems: chunk id
// id = i + di * (j + dj * k), so ids run fastest along i.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace tessera::chunks {

struct ChunkGrid {
  std::array<int, 3> dims{1, 1, 1};

  std::uint64_t count() const noexcept {
    return static_cast<std::uint64_t>(dims[0]) * static_cast<std::uint64_t>(dims[1]) * static_cast<std::uint64_t>(dims[2]);
  }
  std::uint64_t id(int i, int j, int k) const noexcept {
    return static_cast<std::uint64_t>(i) +
           static_cast<std::uint64_t>(dims[0]) * (static_cast<std::uint64_t>(j) + static_cast<std::uint64_t>(dims[1]) * static_cast<std::uint64_t>(k));
  }
  std::array<int, 3> index(std::uint64_t id) const noexcept {
    auto di = static_cast<std::uint64_t>(dims[0]), dj = static_cast<std::uint64_t>(dims[1]);
    return {static_cast<int>(id % di), static_cast<int>((id / di) % dj), static_cast<int>(id / (di * dj))};
  }
  // The neighbour one step along axis (0, 1, 2) in direction (-1 or +1), or
  // -1 past the edge of the grid (no wraparound).
  std::int64_t neighbour(std::uint64_t id, int axis, int direction) const noexcept {
    auto ix = index(id);
    ix[static_cast<std::size_t>(axis)] += direction;
    if (ix[static_cast<std::size_t>(axis)] < 0 || ix[static_cast<std::size_t>(axis)] >= dims[static_cast<std::size_t>(axis)]) return -1;
    return static_cast<std::int64_t>(this->id(ix[0], ix[1], ix[2]));
  }
};

// "4x4x2" (or "8", meaning 8x8x8; or "4x4", meaning 4x4x1); throws ConfigError
// naming `option` when the text does not parse or a dimension is not positive.
ChunkGrid parse_chunk_grid(const std::string& text, const std::string& option);

}  // namespace tessera::chunks
