// Task mapping of over-decomposed chunks and its quality metrics: random,
// round-robin, block and topology-aware mappings (Agarwal, Sharma, Kale,
// IPDPS 2006; Bhatele, Kale, "Benefits of topology aware mapping for mesh
// interconnects", 2008). The topology-aware mapping is recursive coordinate
// bisection (Berger, Bokhari 1987) applied to the chunk grid and the rank
// set at once; hop-bytes is the sum of bytes x hops over every message.
#include "tessera/chunks/mapping.hpp"

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <unistd.h>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/splitmix64.hpp"
#include "tessera/storage/output_path.hpp"

namespace tessera::chunks {

// ---- ChunkGrid ----------------------------------------------------------

ChunkGrid ChunkGrid::parse(const std::string& spec) {
  auto bad = [&](const std::string& why) {
    return ConfigError("chunk grid '" + spec + "': " + why + "; expected I, IxJ or IxJxK chunks (e.g. 64x64x64)");
  };
  std::vector<std::int64_t> extents;
  std::size_t start = 0;
  while (true) {
    auto x = spec.find('x', start);
    std::string part = spec.substr(start, x == std::string::npos ? std::string::npos : x - start);
    std::string what = "extent " + std::to_string(extents.size() + 1);
    if (part.empty()) throw bad(what + " is empty");
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec == std::errc::result_out_of_range) throw bad(what + " '" + part + "' is too large");
    if (ec != std::errc() || end != part.data() + part.size()) throw bad(what + " '" + part + "' is not a number");
    if (v < 1) throw bad(what + " must be at least 1, not " + part);
    if (v > INT_MAX) throw bad(what + " '" + part + "' is too large");
    extents.push_back(v);
    if (x == std::string::npos) break;
    start = x + 1;
  }
  if (extents.size() > 3) throw bad("more than 3 extents");
  extents.resize(3, 1);
  if (extents[0] * extents[1] > INT_MAX || extents[0] * extents[1] * extents[2] > INT_MAX)
    throw RangeError("chunk grid '" + spec + "' has more than " + std::to_string(INT_MAX) + " chunks");
  return ChunkGrid{static_cast<int>(extents[0]), static_cast<int>(extents[1]), static_cast<int>(extents[2])};
}

std::string ChunkGrid::describe() const {
  return std::to_string(di) + "x" + std::to_string(dj) + "x" + std::to_string(dk);
}

// ---- communication graphs -----------------------------------------------

std::uint64_t CommGraph::total_bytes() const noexcept {
  std::uint64_t sum = 0;
  for (const CommEdge& e : edges) sum += e.bytes;
  return sum;
}

CommGraph stencil7_graph(const ChunkGrid& grid, std::array<std::uint64_t, 3> face_bytes, bool periodic) {
  if (grid.di < 1 || grid.dj < 1 || grid.dk < 1)
    throw ConfigError("chunk grid " + grid.describe() + ": every extent must be at least 1");
  if (grid.count() > INT_MAX) throw RangeError("chunk grid " + grid.describe() + " has more than 2^31-1 chunks");
  CommGraph g;
  g.chunks = static_cast<int>(grid.count());
  g.edges.reserve(static_cast<std::size_t>(g.chunks) * 6);
  const std::array<int, 3> extent{grid.di, grid.dj, grid.dk};
  for (int k = 0; k < grid.dk; ++k)
    for (int j = 0; j < grid.dj; ++j)
      for (int i = 0; i < grid.di; ++i) {
        const std::array<int, 3> at{i, j, k};
        const int self = grid.id(i, j, k);
        for (int axis = 0; axis < 3; ++axis)
          for (int step : {-1, +1}) {
            std::array<int, 3> to = at;
            to[axis] += step;
            if (to[axis] < 0 || to[axis] >= extent[axis]) {
              if (!periodic) continue;
              to[axis] = (to[axis] + extent[axis]) % extent[axis];
            }
            const int other = grid.id(to[0], to[1], to[2]);
            if (other != self) g.edges.push_back(CommEdge{self, other, face_bytes[static_cast<std::size_t>(axis)]});
          }
      }
  return g;
}

