#include "tessera/array/distribution.hpp"

#include "tessera/runtime/error.hpp"

namespace tessera {

FastDivisor::FastDivisor(std::uint64_t divisor, std::uint64_t limit) : divisor_(divisor) {
  if (divisor == 0) throw ConfigError("a divisor must not be zero");
  // magic = floor(2^64 / d) + 1 = 2^64 + e with 0 < e <= d over d; the
  // quotient of i is exact while i * e < 2^64, which limit * d < 2^64 implies.
  // d = 1 has no 64-bit magic: it divides (the compiler's i / 1 is free anyway).
  if (divisor > 1 && static_cast<unsigned __int128>(limit) * divisor < (static_cast<unsigned __int128>(1) << 64)) {
    magic_ = static_cast<std::uint64_t>(((static_cast<unsigned __int128>(1) << 64) / divisor) + 1);
    exact_ = true;
  }
}

Distribution Distribution::block(std::uint64_t n, int ranks) {
  if (ranks < 1) throw ConfigError("a distribution needs at least one rank, got " + std::to_string(ranks));
  Distribution d;
  auto p = static_cast<std::uint64_t>(ranks);
  d.base_ = n / p;
  d.extra_ = n % p;
  d.split_ = d.extra_ * (d.base_ + 1);
  // base + 1 wraps only for n = 2^64 - 1 on one rank, where no index is below split.
  d.large_ = FastDivisor(std::max<std::uint64_t>(d.base_ + 1, 1), n);
  d.small_ = FastDivisor(std::max<std::uint64_t>(d.base_, 1), n);
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
