#include "tessera/array/distribution.hpp"

#include "tessera/runtime/error.hpp"

namespace tessera {

Distribution Distribution::block(std::uint64_t n, int ranks) {
  if (ranks < 1) throw ConfigError("a distribution needs at least one rank, got " + std::to_string(ranks));
  Distribution d;
  auto p = static_cast<std::uint64_t>(ranks);
  d.base_ = n / p;
  d.extra_ = n % p;
  d.split_ = d.extra_ * (d.base_ + 1);
  d.offsets_.resize(p + 1);
  for (std::uint64_t r = 0; r <= p; ++r) d.offsets_[r] = r * d.base_ + std::min(r, d.extra_);
  return d;
}

Distribution Distribution::weighted_block(const std::vector<std::uint64_t>& sizes) {
  if (sizes.empty()) throw ConfigError("a weighted block distribution needs one size per rank, got none");
  Distribution d;
  d.block_ = false;
  d.offsets_.assign(sizes.size() + 1, 0);
  for (std::size_t r = 0; r < sizes.size(); ++r) d.offsets_[r + 1] = d.offsets_[r] + sizes[r];
  // A weighted distribution that happens to be the block one gets the fast owner().
  if (Distribution b = block(d.size(), static_cast<int>(sizes.size())); b.offsets_ == d.offsets_) return b;
  return d;
}

void Distribution::check(std::uint64_t i) const {
  if (i >= size())
    throw RangeError("global index " + std::to_string(i) + " is out of range [0, " + std::to_string(size()) + ")");
}

}  // namespace tessera