CommGraph stencil7_graph(const ChunkGrid& grid, std::uint64_t face_bytes, bool periodic) {
  return stencil7_graph(grid, {face_bytes, face_bytes, face_bytes}, periodic);
}

// ---- mappings -----------------------------------------------------------

MappingKind parse_mapping(const std::string& name) {
  if (name == "rnd") return MappingKind::random;
  if (name == "rr") return MappingKind::round_robin;
  if (name == "block") return MappingKind::block;
  if (name == "to") return MappingKind::topology_aware;
  throw ConfigError("unknown mapping '" + name + "'; expected rnd, rr, block or to");
}

std::string mapping_name(MappingKind kind) {
  switch (kind) {
    case MappingKind::random: return "rnd";
    case MappingKind::round_robin: return "rr";
    case MappingKind::block: return "block";
    case MappingKind::topology_aware: return "to";
  }
  return "?";
}

namespace {
void check_counts(std::int64_t chunks, int ranks) {
  if (ranks < 1) throw ConfigError("a mapping needs at least one rank, not " + std::to_string(ranks));
  if (chunks < 0 || chunks > INT_MAX)
    throw RangeError("a mapping places 0 to 2^31-1 chunks, not " + std::to_string(chunks));
}

// Chunks for the ranks at leaf positions [begin, end) when C chunks are dealt
// to P ranks as evenly as possible (the first C mod P positions get one more).
std::int64_t quota(std::int64_t chunks, int ranks, std::int64_t begin, std::int64_t end) {
  const std::int64_t base = chunks / ranks, extra = chunks % ranks;
  return base * (end - begin) + std::max<std::int64_t>(0, std::min(end, extra) - begin);
}
}  // namespace

Placement map_round_robin(std::int64_t chunks, int ranks) {
  check_counts(chunks, ranks);
  Placement p(static_cast<std::size_t>(chunks));
  for (std::int64_t c = 0; c < chunks; ++c) p[static_cast<std::size_t>(c)] = static_cast<int>(c % ranks);
  return p;
}

Placement map_block(std::int64_t chunks, int ranks) {
  check_counts(chunks, ranks);
  const std::int64_t base = chunks / ranks, extra = chunks % ranks;
  const std::int64_t fat_end = extra * (base + 1);  // the first `extra` ranks hold base + 1
  Placement p(static_cast<std::size_t>(chunks));
  for (std::int64_t c = 0; c < chunks; ++c)
    p[static_cast<std::size_t>(c)] =
        static_cast<int>(c < fat_end ? c / (base + 1) : extra + (c - fat_end) / std::max<std::int64_t>(base, 1));
  return p;
}

Placement map_random(std::int64_t chunks, int ranks, std::uint64_t seed) {
  Placement p = map_round_robin(chunks, ranks);  // balanced counts, then shuffled
  std::uint64_t state = seed;
  for (std::size_t i = p.size(); i > 1; --i) {  // Fisher-Yates with SplitMix64
    auto j = static_cast<std::size_t>((static_cast<unsigned __int128>(splitmix64(state)) * i) >> 64);
    std::swap(p[i - 1], p[j]);
  }
  return p;
}

