#include "tessera/graph/arc_hash.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/splitmix64.hpp"

namespace tessera::graph {

namespace {
std::uint64_t mix(std::uint64_t x) { return splitmix64(x); }  // x is a copy: the step's output alone
}  // namespace

std::uint64_t arc_set_hash(const EdgeList& g) {
  auto w = g.local_weight();
  std::uint64_t sum = 0;
  g.for_each_arc([&](std::uint64_t u, std::uint64_t v, std::size_t k) {
    std::uint64_t bits = 0;
    if (!w.empty()) std::memcpy(&bits, &w[k], sizeof(bits));
    sum += mix(mix(mix(u) + v) + bits);
  });
  return all_reduce<std::uint64_t>(g.runtime().comm(), sum, MPI_SUM);
}

std::string arc_set_hash_hex(const EdgeList& g) {
  char text[24];
  std::snprintf(text, sizeof(text), "%016" PRIx64, arc_set_hash(g));
  return text;
}

}  // namespace tessera::graph
