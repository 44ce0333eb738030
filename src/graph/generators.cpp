// Kronecker generator after the Graph500 specification (graph500.org, "Graph
// 500 Benchmark", R-MAT by Chakrabarti, Zhan and Faloutsos, SDM 2004) and the
// GAP Benchmark Suite's kron/urand inputs (Beamer, Asanovic and Patterson,
// arXiv:1508.03619). Counter-based randomness keeps it rank-count independent.
#include "tessera/graph/generators.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/splitmix64.hpp"

namespace tessera::graph {

namespace {

// A stateless hash: one SplitMix64 step from state z.
std::uint64_t mix64(std::uint64_t z) { return splitmix64(z); }

// The random stream of one candidate edge.
struct EdgeRandom {
  std::uint64_t state;
  EdgeRandom(std::uint64_t seed, std::uint64_t index) : state(mix64(seed * 0xd1b54a32d192ed03ull ^ mix64(index))) {}
  std::uint64_t next() { return mix64(state += 0x9e3779b97f4a7c15ull); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

// The least 53-bit x with x * 2^-53 >= p (EdgeRandom::uniform's scale).
std::uint64_t threshold53(double p) { return static_cast<std::uint64_t>(std::ceil(p * 0x1.0p53)); }

// Kronecker quadrant thresholds: A = 0.57, B = C = 0.19, D = 0.05.
struct KronThresholds {
  std::uint64_t b = threshold53(0.57), c = threshold53(0.76), d = threshold53(0.95);
};

// The unscrambled endpoints of Kronecker candidates [first, first + count)
// (no deletion): candidate_edge's kron case for eight candidates at once, one
// in each 64-bit lane of a vector (GCC's vector extension); the AVX-512
// clone multiplies eight lanes in one instruction. Generation is most of a
// generated graph's build.
using Lanes = std::uint64_t __attribute__((vector_size(64)));
__attribute__((target_clones("arch=x86-64-v4", "default"))) void kron_endpoints(
    std::uint64_t seed, int scale, const KronThresholds& t, std::uint64_t first, std::size_t count, std::uint64_t* u,
    std::uint64_t* v) {
  constexpr std::size_t kLanes = sizeof(Lanes) / sizeof(std::uint64_t);
  constexpr std::uint64_t kGamma = 0x9e3779b97f4a7c15ull;
  auto finish = [](Lanes& z) {  // SplitMix64's output function, in place
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
  };
  const Lanes tb = Lanes{} + t.b, tc = Lanes{} + t.c, td = Lanes{} + t.d;
  Lanes lane{};
  for (std::size_t j = 0; j < kLanes; ++j) lane[j] = j;
  for (std::size_t base = 0; base < count; base += kLanes) {
    Lanes state = lane + (first + base + kGamma);  // EdgeRandom(seed, first + base + j)
    finish(state);
    state = (state ^ seed * 0xd1b54a32d192ed03ull) + kGamma;
    finish(state);
    Lanes uu{}, vv{};
    for (int level = 0; level < scale; ++level) {  // EdgeRandom::next()
      state += kGamma;
      Lanes x = state + kGamma;
      finish(x);
      x >>= 11;
      const Lanes at_b = reinterpret_cast<Lanes>(x >= tb) & 1, at_c = reinterpret_cast<Lanes>(x >= tc) & 1,
                  at_d = reinterpret_cast<Lanes>(x >= td) & 1;
      uu = (uu << 1) | at_c;
      vv = (vv << 1) | ((at_b ^ at_c) | at_d);
    }
    for (std::size_t j = 0; j < kLanes && base + j < count; ++j) u[base + j] = uu[j], v[base + j] = vv[j];
  }
}

// A bijection on [0, 2^bits): odd multiply, xor-shift and add, three rounds,
// keyed by seed; the keys are computed once for the many ids of a batch.
struct BitScramble {
  std::uint64_t mask;
  unsigned shift;
  std::array<std::uint64_t, 3> key;
  BitScramble(unsigned bits, std::uint64_t seed)
      : mask(bits >= 64 ? ~0ull : (1ull << bits) - 1), shift(bits / 2 + 1) {
    for (std::uint64_t round = 0; round < key.size(); ++round) key[round] = mix64(seed + round);
  }
  std::uint64_t operator()(std::uint64_t v) const {
    for (std::uint64_t k : key) {
      v = (v * (k | 1)) & mask;
      v ^= v >> shift;
      v = (v + (k >> 17)) & mask;
    }
    return v;
  }
};

// permute_vertex's bijection on [0, n), its keys computed once.
struct VertexPermutation {
  std::uint64_t n;
  BitScramble scramble;
  VertexPermutation(std::uint64_t n, std::uint64_t seed)
      : n(n), scramble(n <= 1 ? 1u : static_cast<unsigned>(std::bit_width(n - 1)), seed) {}
  std::uint64_t operator()(std::uint64_t v) const {
    if (n <= 1) return v;
    do {  // cycle-walking keeps a bijection on [0, 2^bits) a bijection on [0, n)
      v = scramble(v);
    } while (v >= n);
    return v;
  }
};

std::uint64_t product(const std::vector<std::uint64_t>& d) {
  std::uint64_t p = 1;
  for (auto x : d) p *= x;
  return p;
}

}  // namespace

std::uint64_t permute_vertex(std::uint64_t v, std::uint64_t n, std::uint64_t seed) {
  return VertexPermutation(n, seed)(v);
}

GraphSpec GraphSpec::kronecker(int scale, int edge_factor, std::uint64_t seed) {
  GraphSpec s;
  s.kind = Kind::kron;
  s.scale = scale;
  s.edge_factor = edge_factor;
  s.seed = seed;
  s.permute = true;
  return s;
}
GraphSpec GraphSpec::uniform(int scale, int degree, std::uint64_t seed) {
  GraphSpec s = kronecker(scale, degree, seed);
  s.kind = Kind::urand;
  s.permute = false;
  return s;
}
GraphSpec GraphSpec::grid(std::vector<std::uint64_t> dims, std::uint64_t seed) {
  GraphSpec s;
  s.kind = Kind::grid;
  s.dims = std::move(dims);
  s.seed = seed;
  return s;
}

void GraphSpec::validate() const {
  if (kind != Kind::grid) {
    if (scale < 1 || scale > 40) throw ConfigError("scale " + std::to_string(scale) + " is outside 1..40");
    if (edge_factor < 1 || edge_factor > 1024)
      throw ConfigError("edge factor " + std::to_string(edge_factor) + " is outside 1..1024");
  } else {
    if (dims.size() != 2 && dims.size() != 3)
      throw ConfigError("a grid has 2 or 3 dimensions, got " + std::to_string(dims.size()));
    for (auto d : dims)
      if (d < 1 || d > (1ull << 31)) throw ConfigError("grid dimension " + std::to_string(d) + " is outside 1..2^31");
    if (product(dims) > (1ull << 40)) throw ConfigError("grid has more than 2^40 vertices");
  }
  if (!(delete_fraction >= 0.0 && delete_fraction < 1.0))
    throw ConfigError("delete fraction " + std::to_string(delete_fraction) + " is outside [0, 1)");
}

std::uint64_t GraphSpec::vertices() const {
  return kind == Kind::grid ? product(dims) : std::uint64_t{1} << scale;
}

std::uint64_t GraphSpec::candidate_edges() const {
  if (kind != Kind::grid) return vertices() * static_cast<std::uint64_t>(edge_factor);
  std::uint64_t total = 0, n = product(dims);
  for (auto d : dims) total += n / d * (d - 1);  // edges along each axis
  return total;
}

namespace {

// Candidate edge `index` of `g`, whose vertex count is n; `perm` scrambles
// the ids when the spec asks for it.
bool candidate_edge(const GraphSpec& g, std::uint64_t n, const VertexPermutation& perm, std::uint64_t index,
                    Edge& out) {
  using Kind = GraphSpec::Kind;
  const int scale = g.scale;
  const auto& dims = g.dims;
  EdgeRandom rng(g.seed, index);
  if (g.delete_fraction > 0 && rng.uniform() < g.delete_fraction) return false;
  switch (g.kind) {
    case Kind::kron: {
      // The quadrant of each level from one 53-bit draw, compared as an
      // integer with the thresholds uniform() < p would use (x * 2^-53 is
      // exact, so x * 2^-53 >= p exactly when x >= ceil(p * 2^53)): the same
      // graph as comparing doubles, without a mispredicted branch per level.
      static const KronThresholds t;
      std::uint64_t u = 0, v = 0;
      for (int level = 0; level < scale; ++level) {
        const std::uint64_t x = rng.next() >> 11;
        const std::uint64_t at_b = x >= t.b, at_c = x >= t.c, at_d = x >= t.d;
        u = (u << 1) | at_c;                     // C or D: the lower half
        v = (v << 1) | ((at_b ^ at_c) | at_d);   // B or D: the right half
      }
      out = {u, v};
      break;
    }
    case Kind::urand:
      out = {rng.next() & (n - 1), rng.next() & (n - 1)};
      break;
    case Kind::grid: {
      // Axis a's edges join x to x + stride(a), for x whose coordinate a is
      // not the last; indices run axis by axis.
      std::uint64_t rest = index, stride = 1;
      std::vector<std::uint64_t> strides(dims.size());
      for (std::size_t a = dims.size(); a-- > 0;) {
        strides[a] = stride;
        stride *= dims[a];
      }
      for (std::size_t a = 0; a < dims.size(); ++a) {
        std::uint64_t on_axis = n / dims[a] * (dims[a] - 1);
        if (rest >= on_axis) {
          rest -= on_axis;
          continue;
        }
        // rest enumerates (coordinates other than a, coordinate a < dims[a]-1).
        std::uint64_t inner = strides[a], outer = rest / (inner * (dims[a] - 1));
        std::uint64_t within = rest % (inner * (dims[a] - 1));
        std::uint64_t x = outer * inner * dims[a] + within;
        out = {x, x + inner};
        break;
      }
      break;
    }
  }
  if (g.permute) out = {perm(out.src), perm(out.dst)};
  return true;
}

}  // namespace

bool GraphSpec::edge(std::uint64_t index, Edge& out) const {
  const std::uint64_t n = vertices();
  return candidate_edge(*this, n, VertexPermutation(n, seed), index, out);
}

void GraphSpec::edges(std::uint64_t first, std::uint64_t last, std::vector<std::uint64_t>& src,
                      std::vector<std::uint64_t>& dst) const {
  const std::uint64_t n = vertices();
  const VertexPermutation perm(n, seed);
  if (kind == Kind::kron && delete_fraction == 0 && last > first) {
    const std::size_t at = src.size(), count = last - first;
    src.resize(at + count), dst.resize(at + count);
    kron_endpoints(seed, scale, KronThresholds{}, first, count, src.data() + at, dst.data() + at);
    if (permute)
      for (std::size_t k = at; k < at + count; ++k) src[k] = perm(src[k]), dst[k] = perm(dst[k]);
    return;
  }
  Edge e;
  for (std::uint64_t i = first; i < last; ++i)
    if (candidate_edge(*this, n, perm, i, e)) src.push_back(e.src), dst.push_back(e.dst);
}


std::string GraphSpec::describe() const {
  std::string s;
  if (kind == Kind::grid) {
    s = "grid ";
    for (std::size_t a = 0; a < dims.size(); ++a) {
      if (a) s += 'x';
      s += std::to_string(dims[a]);
    }
  } else {
    s = kind == Kind::kron ? "kron" : "urand";
    s += " scale ";
    s += std::to_string(scale);
    s += " ef ";
    s += std::to_string(edge_factor);
  }
  s += " seed ";
  s += std::to_string(seed);
  if (delete_fraction > 0) {
    s += " delete ";
    s += std::to_string(delete_fraction);
  }
  if (permute && kind != Kind::kron) s += " permuted";
  return s;
}

GraphSpec::Kind parse_graph_kind(const std::string& name) {
  if (name == "kron") return GraphSpec::Kind::kron;
  if (name == "urand") return GraphSpec::Kind::urand;
  if (name == "grid") return GraphSpec::Kind::grid;
  throw ConfigError("unknown graph kind '" + name + "' (expected kron, urand or grid)");
}

std::vector<std::uint64_t> parse_grid_dims(const std::string& text) {
  auto bad = [&] { return ConfigError("grid dimensions '" + text + "' are not ROWSxCOLS or XxYxZ (e.g. 100x100)"); };
  std::vector<std::uint64_t> dims;
  std::size_t at = 0;
  while (true) {
    std::size_t end = text.find('x', at);
    std::string part = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    // Digits only: stoull would take "-3" as a huge number and "5abc" as 5.
    if (part.empty() || part.size() > 19 || part.find_first_not_of("0123456789") != std::string::npos) throw bad();
    dims.push_back(std::stoull(part));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  if (dims.size() != 2 && dims.size() != 3) throw bad();
  return dims;
}

namespace {

// This rank's block of candidate edges, in batches. Every candidate is a
// pure function of its index, so a build's passes regenerate the block
// instead of holding it.
EdgeSource candidates_of(Runtime& rt, const GraphSpec& spec) {
  spec.validate();
  const auto indices = Distribution::block(spec.candidate_edges(), rt.size());
  const std::uint64_t first = indices.begin(rt.rank()), last = indices.end(rt.rank());
  return [spec, first, last](const EdgeSink& take) {
    constexpr std::uint64_t kBatch = 1 << 16;
    std::vector<std::uint64_t> src, dst;
    src.reserve(kBatch), dst.reserve(kBatch);
    for (std::uint64_t i = first; i < last;) {
      src.clear(), dst.clear();
      const std::uint64_t end = std::min(last, i + kBatch);
      spec.edges(i, end, src, dst);
      i = end;
      take(EdgeBatch{src, dst, {}});
    }
  };
}

// A generated graph is undirected and simple.
BuildOptions generated(std::function<void(const std::string&)> on_phase) {
  BuildOptions o;
  o.symmetrize = true;
  o.drop_self_loops = true;
  o.drop_duplicates = true;
  o.on_phase = std::move(on_phase);
  return o;
}

}  // namespace

EdgeList generate(Runtime& rt, const GraphSpec& spec, const StorageOptions& storage,
                  std::function<void(const std::string&)> on_phase) {
  auto o = generated(std::move(on_phase));
  o.storage = storage;
  return EdgeList::build(rt, spec.vertices(), false, candidates_of(rt, spec), o);
}

PackedGraph generate_packed(Runtime& rt, const GraphSpec& spec, const PackOptions& options,
                            std::function<void(const std::string&)> on_phase) {
  return PackedGraph::build(rt, spec.vertices(), false, candidates_of(rt, spec), generated(std::move(on_phase)), options);
}

}  // namespace tessera::graph