namespace {
// Recursive coordinate bisection of chunks and ranks together.
class Bisection {
 public:
  Bisection(const ChunkGrid& grid, const NetworkTopology& topology, Placement& out)
      : topology_(topology), out_(out), chunks_(grid.count()) {
    // Pair chunk axes with network dimensions by extent, longest with
    // longest, once: cutting the same pairs at every level keeps each axis
    // on one dimension (a 16x8x8 grid lies along the 16 of an 8x8x16 torus).
    std::array<int, 3> axes{0, 1, 2};
    const std::array<int, 3> extent{grid.di, grid.dj, grid.dk};
    std::stable_sort(axes.begin(), axes.end(), [&](int a, int b) { return extent[a] > extent[b]; });
    std::vector<int> net(static_cast<std::size_t>(topology.network_dimensions()));
    std::iota(net.begin(), net.end(), 0);
    std::stable_sort(net.begin(), net.end(), [&](int a, int b) {
      return topology.dims()[static_cast<std::size_t>(a)] > topology.dims()[static_cast<std::size_t>(b)];
    });
    axis_of_dim_.assign(topology.dims().size(), -1);
    for (std::size_t n = 0; n < net.size() && n < axes.size(); ++n)
      axis_of_dim_[static_cast<std::size_t>(net[n])] = axes[n];
    const std::size_t n = static_cast<std::size_t>(grid.count());
    for (int axis = 0; axis < 3; ++axis) index_[axis].resize(n);
    for (std::size_t c = 0; c < n; ++c) {
      auto ijk = grid.index(static_cast<int>(c));
      for (int axis = 0; axis < 3; ++axis) index_[axis][c] = ijk[static_cast<std::size_t>(axis)];
    }
  }

  void run(std::span<int> chunk_ids, std::span<int> rank_ids, std::int64_t position) {
    if (rank_ids.size() == 1) {
      for (int c : chunk_ids) out_[static_cast<std::size_t>(c)] = rank_ids[0];
      return;
    }
    // Ranks: halve along the widest network dimension; once the set sits on
    // one node, along the first node-local dimension that still varies.
    const int dims = static_cast<int>(topology_.dims().size());
    int rank_dim = -1, widest = 0;
    for (int d = 0; d < dims; ++d) {
      auto [lo, hi] = spread(rank_ids, d);
      if (d < topology_.network_dimensions() ? hi - lo > widest : (rank_dim < 0 && hi > lo))
        rank_dim = d, widest = hi - lo;
    }
    const std::size_t half = rank_ids.size() / 2;
    std::nth_element(rank_ids.begin(), rank_ids.begin() + static_cast<std::ptrdiff_t>(half), rank_ids.end(),
                     [&](int a, int b) {
                       int ca = rank_dim < 0 ? 0 : topology_.coordinates(a)[static_cast<std::size_t>(rank_dim)];
                       int cb = rank_dim < 0 ? 0 : topology_.coordinates(b)[static_cast<std::size_t>(rank_dim)];
                       return ca != cb ? ca < cb : a < b;
                     });
    // Chunks: as many as the first half of the ranks is due, cut across the
    // axis paired with the ranks' cut, or the widest axis of their bounding
    // box when that one no longer varies.
    const auto first_chunks = static_cast<std::size_t>(
        quota(chunks_, topology_.ranks(), position, position + static_cast<std::int64_t>(half)));
    std::array<int, 3> chunk_spread{-1, -1, -1};
    for (int a = 0; a < 3 && !chunk_ids.empty(); ++a) {
      int lo = INT_MAX, hi = INT_MIN;
      for (int c : chunk_ids) {
        lo = std::min(lo, index_[a][static_cast<std::size_t>(c)]);
        hi = std::max(hi, index_[a][static_cast<std::size_t>(c)]);
      }
      chunk_spread[static_cast<std::size_t>(a)] = hi - lo;
    }
    int axis = rank_dim < 0 ? -1 : axis_of_dim_[static_cast<std::size_t>(rank_dim)];
    if (axis < 0 || chunk_spread[static_cast<std::size_t>(axis)] <= 0)
      axis = static_cast<int>(std::max_element(chunk_spread.begin(), chunk_spread.end()) - chunk_spread.begin());
    if (first_chunks > 0 && first_chunks < chunk_ids.size()) {
      const auto& key = index_[axis];
      std::nth_element(chunk_ids.begin(), chunk_ids.begin() + static_cast<std::ptrdiff_t>(first_chunks),
                       chunk_ids.end(), [&](int a, int b) {
                         int ka = key[static_cast<std::size_t>(a)], kb = key[static_cast<std::size_t>(b)];
                         return ka != kb ? ka < kb : a < b;
                       });
    }
    run(chunk_ids.first(first_chunks), rank_ids.first(half), position);
    run(chunk_ids.subspan(first_chunks), rank_ids.subspan(half), position + static_cast<std::int64_t>(half));
  }

