#include "tessera/graph/arc_hash.hpp"

#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/splitmix64.hpp"
#include "tessera/runtime/vector_clones.hpp"
#include "row_blocks.hpp"

namespace tessera::graph {

namespace {

TESSERA_INLINE std::uint64_t mix(std::uint64_t x) { return splitmix64(x); }  // x is a copy: the step's output alone

// The symmetry sums. Unweighted, an arc (u, v) adds A(u) R(v) to one sum and
// A(v) R(u) to the other, with A a 64-bit hash and R = A rotated (any arc
// without its reverse makes them differ, but with chance 2^-64): per row,
// A(u) times the row's sum of R, and R(u) times its sum of A, so an arc
// costs one hash, and a mapped file is checked in less time than reading it.
// Weighted, the weight's bits enter each arc's own hash (two an arc).
TESSERA_INLINE std::uint64_t turned(std::uint64_t a) { return (a << 32) | (a >> 32); }

// The unweighted sums. Most rows of a power-law graph are a few arcs, too
// short for a vector loop, so the arcs of many whole rows are hashed
// together (one flat loop, vectorised), then summed row by row; a row
// longer than a block is one vectorised reduction of its own.
template <class Id>
TESSERA_INLINE SymmetrySums unweighted_symmetry_sums_of(std::span<const std::uint64_t> rows, const Id* dst,
                                                       std::uint64_t lo) {
  constexpr std::uint64_t kBlock = 4096;
  std::array<std::uint64_t, kBlock> a;
  std::uint64_t forward = 0, backward = 0;
  auto add_row = [&](std::uint64_t u, std::uint64_t sum_a, std::uint64_t sum_r) {
    const std::uint64_t au = mix(u);
    forward += au * sum_r;
    backward += turned(au) * sum_a;
  };
  const std::size_t n = rows.size() - 1;
  for (std::size_t i = 0; i < n;) {
    const std::uint64_t first = rows[i];
    const std::size_t j = row_block_end(rows, i, kBlock);
    if (rows[j] - first > kBlock) {  // one long row
      std::uint64_t sum_a = 0, sum_r = 0;
      for (std::uint64_t k = first; k < rows[j]; ++k) {
        const std::uint64_t h = mix(dst[k]);
        sum_a += h;
        sum_r += turned(h);
      }
      add_row(lo + i, sum_a, sum_r);
      i = j;
      continue;
    }
    const std::uint64_t count = rows[j] - first;
    for (std::uint64_t k = 0; k < count; ++k) a[k] = mix(dst[first + k]);
    for (; i < j; ++i) {
      std::uint64_t sum_a = 0, sum_r = 0;
      for (std::uint64_t k = rows[i] - first; k < rows[i + 1] - first; ++k) {
        sum_a += a[k];
        sum_r += turned(a[k]);
      }
      add_row(lo + i, sum_a, sum_r);
    }
  }
  return {forward, backward};
}
TESSERA_VECTOR_CLONES SymmetrySums unweighted_symmetry_sums(std::span<const std::uint64_t> rows,
                                                         const std::uint32_t* dst, std::uint64_t lo) {
  return unweighted_symmetry_sums_of(rows, dst, lo);
}
TESSERA_VECTOR_CLONES SymmetrySums unweighted_symmetry_sums(std::span<const std::uint64_t> rows,
                                                         const std::uint64_t* dst, std::uint64_t lo) {
  return unweighted_symmetry_sums_of(rows, dst, lo);
}

template <class Id>
SymmetrySums weighted_symmetry_sums(std::span<const std::uint64_t> rows, std::span<const Id> dst,
                                    std::span<const double> w, std::uint64_t lo) {
  constexpr std::uint64_t K1 = 0x9e3779b97f4a7c15ull, K2 = 0xc2b2ae3d27d4eb4full, K3 = 0x165667b19e3779f9ull;
  SymmetrySums sums;
  for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
    const std::uint64_t u = lo + i, uf = u * K1, ub = u * K2;
    for (std::uint64_t k = rows[i]; k < rows[i + 1]; ++k) {
      const std::uint64_t v = dst[k];
      std::uint64_t bits = 0;
      std::memcpy(&bits, &w[k], sizeof(bits));
      sums.forward += mix(uf + v * K2 + bits * K3);
      sums.backward += mix(v * K1 + ub + bits * K3);
    }
  }
  return sums;
}

// The forward symmetry sum of every rank's arcs (arc_hash.hpp).
std::uint64_t summed_arc_hash(const EdgeList& g) {
  const std::uint64_t sum = g.with_dst([&](auto dst) {
    return symmetry_sums(g.row_offsets(), dst, g.local_weight(), g.local_vertex_begin()).forward;
  });
  return all_reduce<std::uint64_t>(g.runtime().comm(), sum, MPI_SUM);
}

}  // namespace

std::uint64_t arc_set_hash(const EdgeList& g) { return g.arc_hash(); }

std::uint64_t EdgeList::arc_hash() const {
  if (!arc_hash_) arc_hash_ = summed_arc_hash(*this);
  return *arc_hash_;
}

SymmetrySums symmetry_sums(std::span<const std::uint64_t> rows, std::span<const std::uint32_t> dst,
                           std::span<const double> weight, std::uint64_t lo) {
  if (weight.empty()) return unweighted_symmetry_sums(rows, dst.data(), lo);
  return weighted_symmetry_sums(rows, dst, weight, lo);
}
SymmetrySums symmetry_sums(std::span<const std::uint64_t> rows, std::span<const std::uint64_t> dst,
                           std::span<const double> weight, std::uint64_t lo) {
  if (weight.empty()) return unweighted_symmetry_sums(rows, dst.data(), lo);
  return weighted_symmetry_sums(rows, dst, weight, lo);
}

bool arcs_are_symmetric(const EdgeList& g) {
  SymmetrySums sums =
      g.with_dst([&](auto dst) { return symmetry_sums(g.row_offsets(), dst, g.local_weight(), g.local_vertex_begin()); });
  std::uint64_t both[2] = {sums.forward, sums.backward};
  all_reduce(g.runtime().comm(), both, 2, MPI_SUM);
  return both[0] == both[1];
}

std::string arc_set_hash_hex(const EdgeList& g) {
  char text[24];
  std::snprintf(text, sizeof(text), "%016" PRIx64, arc_set_hash(g));
  return text;
}

}  // namespace tessera::graph