 private:
  std::pair<int, int> spread(std::span<const int> rank_ids, int d) const {
    int lo = INT_MAX, hi = INT_MIN;
    for (int r : rank_ids) {
      int c = topology_.coordinates(r)[static_cast<std::size_t>(d)];
      lo = std::min(lo, c);
      hi = std::max(hi, c);
    }
    return {lo, hi};
  }

  const NetworkTopology& topology_;
  Placement& out_;
  std::int64_t chunks_;
  std::array<std::vector<int>, 3> index_;
  std::vector<int> axis_of_dim_;  // the chunk axis paired with each topology dimension, -1 for none
};
}  // namespace

Placement map_topology_aware(const ChunkGrid& grid, const NetworkTopology& topology) {
  check_counts(grid.count(), topology.ranks());
  Placement p(static_cast<std::size_t>(grid.count()), -1);
  std::vector<int> chunk_ids(p.size()), rank_ids(static_cast<std::size_t>(topology.ranks()));
  std::iota(chunk_ids.begin(), chunk_ids.end(), 0);
  std::iota(rank_ids.begin(), rank_ids.end(), 0);
  Bisection(grid, topology, p).run(chunk_ids, rank_ids, 0);
  return p;
}

Placement map_chunks(MappingKind kind, const ChunkGrid& grid, const NetworkTopology& topology, std::uint64_t seed) {
  switch (kind) {
    case MappingKind::random: return map_random(grid.count(), topology.ranks(), seed);
    case MappingKind::round_robin: return map_round_robin(grid.count(), topology.ranks());
    case MappingKind::block: return map_block(grid.count(), topology.ranks());
    case MappingKind::topology_aware: return map_topology_aware(grid, topology);
  }
  throw ConfigError("unknown mapping kind");
}

Placement read_placement(const std::string& path, std::int64_t chunks, int ranks) {
  check_counts(chunks, ranks);
  std::ifstream in(path);
  if (!in) throw SystemError("cannot open placement file " + path, errno);
  Placement p(static_cast<std::size_t>(chunks), -1);
  std::string line;
  std::int64_t line_number = 0, placed = 0;
  bool first_data = true;
  auto bad = [&](const std::string& why) {
    return FormatError(path + ":" + std::to_string(line_number) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++line_number;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::vector<std::int64_t> values;
    std::string word;
    while (fields >> word) {
      std::int64_t v = 0;
      auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
      if (ec != std::errc() || end != word.data() + word.size()) throw bad("'" + word + "' is not an integer");
      values.push_back(v);
    }
    if (values.empty()) continue;
    if (first_data && values.size() == 1) {  // SCOTCH's count line
      first_data = false;
      if (values[0] != chunks)
        throw bad("the mapping has " + std::to_string(values[0]) + " vertices for " + std::to_string(chunks) + " chunks");
      continue;
    }
    first_data = false;
    if (values.size() != 2) throw bad("expected 'chunk rank', found " + std::to_string(values.size()) + " numbers");
    if (values[0] < 0 || values[0] >= chunks)
      throw bad("chunk " + std::to_string(values[0]) + " is outside 0.." + std::to_string(chunks - 1));
    if (values[1] < 0 || values[1] >= ranks)
      throw bad("rank " + std::to_string(values[1]) + " is outside 0.." + std::to_string(ranks - 1));
    int& slot = p[static_cast<std::size_t>(values[0])];
    if (slot >= 0) throw bad("chunk " + std::to_string(values[0]) + " is placed twice");
    slot = static_cast<int>(values[1]);
    ++placed;
  }
  if (in.bad()) throw SystemError("cannot read placement file " + path, errno);
  if (placed != chunks) {
    auto missing = std::find(p.begin(), p.end(), -1) - p.begin();
    throw FormatError(path + ": " + std::to_string(chunks - placed) + " of " + std::to_string(chunks) +
                      " chunks are not placed (the first is chunk " + std::to_string(missing) + ")");
  }
  return p;
}

void write_placement(const Placement& placement, const std::string& path_in) {
  const OutputPath out = resolve_output_path(path_in);
  if (out.kind == OutputPath::Kind::directory) throw ConfigError(path_in + " is a directory; name a file");
  std::ostringstream text;
  text << "# chunk rank\n";
  for (std::size_t c = 0; c < placement.size(); ++c) text << c << ' ' << placement[c] << '\n';
  if (out.stream()) {
    OutputStream stream(out);
    stream.write(text.str());
    stream.close();
    return;
  }
  const std::string& path = out.path;  // a symbolic link's target: the link stays
  const std::string temporary = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out_file(temporary, std::ios::trunc);
    if (!out_file) throw SystemError("cannot create " + temporary, errno);
    out_file << text.str();
    out_file.flush();
    if (!out_file) {
      int err = errno;
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      throw SystemError("cannot write " + temporary, err);
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) {
    std::filesystem::remove(temporary, ec);
    throw Error("cannot rename " + temporary + " to " + path);
  }
}

void check_placement(const Placement& placement, std::int64_t chunks, int ranks) {
  if (static_cast<std::int64_t>(placement.size()) != chunks)
    throw RangeError("placement has " + std::to_string(placement.size()) + " entries for " + std::to_string(chunks) +
                     " chunks");
  for (std::size_t c = 0; c < placement.size(); ++c)
    if (placement[c] < 0 || placement[c] >= ranks)
      throw RangeError("placement puts chunk " + std::to_string(c) + " on rank " + std::to_string(placement[c]) +
                       ", outside ranks 0.." + std::to_string(ranks - 1));
}

// ---- quality ------------------------------------------------------------

namespace {
void check_inputs(const CommGraph& graph, const Placement& placement, const NetworkTopology& topology) {
  check_placement(placement, graph.chunks, topology.ranks());
  for (const CommEdge& e : graph.edges)
    if (e.from < 0 || e.from >= graph.chunks || e.to < 0 || e.to >= graph.chunks)
      throw RangeError("communication edge " + std::to_string(e.from) + " -> " + std::to_string(e.to) +
                       " names a chunk outside 0.." + std::to_string(graph.chunks - 1));
}
}  // namespace

MappingQuality evaluate(const CommGraph& graph, const Placement& placement, const NetworkTopology& topology) {
  check_inputs(graph, placement, topology);
  MappingQuality q;
  std::vector<std::uint64_t> load(static_cast<std::size_t>(topology.link_count()), 0);
  std::vector<std::int64_t> links;
  for (const CommEdge& e : graph.edges) {
    q.total_bytes += e.bytes;
    const int a = placement[static_cast<std::size_t>(e.from)], b = placement[static_cast<std::size_t>(e.to)];
    if (a == b) continue;
    q.hop_bytes += e.bytes * static_cast<std::uint64_t>(topology.hops(a, b));
    topology.route(a, b, links);
    for (std::int64_t l : links) load[static_cast<std::size_t>(l)] += e.bytes;
  }
  for (std::uint64_t l : load) q.max_link_load = std::max(q.max_link_load, l);
  return q;
}

std::uint64_t hop_bytes(const CommGraph& graph, const Placement& placement, const NetworkTopology& topology) {
  check_inputs(graph, placement, topology);
  std::uint64_t sum = 0;
  for (const CommEdge& e : graph.edges)
    sum += e.bytes * static_cast<std::uint64_t>(topology.hops(placement[static_cast<std::size_t>(e.from)],
                                                              placement[static_cast<std::size_t>(e.to)]));
  return sum;
}

std::uint64_t max_link_load(const CommGraph& graph, const Placement& placement, const NetworkTopology& topology) {
  return evaluate(graph, placement, topology).max_link_load;
}

}  // namespace tessera::chunks
