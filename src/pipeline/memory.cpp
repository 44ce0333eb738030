// Memory guardrails (include/tessera/pipeline/memory.hpp; docs/memory.md).
#include "tessera/pipeline/memory.hpp"

#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessera/graph/format.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/read.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/storage/disk_tier.hpp"
#include "tessera/storage/storage.hpp"

namespace tessera::pipeline {

using nlohmann::json;

namespace {

// -- constants of the model (each one an array or a measured runtime cost) --

constexpr double kMiB = 1048576.0;
// A `tessera` rank before any graph: MPI (Open MPI's heap, its shared-memory
// transport), the runtime, the libraries' data. Measured: RssAnon of a rank
// at its first progress line, 7.0 to 8.2 MiB at 1, 2 and 4 ranks.
constexpr double kProcessRank = 7.5 * kMiB;
// Kokkos, Tpetra and Belos started in a rank (their own heap, the
// communicator's Teuchos wrappers), measured as the part of the solve's
// growth that no vertex count explains (1.0 MiB at 1 rank, kron 16-21).
constexpr double kTrilinosRank = 1.5 * kMiB;
// A batch of a build's edge source: 64 Ki sources and destinations (8 bytes
// each), and a parsed text batch likewise.
constexpr double kSourceBatch = 2.0 * 65536 * 8;
// Per-ghost cost of the operator over the edge arrays: the ghost's id in the
// ghost set (8 bytes; the import plan adds a few per owner) and its value (8).
// Measured: 15.7 to 16.5 B a ghost at 2 and 4 ranks, kron 19-21.
constexpr double kGhostBytes = 16;
// Relabelling ids (--relabel): the id -> vertex table and the sorted
// distinct ids, per distinct id.
constexpr double kRelabelBytes = 24;

// The aggregation buffer of one destination (TESSERA_AGG_BUFFER_BYTES).
double aggregation_buffer() {
  const char* set = std::getenv("TESSERA_AGG_BUFFER_BYTES");
  if (set && *set && std::string(set) != "auto") {
    try {
      return static_cast<double>(parse_bytes(set, "TESSERA_AGG_BUFFER_BYTES", std::uint64_t{1} << 40));
    } catch (const std::exception&) {
    }
  }
  return 65536.0;
}

std::string fixed(double x, int digits) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.*f", digits, x);
  return b;
}

// -- graph sizes ---------------------------------------------------------------

// The expectation of a Kronecker (R-MAT) graph of 2^scale vertices and
// edge_factor * 2^scale candidate edges (quadrants A = 0.57, B = C = 0.19,
// D = 0.05, graph/generators.hpp), symmetrized, loops and duplicates
// dropped: a cell of the adjacency matrix whose row and column take the
// quadrants (i of A, j of B, l of C, m of D) over the scale's bits is hit
// by a candidate with probability p = A^i B^j C^l D^m; an arc (u, v) is
// stored when the candidate (u, v) or (v, u) occurred. A vertex with k
// one-bits is an endpoint with probability (A+B)^(S-k) (C+D)^k as a
// source and the same as a destination (B = C).
struct KronExpectation {
  double arcs = 0, active = 0, loops = 0;
};
KronExpectation kron_expectation(int scale, int edge_factor, double kept = 1.0) {
  const double A = 0.57, B = 0.19, C = 0.19, D = 0.05;
  const double M = static_cast<double>(edge_factor) * std::ldexp(1.0, scale) * kept;
  KronExpectation e;
  auto lchoose = [](int n, int k) { return std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0); };
  for (int k = 0; k <= scale; ++k) {
    const double ps = std::pow(A + B, scale - k) * std::pow(C + D, k);
    const double pd = std::pow(A + C, scale - k) * std::pow(B + D, k);
    e.active += std::exp(lchoose(scale, k)) * -std::expm1(-M * (ps + pd));
  }
  for (int i = 0; i <= scale; ++i)
    for (int j = 0; i + j <= scale; ++j)
      for (int l = 0; i + j + l <= scale; ++l) {
        const int m = scale - i - j - l;
        const double lcells = std::lgamma(scale + 1.0) - std::lgamma(i + 1.0) - std::lgamma(j + 1.0) -
                              std::lgamma(l + 1.0) - std::lgamma(m + 1.0);
        const double p = std::pow(A, i) * std::pow(B, j) * std::pow(C, l) * std::pow(D, m);
        const double q = std::pow(A, i) * std::pow(C, j) * std::pow(B, l) * std::pow(D, m);
        if (j == 0 && l == 0) {
          e.loops += std::exp(lcells) * -std::expm1(-M * p);
          continue;
        }
        e.arcs += std::exp(lcells) * -std::expm1(-M * (p + q));
      }
  return e;
}

// Ghosts of one rank at P ranks for a Kronecker graph: a vertex of another
// rank is one of its ghosts when one of its d arcs' other ends lives there
// (probability 1/P each, Poisson in d).
double kron_ghosts(int scale, int edge_factor, int ranks) {
  const double A = 0.57, B = 0.19, C = 0.19, D = 0.05;
  const double M = static_cast<double>(edge_factor) * std::ldexp(1.0, scale);
  double g = 0;
  for (int k = 0; k <= scale; ++k) {
    const double degree = M * (std::pow(A + B, scale - k) * std::pow(C + D, k) +
                               std::pow(A + C, scale - k) * std::pow(B + D, k));
    g += std::exp(std::lgamma(scale + 1.0) - std::lgamma(k + 1.0) - std::lgamma(scale - k + 1.0)) *
         -std::expm1(-degree / ranks);
  }
  return g * (ranks - 1) / ranks;
}

std::uint64_t u64(double x) { return x <= 0 ? 0 : static_cast<std::uint64_t>(std::llround(x)); }

// Decimal digits of the largest id below n (most ids have as many).
double digits(std::uint64_t n) { return n > 1 ? std::floor(std::log10(static_cast<double>(n - 1))) + 1 : 1; }

unsigned id_bytes_for(std::uint64_t vertices) {
  return static_cast<unsigned>(graph::id_width_for(vertices));
}

// The first and last bytes of a text file: its header, the bytes per line
// and the largest id seen.
struct TextSample {
  std::string head;
  std::uint64_t lines = 0, bytes = 0, max_id = 0;
  int fields = 0;  // numbers on a data line
};
TextSample sample_text(const std::string& path, std::uint64_t size) {
  TextSample s;
  constexpr std::size_t kSample = 1 << 20;
  std::ifstream in(path, std::ios::binary);
  std::string buf(std::min<std::uint64_t>(size, kSample), '\0');
  in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
  buf.resize(static_cast<std::size_t>(in.gcount()));
  std::string tail;
  if (size > 2 * kSample) {
    in.clear();
    in.seekg(static_cast<std::streamoff>(size - kSample));
    tail.resize(kSample);
    in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
    tail.resize(static_cast<std::size_t>(in.gcount()));
    auto nl = tail.find('\n');
    tail = nl == std::string::npos ? std::string() : tail.substr(nl + 1);
  }
  s.head = buf.substr(0, 4096);
  auto scan = [&](const std::string& text, bool count) {
    std::istringstream lines(text);
    std::string line;
    std::uint64_t at = 0;
    while (std::getline(lines, line)) {
      at += line.size() + 1;
      if (at > text.size()) break;  // a line cut by the sample's end
      if (line.empty() || line[0] == '#' || line[0] == '%' || line[0] == 'c' || line[0] == 'p') continue;
      std::istringstream f(line);
      std::uint64_t id;
      int n = 0;
      while (n < 2 && f >> id) {
        s.max_id = std::max(s.max_id, id);
        ++n;
      }
      if (n < 2) continue;
      if (count) {
        ++s.lines;
        s.bytes += line.size() + 1;
        double rest;
        int more = 0;
        while (f >> rest) ++more;
        s.fields = std::max(s.fields, 2 + more);
      }
    }
  };
  scan(buf, true);
  scan(tail, false);
  return s;
}

// "1024 vertices, 10528 edges" of a "# tessera graph:" header.
bool tessera_header(const std::string& head, std::uint64_t& vertices, std::uint64_t& edges, bool& undirected,
                    bool& weighted) {
  const auto at = head.find("# tessera graph:");
  if (at != 0) return false;
  const std::string line = head.substr(0, head.find('\n'));
  undirected = line.find("undirected") != std::string::npos;
  weighted = line.find(" weighted") != std::string::npos && line.find("unweighted") == std::string::npos;
  auto number_before = [&](const std::string& word, std::uint64_t& out) {
    const auto end = line.find(word);  // the number ends where " vertices" starts
    if (end == std::string::npos || end < 1) return false;
    auto begin = line.find_last_not_of("0123456789", end - 1);
    begin = begin == std::string::npos ? 0 : begin + 1;
    if (begin >= end) return false;
    out = std::stoull(line.substr(begin, end - begin));
    return true;
  };
  return number_before(" vertices", vertices) && number_before(" edges", edges);
}

GraphSize size_of_file(const Input& in) {
  GraphSize s;
  s.relabel = in.relabel;
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto fmt = graph::format_of(in.path);
  // Only regular files are opened here: a FIFO (or a device) would block, and
  // is the reader's to take or refuse in its own words.
  auto regular = [](const fs::path& p) {
    std::error_code e;
    return fs::is_regular_file(p, e);
  };
  if (fmt == graph::FileFormat::binary || fs::is_directory(in.path, ec)) {
    if (!regular(fs::path(in.path) / "edgelist.json"))
      throw FormatError(in.path + ": its edgelist.json is not a regular file; no size to estimate");
    std::ifstream f(fs::path(in.path) / "edgelist.json");
    json j = json::parse(f, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw FormatError(in.path + ": no edgelist.json a size can be read from");
    s.vertices = j.value("vertices", std::uint64_t{0});
    s.arcs = s.build_arcs = j.value("arcs", std::uint64_t{0});
    s.directed = j.value("directed", true);
    s.weighted = j.value("weighted", false);
    s.id_bytes = j.value("id_type", std::string("uint32")) == "uint64" ? 8 : 4;
    s.exact = true;
    s.mapped = true;
    s.file_ranks = j.value("ranks", 0);
    s.basis = in.path + ": " + std::to_string(s.vertices) + " vertices, " + std::to_string(s.arcs) +
              " arcs (its edgelist.json)";
  } else if (in.path == "-") {
    throw ConfigError("standard input has no size to estimate from");
  } else if (!regular(in.path)) {
    throw FormatError(in.path + " is not a regular file; no size to estimate");
  } else if (fmt == graph::FileFormat::gapbs_serialized || fmt == graph::FileFormat::gapbs_weighted_serialized) {
    // GAPBS's serialized CSR: bool directed, int64 arcs, int64 vertices.
    std::ifstream f(in.path, std::ios::binary);
    unsigned char directed = 0;
    std::int64_t edges = 0, vertices = 0;
    f.read(reinterpret_cast<char*>(&directed), 1);
    f.read(reinterpret_cast<char*>(&edges), sizeof(edges));
    f.read(reinterpret_cast<char*>(&vertices), sizeof(vertices));
    if (!f || edges < 0 || vertices < 0) throw FormatError(in.path + ": no GAPBS header a size can be read from");
    s.vertices = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(vertices));
    s.directed = directed != 0 && !in.undirected;
    s.weighted = fmt == graph::FileFormat::gapbs_weighted_serialized && !in.pattern;
    s.arcs = s.build_arcs = static_cast<std::uint64_t>(edges) * (directed && in.undirected ? 2 : 1);
    s.id_bytes = id_bytes_for(s.vertices);
    s.basis = in.path + ": " + std::to_string(s.vertices) + " vertices, " + std::to_string(edges) +
              " arcs (its GAPBS header)";
  } else {
    const std::uint64_t size = fs::file_size(in.path, ec);
    if (ec) throw SystemError("cannot size " + in.path, ec.value());
    const TextSample t = sample_text(in.path, size);
    std::uint64_t vertices = 0, edges = 0;
    bool undirected = in.undirected || in.symmetric, weighted = false;
    bool listed_both = in.symmetric;  // the file lists both directions
    if (fmt == graph::FileFormat::matrix_market) {
      std::istringstream lines(t.head);
      std::string line;
      std::getline(lines, line);
      undirected = undirected || line.find("symmetric") != std::string::npos;
      weighted = line.find("pattern") == std::string::npos && !in.pattern;
      while (std::getline(lines, line) && (line.empty() || line[0] == '%')) {
      }
      std::istringstream size_line(line);
      std::uint64_t rows = 0, cols = 0;
      size_line >> rows >> cols >> edges;
      vertices = std::max(rows, cols);
      s.basis = in.path + ": " + std::to_string(edges) + " entries (its size line)";
    } else if (fmt == graph::FileFormat::dimacs || fmt == graph::FileFormat::metis) {
      // DIMACS: "p sp N M" (M arcs, directed, weighted); METIS: "n m [fmt]"
      // after '%' comments (m edges, listed at both ends: undirected).
      std::istringstream lines(t.head);
      std::string line;
      while (std::getline(lines, line)) {
        if (line.empty() || line[0] == '%' || line[0] == 'c') continue;
        std::istringstream f(line);
        if (fmt == graph::FileFormat::dimacs) {
          std::string p, sp;
          if (!(f >> p >> sp >> vertices >> edges) || p != "p") continue;
          weighted = !in.pattern;
        } else {
          int format = 0;
          f >> vertices >> edges >> format;
          weighted = format % 10 == 1 && !in.pattern;
          undirected = true;
        }
        break;
      }
      s.basis = in.path + ": " + std::to_string(vertices) + " vertices, " + std::to_string(edges) +
                (fmt == graph::FileFormat::dimacs ? " arcs" : " edges") + " (its header)";
    } else if (bool hu = false, hw = false; tessera_header(t.head, vertices, edges, hu, hw)) {
      undirected = undirected || hu;
      weighted = hw && !in.pattern;
      s.basis = in.path + ": " + std::to_string(vertices) + " vertices, " + std::to_string(edges) +
                " edges (its tessera header)";
    } else {
      const double per_line = t.lines ? static_cast<double>(t.bytes) / static_cast<double>(t.lines) : 4.0;
      edges = u64(static_cast<double>(size) / std::max(per_line, 4.0));
      vertices = t.max_id + 1;
      weighted = (t.fields >= 3 || fmt == graph::FileFormat::weighted_edge_list) && !in.pattern;
      s.basis = in.path + ": " + human_bytes(static_cast<double>(size)) + ", ~" + std::to_string(edges) +
                " edges at " + fixed(per_line, 1) + " bytes a line (sampled)";
    }
    if (in.base > 0 || fmt == graph::FileFormat::matrix_market) vertices = std::max<std::uint64_t>(vertices, 1);
    if (in.relabel) vertices = std::min<std::uint64_t>(std::max<std::uint64_t>(vertices, 1), 2 * edges + 1);
    // Ids whose vertex arrays could not be held are the reader's to refuse
    // (it says to --relabel): sized as if relabelled, so its message comes.
    if (!in.relabel && !graph::vertex_arrays_problem(vertices, edges).empty())
      vertices = std::min<std::uint64_t>(vertices, 2 * edges + 1);
    s.vertices = std::max<std::uint64_t>(vertices, 1);
    s.directed = !undirected;
    s.weighted = weighted;
    // An undirected file lists an edge once (both ways with --symmetric or
    // a header that says so): its arcs are twice the edges.
    const bool header_both = s.basis.find("tessera header") != std::string::npos && undirected;
    listed_both = listed_both || header_both;
    s.arcs = undirected ? (listed_both ? (header_both ? 2 * edges : edges) : 2 * edges) : edges;
    s.build_arcs = s.arcs;
    s.id_bytes = id_bytes_for(s.vertices);
  }
  s.active = s.largest = s.vertices;
  s.largest_arcs = s.arcs;
  return s;
}

}  // namespace

double GraphSize::ghosts_per_rank(int ranks, bool largest_only) const {
  if (ranks <= 1) return 0;
  if (kron_scale > 0) return kron_ghosts(kron_scale, kron_edge_factor, ranks);
  const double n = static_cast<double>(largest_only ? largest : vertices);
  const double m = static_cast<double>(largest_only ? largest_arcs : arcs);
  if (n <= 0) return 0;
  return n * (ranks - 1) / ranks * -std::expm1(-(m / n) / ranks);
}

GraphSize size_of_input(const Input& in) {
  if (!in.path.empty()) return size_of_file(in);
  const graph::GraphSpec spec = spec_of(in);
  GraphSize s;
  s.vertices = spec.vertices();
  s.id_bytes = id_bytes_for(s.vertices);
  const double kept = 1.0 - spec.delete_fraction;
  const double candidates = static_cast<double>(spec.candidate_edges()) * kept;
  const double n = static_cast<double>(s.vertices);
  if (spec.kind == graph::GraphSpec::Kind::kron) {
    const auto e = kron_expectation(spec.scale, spec.edge_factor, kept);
    s.arcs = u64(e.arcs);
    s.build_arcs = u64(2 * (candidates - e.loops));
    s.active = s.largest = u64(e.active);
    s.largest_arcs = s.arcs;
    if (kept == 1.0) s.kron_scale = spec.scale, s.kron_edge_factor = spec.edge_factor;
    s.basis = spec.describe() + ": R-MAT expectation of " + std::to_string(s.arcs) + " arcs, " +
              std::to_string(s.active) + " vertices with edges";
  } else if (spec.kind == graph::GraphSpec::Kind::urand) {
    // Endpoints uniform: a cell is hit with probability 1/n^2 per candidate.
    s.build_arcs = u64(2 * candidates * (1 - 1 / n));
    s.arcs = u64(n * (n - 1) * -std::expm1(-2 * candidates / (n * n)));
    s.active = s.largest = u64(n * -std::expm1(-2 * candidates / n));
    s.largest_arcs = s.arcs;
    s.basis = spec.describe() + ": " + std::to_string(s.arcs) + " arcs expected";
  } else {
    s.build_arcs = s.arcs = u64(2 * candidates);
    s.active = s.largest = s.vertices;
    s.largest_arcs = s.arcs;
    s.basis = spec.describe() + ": " + std::to_string(s.arcs) + " arcs" + (kept < 1 ? " expected" : "");
  }
  return s;
}

GraphSize size_of_graph(const graph::EdgeList& g, std::uint64_t largest, bool connected) {
  return size_of_graph(json{{"vertices", g.vertices()},
                            {"arcs", g.arcs()},
                            {"directed", g.directed()},
                            {"weighted", g.weighted()},
                            {"id_bytes", g.id_bytes()},
                            {"largest", largest},
                            {"connected", connected}});
}

GraphSize size_of_graph(const json& j) {
  GraphSize s;
  s.vertices = j.value("vertices", std::uint64_t{0});
  s.arcs = s.build_arcs = j.value("arcs", std::uint64_t{0});
  s.directed = j.value("directed", false);
  s.weighted = j.value("weighted", false);
  s.id_bytes = j.value("id_bytes", 0u);
  if (s.id_bytes != 4 && s.id_bytes != 8) s.id_bytes = id_bytes_for(s.vertices);
  s.connected = j.value("connected", false);
  const std::uint64_t largest = j.value("largest", std::uint64_t{0});
  s.largest_known = largest != 0 || s.connected;
  s.active = s.vertices;
  s.largest = s.connected ? s.vertices : largest ? std::min(largest, s.vertices) : s.vertices;
  // A component's arcs are not known before it is extracted: at most the graph's.
  s.largest_arcs = s.arcs;
  s.exact = true;
  s.basis = std::to_string(s.vertices) + " vertices, " + std::to_string(s.arcs) + " arcs";
  return s;
}

GraphSize size_of_edges(std::uint64_t edges, std::uint64_t vertices, bool undirected, bool weighted, bool relabel) {
  GraphSize s;
  s.vertices = vertices ? vertices : std::max<std::uint64_t>(1, relabel ? 2 * edges : edges);
  s.arcs = s.build_arcs = undirected ? 2 * edges : edges;
  s.active = s.largest = s.vertices;
  s.largest_arcs = s.arcs;
  s.id_bytes = id_bytes_for(s.vertices);
  s.weighted = weighted;
  s.directed = !undirected;
  s.relabel = relabel;
  s.exact = vertices != 0;
  s.basis = std::to_string(edges) + " edges sent";
  return s;
}

std::uint64_t MemoryItem::on_node(int ranks, int ranks_on_node) const {
  const double share = ranks > 0 ? static_cast<double>(ranks_on_node) / ranks : 1.0;
  return u64(spread * share + per_rank * ranks_on_node + per_node);
}

namespace {

using Place = MemoryItem::Place;

// Bytes an arc of a packed graph's rows (PackedGraph: a LEB128 code a
// neighbour's difference, the degree and the first neighbour a row),
// conservative. Kronecker graphs of edge factor 16 (their hubs, numbered
// first, take most arcs: small differences) by a fit of the measured
// bytes per undirected edge: 2.43 (scale 14), 2.61 (16), 2.90 (18), 3.26
// (20), 3.36 (21), 3.47 (22), growing 0.11 a scale from 20 on, taken as
// 3.47 + 0.13 a scale from 22 (at least 2.6), plus 5%. Any other graph as if
// each row's neighbours were spread uniformly (a uniform graph's case, the
// worst a mean degree d gives): a difference is exponential of mean n/d,
// and its code takes 1 + sum over k >= 1 of exp(-2^(7k) d/n) bytes; plus 2
// bytes a vertex (its degree and first neighbour), at most the id width + 1.
double packed_bytes_per_arc(const GraphSize& g) {
  const double n = static_cast<double>(std::max<std::uint64_t>(g.vertices, 1));
  const double m = static_cast<double>(g.arcs);
  if (m <= 0) return 1;
  if (g.kron_scale > 0 && g.kron_edge_factor == 16)
    return 1.05 * std::max(2.6, 3.47 + 0.13 * (g.kron_scale - 22)) / 2;
  const double mean_gap = n / (m / n);
  double bytes = 1;
  for (int k = 1; k < 10; ++k) bytes += std::exp(-std::ldexp(1.0, 7 * k) / mean_gap);
  return std::min(bytes + 2 * n / m, g.id_bytes + 1.0);
}

// Builds a command's phases: `shared_graph` puts the graph's arrays in
// Shared storage, `shared_arrays` every DistArray (the session's layout).
class Model {
 public:
  Model(const MemoryContext& c) : c_(c), P_(std::max(1, c.ranks)), buffer_(aggregation_buffer()) {}

  Place graph_place() const { return c_.session || c_.graph_shared ? Place::shared : Place::memory; }
  Place array_place() const { return c_.session ? Place::shared : Place::memory; }
  double P() const { return P_; }
  // Aggregators alive at once, each a buffer per destination rank.
  double aggregators(int count) const { return P_ > 1 ? count * buffer_ * P_ : 0; }

  std::vector<MemoryItem> process() const {
    std::vector<MemoryItem> v;
    if (!c_.session) v.push_back({"the ranks' runtime (MPI, libraries)", 0, kProcessRank, 0, Place::memory});
    return v;
  }

  // A graph's arrays: offsets, destinations, weights.
  void graph_arrays(std::vector<MemoryItem>& v, const std::string& what, double n, double arcs, unsigned idb,
                    bool weighted, Place place) const {
    v.push_back({what + " offsets (8 B a vertex)", 8 * (n + P_), 0, 0, place});
    v.push_back({what + " destinations (" + std::to_string(idb) + " B an arc)", idb * arcs, 0, 0, place});
    if (weighted) v.push_back({what + " weights (8 B an arc)", 8 * arcs, 0, 0, place});
  }

  // A build's placing pass (its peak): the final arrays at the arcs counted,
  // the row cursors, the staged fill's blocks, the placing aggregator and
  // the source's batch (EdgeList::build).
  std::vector<MemoryItem> build(const std::string& what, double n, double build_arcs, unsigned idb, bool weighted,
                                Place place, double source_bytes) const {
    std::vector<MemoryItem> v;
    graph_arrays(v, what, n, build_arcs, idb, weighted, place);
    v.push_back({"row cursors (8 B a vertex)", 8 * n, 0, 0, Place::memory});
    const double arc_bytes = idb + (weighted ? 8 : 0);
    const double per_row = (n > 0 ? build_arcs * arc_bytes / n : 0) + 16;
    const double per_block = std::bit_floor(std::max<std::uint64_t>(1, u64(512.0 * 1024 / per_row)));
    v.push_back({"staged fill blocks", n / per_block * 256 * (2 * idb + (weighted ? 8 : 0)), 0, 0, Place::memory});
    v.push_back({"edge source batches", 0, source_bytes, 0, Place::memory});
    if (P_ > 1) v.push_back({"aggregation buffers (placing arcs)", 0, aggregators(1), 0, Place::memory});
    return v;
  }

  // A graph's components (graph/components.hpp) and their summary: the labels and the algorithm's working arrays.
  std::vector<MemoryItem> components(const GraphSize& g, const std::string& algorithm) const {
    std::vector<MemoryItem> v;
    const double n = static_cast<double>(g.vertices);
    v.push_back({"component labels (8 B a vertex)", 8 * n, 0, 0, array_place()});
    if (algorithm == "lp") {
      v.push_back({"label propagation: next labels, pieces, flags (17 B a vertex)", 17 * n, 0, 0, Place::memory});
    } else if (algorithm == "fastsv") {
      v.push_back({"FastSV: grandparents and their next values (16 B a vertex)", 16 * n, 0, 0, array_place()});
      v.push_back({"FastSV: neighbours' grandparents (16 B a vertex)", 16 * n, 0, 0, Place::memory});
      v.push_back({"FastSV: ghosts' grandparents (8 B a ghost)", 0, 8 * g.ghosts_per_rank(P_, false), 0,
                   Place::memory});
    } else if (P_ > 1 && c_.ranks_on_node == P_) {
      v.push_back({"Afforest: node-shared parents (" + std::to_string(g.id_bytes) + " B a vertex, once a node)", 0, 0,
                   g.id_bytes * n, Place::memory});
      v.push_back({"Afforest: sample flags (1 B a vertex)", n, 0, 0, Place::memory});
    } else {
      v.push_back({"Afforest: local forest, sample and tag flags (6 B a vertex)", 6 * n, 0, 0, Place::memory});
      v.push_back({"Afforest: cut arcs outside the giant (16 B each)",
                   16 * static_cast<double>(g.arcs - std::min(g.arcs, g.largest_arcs)), 0, 0, Place::memory});
    }
    if (P_ > 1) v.push_back({"aggregation buffers", 0, aggregators(1), 0, Place::memory});
    return v;
  }

  // The components' summary (graph::summarize): the labels and a count per
  // label. After Afforest within each rank (one rank, or several nodes) its
  // working arrays are freed but the heap keeps most of their pages (measured).
  std::vector<MemoryItem> summary(const GraphSize& g, const std::string& algorithm) const {
    const double n = static_cast<double>(g.vertices);
    std::vector<MemoryItem> v{{"component labels (8 B a vertex)", 8 * n, 0, 0, array_place()},
                              {"component sizes (8 B a vertex)", 8 * n, 0, 0, array_place()}};
    if ((algorithm.empty() || algorithm == "afforest") && !(P_ > 1 && c_.ranks_on_node == P_))
      v.push_back({"Afforest's working arrays, freed (6 B a vertex the heap keeps)", 6 * n, 0, 0, Place::memory});
    if (P_ > 1) v.push_back({"aggregation buffers (counting)", 0, aggregators(1), 0, Place::memory});
    return v;
  }

  // The largest component: in place (the graph's own arrays compacted) or
  // copied out (`copy`). The labels, the kept flags, the new ids and the
  // original id of every kept vertex.
  std::vector<MemoryItem> largest(const GraphSize& g, bool copy) const {
    std::vector<MemoryItem> v;
    const double n = static_cast<double>(g.vertices), L = static_cast<double>(g.largest);
    v.push_back({"component labels (8 B a vertex)", 8 * n, 0, 0, array_place()});
    // The summary's counts go before the flags are made, but the heap keeps
    // most of their pages: counted (measured 22-23 B a vertex in all).
    v.push_back({"component sizes (summary, 8 B a vertex)", 8 * n, 0, 0, array_place()});
    v.push_back({"kept flags (1 B a vertex)", n, 0, 0, Place::memory});
    v.push_back({"new ids (" + std::to_string(g.id_bytes) + " B a vertex)", g.id_bytes * n, 0, 0, Place::memory});
    v.push_back({"original ids of the component (8 B a vertex of it)", 8 * L, 0, 0, array_place()});
    if (copy)
      graph_arrays(v, "the component's", L, static_cast<double>(g.largest_arcs), g.id_bytes, g.weighted,
                   graph_place());
    if (P_ > 1) v.push_back({"aggregation buffers (reading new ids)", 0, aggregators(2), 0, Place::memory});
    return v;
  }

  // Hitting times on a graph of n vertices (Laplacian and solver vectors).
  std::vector<MemoryItem> hitting(const GraphSize& g, bool on_largest, const AnalysisOptions& a) const {
    std::vector<MemoryItem> v;
    const double n = static_cast<double>(on_largest ? g.largest : g.vertices);
    const double arcs = static_cast<double>(on_largest ? g.largest_arcs : g.arcs);
    const bool belos = a.solver == "belos";
    v.push_back({"hitting times, degrees, true residual (3 vectors, 8 B a vertex each)", 24 * n, 0, 0,
                 array_place()});
    v.push_back({"grounded and unreachable flags (2 B a vertex)", 2 * n, 0, 0, Place::memory});
    if (belos) {
      v.push_back({"Belos CG: R, Z, P, AP and Ifpack2's inverse diagonal (5 vectors, 8 B a vertex each)", 40 * n, 0,
                   0, Place::memory});
      v.push_back({"Kokkos, Tpetra and Belos in each rank", 0, kTrilinosRank, 0, Place::memory});
    } else {
      v.push_back({"Tessera's CG: r, z, p, q, the inverse diagonal and the masked input (6 vectors)", 48 * n, 0, 0,
                   array_place()});
    }
    const double ghosts = g.ghosts_per_rank(P_, on_largest);
    if (P_ > 1) {
      v.push_back({"ghost values and their import plan (" + fixed(kGhostBytes, 0) + " B a ghost)", 0,
                   kGhostBytes * ghosts, 0, Place::memory});
      v.push_back({"ghost slots (a bit and a count per id spanned)", 0, n / 4, 0, Place::memory});
    }
    if (a.matrix == "crs")
      v.push_back({"the CrsMatrix copy (12 B an entry, 8 B a row)", 12 * (arcs + n) + 8 * n, 0, 0, Place::memory});
    return v;
  }

  // Anasazi's eigenpair (fiedler, centrality): a block of vectors.
  std::vector<MemoryItem> spectral(const GraphSize& g, const AnalysisOptions& a) const {
    std::vector<MemoryItem> v;
    const double n = static_cast<double>(g.vertices);
    const double vectors = a.eigensolver == "krylov-schur" ? a.subspace + 4 : 16;
    v.push_back({"Anasazi's basis and work vectors (" + fixed(vectors, 0) + " vectors)", 8 * vectors * n, 0, 0,
                 Place::memory});
    v.push_back({"Kokkos, Tpetra and Anasazi in each rank", 0, kTrilinosRank, 0, Place::memory});
    if (P_ > 1)
      v.push_back({"ghost values and their import plan", 0, kGhostBytes * g.ghosts_per_rank(P_, false), 0,
                   Place::memory});
    return v;
  }

  // PageRank: GAPBS's pull over in-arcs through an index of places.
  std::vector<MemoryItem> pagerank(const GraphSize& g, const PageRankSettings& s) const {
    std::vector<MemoryItem> v;
    const double n = static_cast<double>(g.vertices), m = static_cast<double>(g.arcs);
    const double ghosts = g.ghosts_per_rank(P_, false);
    const bool single = s.tolerance >= 1e-6;
    const double value = single ? 4 : 8;
    if (P_ > 1 || g.directed) {
      v.push_back({"PageRank index: in-arc rows (8 B a vertex)", 8 * n, 0, 0, Place::memory});
      v.push_back({"PageRank index: in-arc places (4 B an arc)", 4 * m, 0, 0, Place::memory});
    }
    v.push_back({"scores (8 B a vertex)", 8 * n, 0, 0, array_place()});
    v.push_back({"contributions (" + fixed(value, 0) + " B a vertex), busy rows (4 B)", (value + 4) * n, 0, 0,
                 Place::memory});
    if (P_ > 1)
      v.push_back({"ghosts' contributions and the values asked of this rank", 0, (value + 4) * 2 * ghosts, 0,
                   Place::memory});
    if (s.method == "jacobi") v.push_back({"next scores (8 B a vertex)", 8 * n, 0, 0, Place::memory});
    if (!s.personalize.empty()) v.push_back({"teleport vector (8 B a vertex)", 8 * n, 0, 0, Place::memory});
    if (g.directed) v.push_back({"out-degrees (8 B a vertex)", 8 * n, 0, 0, Place::memory});
    return v;
  }

  // A text output (graph/write.cpp): each rank formats its part in memory
  // (a string reserved at `reserve` bytes a line, grown when the lines are
  // longer) and writes a copy of it.
  std::vector<MemoryItem> text(const std::string& what, double lines, double per_line, double reserve) const {
    return {{what + ": its text in memory (" + fixed(per_line, 0) + " B a line, reserved at " + fixed(reserve, 0) +
                 ", and its copy)",
             lines * (std::max(per_line, reserve) + per_line), 0, 0, Place::memory}};
  }

  // -- the packed form (graph::PackedGraph) ------------------------------------

  // A packed graph's arrays: its rows (`per_arc` bytes an arc), byte offsets
  // and its vertices' ids in the graph packed.
  void packed_arrays(std::vector<MemoryItem>& v, const std::string& what, double n, double arcs, double per_arc,
                     Place place) const {
    v.push_back({what + " rows (byte codes, " + fixed(per_arc, 2) + " B an arc)", per_arc * arcs, 0, 0, place});
    v.push_back({what + " byte offsets (8 B a vertex)", 8 * (n + P_), 0, 0, place});
    v.push_back({what + " vertices' ids in the graph packed (8 B a vertex)", 8 * n, 0, 0, place});
  }

  // PackedGraph::build (and pack, which builds from an EdgeList's rows), its
  // two peaks: numbering the vertices by degree (the arcs counted a vertex,
  // their new owner's copy, the new ids, the original ids and the numbering
  // copied to every rank), and the last window of rows placed (the rows
  // packed so far, all of them at the last window, the window of ids, the
  // numbering, the rows' cursors and offsets; the window's ids are given
  // back before the rows are copied into their array, one window's rows at
  // a time). The window is what fill_window_arcs gives as each window
  // starts: half the node's memory then available, so at the last window,
  // with the rows packed before it held, half of what the rows leave
  // (TESSERA_FILL_WINDOW_BYTES a rank), at most
  // the arcs the source gives (`from_source`: before loops and duplicates
  // are dropped; an EdgeList packed gives its own).
  std::pair<std::vector<MemoryItem>, std::vector<MemoryItem>> packed_build(const GraphSize& g, double per_arc,
                                                                           Place place, bool from_source) const {
    const double n = static_cast<double>(g.vertices), m = static_cast<double>(g.arcs);
    const double m0 = from_source ? static_cast<double>(std::max(g.build_arcs, g.arcs)) : m;
    const std::string id = std::to_string(g.id_bytes);
    std::vector<MemoryItem> numbering, windows;
    numbering.push_back({"packing: the arcs counted a vertex and at its new owner (16 B a vertex)", 16 * n, 0, 0,
                         Place::memory});
    numbering.push_back({"packing: the new ids (" + id + " B a vertex)", g.id_bytes * n, 0, 0, Place::memory});
    numbering.push_back({"packed vertices' ids in the graph packed (8 B a vertex)", 8 * n, 0, 0, place});
    const MemoryItem copy{"packing: the numbering, a copy on every rank (" + id + " B a vertex)", 0, g.id_bytes * n,
                          0, Place::memory};
    numbering.push_back(copy);
    double window = g.id_bytes * m0 * c_.ranks_on_node / P_;  // this node's share of the arcs
    if (const char* set = std::getenv("TESSERA_FILL_WINDOW_BYTES"); set && *set) {
      try {
        window = std::min(window, static_cast<double>(parse_bytes(set, "TESSERA_FILL_WINDOW_BYTES",
                                                                  std::uint64_t{1} << 50)) * c_.ranks_on_node);
      } catch (const std::exception&) {
      }
    } else {
      const double rows = per_arc * m * c_.ranks_on_node / P_;  // this node's packed rows
      window = std::min(window, std::max(0.0, static_cast<double>(available_memory_bytes()) - rows) / 2);
    }
    windows.push_back(copy);
    windows.push_back({"packing: the rows' cursors and arc offsets (16 B a vertex)", 16 * n, 0, 0, Place::memory});
    windows.push_back({"packing: a window of rows' ids (" + id + " B an arc, at most half the node's memory "
                       "available as it starts)", 0, 0, window, Place::memory});
    packed_arrays(windows, "packed", n, m, per_arc, place);
    for (auto* v : {&numbering, &windows}) {
      v->push_back({"edge source batches", 0, kSourceBatch, 0, Place::memory});
      if (P_ > 1) v->push_back({"aggregation buffers (placing arcs)", 0, aggregators(1), 0, Place::memory});
    }
    return {numbering, windows};
  }

  // check_labels (--verify): the far ends' labels of a block of arcs (at
  // least 2^20 a rank), the reached flags, the frontier, the arrivals, and
  // on every rank a bit per vertex of those told.
  std::vector<MemoryItem> verify(const GraphSize& g) const {
    const double n = static_cast<double>(g.vertices);
    std::vector<MemoryItem> v{{"component labels (8 B a vertex)", 8 * n, 0, 0, array_place()},
                              {"component sizes (summary, 8 B a vertex, kept by the heap)", 8 * n, 0, 0,
                               Place::memory},
                              {"the verifier: far ends' labels, frontier, arrivals (24 B a vertex, 8 MiB a rank at "
                               "least), reached flags (1 B)",
                               25 * n, 8.0 * (1 << 20), 0, Place::memory},
                              {"the verifier: a bit per vertex on every rank", 0, n / 8, 0, Place::memory}};
    if (P_ > 1) v.push_back({"aggregation buffers (reading labels)", 0, aggregators(1), 0, Place::memory});
    return v;
  }

  // The largest component of a packed graph in its own arrays: the labels
  // and their summary's counts, the kept vertices' bitmap with their counts
  // on every rank (n/8 + n/56 bytes), and the component's new -> old ids.
  std::vector<MemoryItem> packed_largest(const GraphSize& g) const {
    const double n = static_cast<double>(g.vertices), L = static_cast<double>(g.largest);
    return {{"component labels (8 B a vertex)", 8 * n, 0, 0, array_place()},
            {"component sizes (summary, 8 B a vertex, kept by the heap)", 8 * n, 0, 0, Place::memory},
            {"the kept vertices' bitmap and counts, on every rank (n/8 + n/56 bytes)", 0, n / 8 + n / 56, 0,
             Place::memory},
            {"the component's ids in the packed graph (8 B a vertex of it)", 8 * L, 0, 0, array_place()}};
  }

  std::vector<MemoryItem> bfs(const GraphSize& g) const {
    std::vector<MemoryItem> v;
    const double n = static_cast<double>(g.vertices);
    v.push_back({"parents and depths (16 B a vertex)", 16 * n, 0, 0, array_place()});
    v.push_back({"frontier and next frontier (at most 16 B a vertex)", 16 * n, 0, 0, Place::memory});
    v.push_back({"found and fresh bits", n / 4, 0, 0, Place::memory});
    if (P_ > 1) {
      v.push_back({"the gathered frontier bitmap (n/8 bytes, twice, on every rank)", 0, n / 4, 0, Place::memory});
      v.push_back({"aggregation buffers", 0, aggregators(1), 0, Place::memory});
    }
    return v;
  }

 private:
  MemoryContext c_;
  int P_;
  double buffer_;
};

void append(std::vector<MemoryItem>& to, const std::vector<MemoryItem>& more) { to.insert(to.end(), more.begin(), more.end()); }

// The graph a CLI command loads, as resident arrays (after its build).
std::vector<MemoryItem> loaded(const Model& m, const GraphSize& g, Place place) {
  std::vector<MemoryItem> v;
  m.graph_arrays(v, "graph", static_cast<double>(g.vertices), static_cast<double>(g.arcs), g.id_bytes, g.weighted,
                 place);
  return v;
}

// The phase that makes the graph (generate, read, from_edges).
MemoryPhase make_phase(const Model& m, const std::string& command, const GraphSize& g, bool symmetrize, Place place) {
  MemoryPhase p;
  if (g.mapped && !symmetrize) {
    p.name = "mapping " + command;  // the files are mapped in place: page cache, nothing new
    return p;
  }
  const double n = static_cast<double>(g.vertices);
  const double build_arcs = static_cast<double>(symmetrize && g.directed ? 2 * g.build_arcs : g.build_arcs);
  p.name = command;
  p.items = m.build("the graph's", n, build_arcs, g.id_bytes, g.weighted, place, kSourceBatch);
  if (g.relabel) p.items.push_back({"relabelling: each distinct id and its vertex (24 B)", kRelabelBytes * n, 0, 0, Place::memory});
  return p;
}

// A directed graph symmetrized: a second build while the first is held.
MemoryPhase symmetrize_phase(const Model& m, const GraphSize& g, Place place) {
  MemoryPhase sym = make_phase(m, "symmetrize", g, true, place);
  append(sym.items, loaded(m, g, place));
  return sym;
}

// g's sizes once symmetrized: twice the arcs (a build before cleaning, the
// largest component's bound too), undirected.
void symmetrized(GraphSize& g) {
  g.arcs *= 2;
  g.build_arcs = g.arcs;
  g.largest_arcs = g.arcs;
  g.directed = false;
}

MemoryPhase with(MemoryPhase p, const std::vector<MemoryItem>& more) {
  append(p.items, more);
  return p;
}

MemoryEstimate finish(MemoryEstimate e, const MemoryContext& c, const Model& m) {
  e.ranks = c.ranks;
  e.ranks_on_node = c.ranks_on_node;
  for (auto& p : e.phases) append(p.items, m.process());
  bool first = true;
  for (const auto& p : e.phases) {
    std::uint64_t shared = 0, other = 0;
    for (const auto& i : p.items)
      (i.place == Place::shared ? shared : other) += i.on_node(c.ranks, c.ranks_on_node);
    if (first || shared + other > e.bytes) e.bytes = shared + other, e.peak_phase = p.name;
    if (first || shared > e.shared_bytes) e.shared_bytes = shared, e.shared_phase = p.name;
    e.private_bytes = std::max(e.private_bytes, other);
    first = false;
  }
  return e;
}

std::string solver_of(const AnalysisOptions& a) {
  AnalysisOptions r = a;
  if (r.solver.empty()) r.solver = default_solver();
  return r.solver;
}

}  // namespace

namespace {

// The phase that writes a command's text output (-o), the graph's arrays
// still held: a graph (gen, convert, lcc) as edge-list or Matrix Market
// lines, else "vertex value" lines and the file id of every vertex.
void write_phase(MemoryEstimate& e, const Model& m, const Options& o, const std::string& command,
                 const GraphSize& g, const std::vector<MemoryItem>& held) {
  if (o.output.empty() || graph::format_of(o.output) == graph::FileFormat::binary) return;
  MemoryPhase p{"write", held};
  const bool graph_out = command == "gen" || command == "convert" || command == "lcc";
  const double n = static_cast<double>(command == "lcc" || command == "pipeline" ? g.largest : g.vertices);
  if (graph_out) {
    const bool mtx = graph::format_of(o.output) == graph::FileFormat::matrix_market;
    const double arcs = static_cast<double>(command == "lcc" ? g.largest_arcs : g.arcs);
    const double lines = mtx && !g.directed ? arcs / 2 : arcs;
    append(p.items, m.text("the output graph", lines, 2 * digits(g.vertices) + 2 + (g.weighted ? 18 : 0), 16));
    if (command == "lcc") append(p.items, m.text("the id map", n, 2 * digits(g.vertices) + 2, 24));
  } else {
    const double per_line = digits(g.vertices) + (command == "cc" ? digits(g.vertices) + 2 : 20);
    append(p.items, m.text("the output", n, per_line, 24));
    p.items.push_back({"file ids of the lines (8 B a vertex)", 8 * n, 0, 0, Place::memory});
  }
  e.phases.push_back(std::move(p));
}

// The pipeline with --packed (Options::packed): the graph loaded into an
// EdgeList and packed (or, for an input packs_from_source() names, built
// packed from its source, no EdgeList), then every stage on the packed
// arrays (pipeline::load_packed, run_pipeline).
MemoryEstimate packed_pipeline(MemoryEstimate e, const Model& m, const Options& o, GraphSize g,
                               const AnalysisOptions& a) {
  const Place gp = m.graph_place();
  const std::string load = o.input.path.empty() ? "generate" : "read";
  const bool from_source = packs_from_source(o.input);
  std::vector<MemoryItem> ids;  // the file's ids (--relabel), held to the end
  if (g.relabel)
    ids.push_back({"the file's ids (--relabel, 8 B a vertex)", 8 * static_cast<double>(g.vertices), 0, 0,
                   Place::memory});
  std::vector<MemoryItem> edge_list;  // held while it is packed
  if (!from_source) e.phases.push_back(make_phase(m, load, g, false, gp));
  if (g.directed) {
    if (!from_source) e.phases.push_back(symmetrize_phase(m, g, gp));
    symmetrized(g);
    g.mapped = false;
    e.graph = g;
  }
  if (!from_source && !g.mapped) edge_list = loaded(m, g, gp);
  const double n = static_cast<double>(g.vertices), L = static_cast<double>(g.largest);
  const double per_arc = packed_bytes_per_arc(g);
  auto [numbering, windows] = m.packed_build(g, per_arc, gp, from_source);
  const std::string pack = from_source ? load : "pack";
  e.phases.push_back(with(with({pack + ": numbering by degree", numbering}, edge_list), ids));
  e.phases.push_back(with(with({pack, windows}, edge_list), ids));
  std::vector<MemoryItem> packed = ids;
  m.packed_arrays(packed, "packed", n, static_cast<double>(g.arcs), per_arc, gp);
  e.phases.push_back(with({"components", m.components(g, "afforest")}, packed));
  if (o.verify) e.phases.push_back(with({"verify", m.verify(g)}, packed));
  e.phases.push_back(with({"largest component", m.packed_largest(g)}, packed));
  GraphSize l = g;
  l.vertices = l.largest;
  l.arcs = l.largest_arcs;
  std::vector<MemoryItem> lcc = ids;
  m.packed_arrays(lcc, "the component's packed", L, static_cast<double>(l.arcs), per_arc, gp);
  lcc.push_back({"the component's file ids (8 B a vertex)", 8 * L, 0, 0, Place::memory});
  if (spectral_kind(a.kind)) e.phases.push_back(with(MemoryPhase{a.kind, m.spectral(l, a)}, lcc));
  else e.phases.push_back(with(MemoryPhase{"hitting times", m.hitting(g, true, a)}, lcc));
  lcc.push_back({"the answer (8 B a vertex)", 8 * L, 0, 0, m.array_place()});
  lcc.push_back({"the answer in the file's order: a value and a flag a vertex of the graph (9 B), the lines' ids "
                 "and values (24 B a vertex of the component)",
                 9 * n + 24 * L, 0, 0, Place::memory});
  write_phase(e, m, o, "pipeline", g, lcc);
  return e;
}

bool edge_list_array(const MemoryItem& i) {
  return i.name.starts_with("graph offsets") || i.name.starts_with("graph destinations");
}

// bfs and pagerank --packed (the CLI's): the graph read, then packed while
// the EdgeList is held (the pack phases), the kernel and the writing on the
// packed arrays in place of the EdgeList's (the writing also the answer put
// back in the file's order, at most 16 B a vertex). A directed graph is
// refused once read: its estimate stays the plain run's.
void packed_kernel(MemoryEstimate& e, const Model& m, const GraphSize& g) {
  if (g.directed) return;
  const auto kernel = std::find_if(e.phases.begin(), e.phases.end(), [&](const auto& p) { return p.name == e.command; });
  if (kernel == e.phases.end()) return;
  const double n = static_cast<double>(g.vertices);
  const double per_arc = packed_bytes_per_arc(g);
  std::vector<MemoryItem> packed, edge_list;
  m.packed_arrays(packed, "packed", n, static_cast<double>(g.arcs), per_arc, Place::memory);
  for (const auto& i : kernel->items)
    if (edge_list_array(i)) edge_list.push_back(i);
  auto [numbering, windows] = m.packed_build(g, per_arc, Place::memory, false);
  for (auto p = kernel; p != e.phases.end(); ++p) {
    std::erase_if(p->items, edge_list_array);
    append(p->items, packed);
    if (p->name == "write")
      p->items.push_back({"the answer in the file's vertex order (at most 16 B a vertex)", 16 * n, 0, 0,
                          Place::memory});
  }
  const auto at = e.phases.insert(kernel, with({"pack", windows}, edge_list));
  e.phases.insert(at, with({"pack: numbering by degree", numbering}, edge_list));
}

}  // namespace

MemoryEstimate estimate_command(const std::string& command, const Options& o, const MemoryContext& c) {
  MemoryContext where = c;
  AnalysisOptions a = o.analysis;
  a.solver = solver_of(a);
  where.trilinos = (command == "hitting" || command == "pipeline") && a.solver == "belos";
  if (command == "pipeline") where.graph_shared = true;
  const Model m(where);
  GraphSize g = size_of_input(o.input);
  // A .tsg is mapped in place with its own rank count (its files: page
  // cache, not memory to find); else copied into this job's arrays.
  g.mapped = g.mapped && g.file_ranks == c.ranks;
  MemoryEstimate e;
  e.command = command;
  e.graph = g;
  e.what = input_name(o.input);
  if (command == "pipeline" && o.packed) return finish(packed_pipeline(e, m, o, g, a), where, m);
  const Place gp = m.graph_place();
  const bool symmetrize = o.input.undirected || command == "hitting" || command == "pipeline";
  MemoryPhase make = make_phase(m, o.input.path.empty() ? "generate" : "read", g, false, gp);
  e.phases.push_back(make);
  if (command == "gen" || command == "convert") {
    write_phase(e, m, o, command, g, loaded(m, g, gp));
    return finish(e, where, m);
  }
  if (g.directed && symmetrize) {
    // A directed graph symmetrized (a second build while the first is held).
    e.phases.push_back(symmetrize_phase(m, g, gp));
    symmetrized(g);
    e.graph = g;
  }
  const auto graph = g.mapped ? std::vector<MemoryItem>{} : loaded(m, g, gp);
  if (command == "cc") {
    if (g.directed && o.algorithm != "afforest") {
      MemoryPhase sym = with(make_phase(m, "symmetrize", g, true, Place::memory), graph);
      e.phases.push_back(sym);
    }
    e.phases.push_back(with(MemoryPhase{"components", m.components(g, o.algorithm == "all" ? "fastsv" : o.algorithm)},
                            graph));
    e.phases.push_back(with(MemoryPhase{"summary", m.summary(g, o.algorithm)}, graph));
    std::vector<MemoryItem> held = graph;
    held.push_back({"component labels (8 B a vertex)", 8 * static_cast<double>(g.vertices), 0, 0, m.array_place()});
    write_phase(e, m, o, command, g, held);
    return finish(e, where, m);
  }
  if (command == "lcc" || command == "pipeline") {
    e.phases.push_back(with(MemoryPhase{"components", m.components(g, o.algorithm)}, graph));
    if (command == "pipeline" && o.verify) e.phases.push_back(with(MemoryPhase{"verify", m.verify(g)}, graph));
    // In place, unless the graph is another's files mapped: then copied out.
    e.phases.push_back(with(MemoryPhase{"largest component", m.largest(g, g.mapped)}, graph));
    if (command == "lcc") {
      std::vector<MemoryItem> held;
      m.graph_arrays(held, "the component's", static_cast<double>(g.largest), static_cast<double>(g.largest_arcs),
                     g.id_bytes, g.weighted, gp);
      held.push_back({"original ids of the component (8 B a vertex of it)", 8 * static_cast<double>(g.largest), 0, 0,
                      Place::memory});
      write_phase(e, m, o, command, g, held);
      return finish(e, where, m);
    }
    GraphSize l = g;
    l.vertices = l.largest;
    l.arcs = l.largest_arcs;
    std::vector<MemoryItem> lcc;
    m.graph_arrays(lcc, "the component's", static_cast<double>(l.vertices), static_cast<double>(l.arcs), l.id_bytes,
                   l.weighted, gp);
    lcc.push_back({"the component's file ids (8 B a vertex)", 8 * static_cast<double>(l.vertices), 0, 0,
                   Place::memory});
    if (spectral_kind(a.kind)) e.phases.push_back(with(MemoryPhase{a.kind, m.spectral(l, a)}, lcc));
    else e.phases.push_back(with(MemoryPhase{"hitting times", m.hitting(g, true, a)}, lcc));
    lcc.push_back({"the answer (8 B a vertex)", 8 * static_cast<double>(l.vertices), 0, 0, m.array_place()});
    write_phase(e, m, o, command, g, lcc);
    return finish(e, where, m);
  }
  if (command == "hitting") {
    e.phases.push_back(with(MemoryPhase{"reachability (FastSV)", m.components(g, "fastsv")}, graph));
    e.phases.push_back(with(MemoryPhase{"hitting times", m.hitting(g, false, a)}, graph));
    std::vector<MemoryItem> held = graph;
    held.push_back({"the hitting times (8 B a vertex)", 8 * static_cast<double>(g.vertices), 0, 0, m.array_place()});
    write_phase(e, m, o, command, g, held);
    return finish(e, where, m);
  }
  if (command == "pagerank" || command == "bfs") {
    std::vector<MemoryItem> base = graph;
    if (g.directed && (command == "pagerank" || o.bfs.direction != "top-down")) {
      MemoryPhase t = with(make_phase(m, "transpose", g, false, Place::memory), graph);
      e.phases.push_back(t);
      append(base, loaded(m, g, Place::memory));
    }
    e.phases.push_back(with(command == "pagerank" ? MemoryPhase{"pagerank", m.pagerank(g, o.pagerank)}
                                                  : MemoryPhase{"bfs", m.bfs(g)},
                            base));
    std::vector<MemoryItem> held = graph;
    held.push_back({"the answer (" + std::string(command == "bfs" ? "16" : "8") + " B a vertex)",
                    (command == "bfs" ? 16 : 8) * static_cast<double>(g.vertices), 0, 0, m.array_place()});
    write_phase(e, m, o, command, g, held);
    if (o.packed) packed_kernel(e, m, g);
    return finish(e, where, m);
  }
  if (command == "spectral") {
    e.phases.push_back(with(MemoryPhase{"spectral", m.spectral(g, a)}, graph));
    std::vector<MemoryItem> held = graph;
    held.push_back({"the vector (8 B a vertex)", 8 * static_cast<double>(g.vertices), 0, 0, m.array_place()});
    write_phase(e, m, o, command, g, held);
    return finish(e, where, m);
  }
  throw ConfigError("no memory estimate for the command " + command);
}

MemoryEstimate estimate_restore(const GraphSize& graphs, double other_bytes, const MemoryContext& c) {
  const Model m(c);
  MemoryEstimate e;
  e.command = "restore";
  e.graph = graphs;
  e.what = "the save";
  MemoryPhase p{"restore", graphs.vertices ? loaded(m, graphs, m.graph_place()) : std::vector<MemoryItem>{}};
  if (other_bytes > 0) p.items.push_back({"the saved results' arrays", other_bytes, 0, 0, m.array_place()});
  e.phases.push_back(std::move(p));
  return finish(e, c, m);
}

MemoryEstimate estimate_on(const std::string& command, const GraphSize& given, const Options& o,
                           const MemoryContext& c) {
  GraphSize g = given;
  g.mapped = g.mapped && g.file_ranks == c.ranks;  // a .tsg of another rank count is copied
  MemoryContext where = c;
  AnalysisOptions a = o.analysis;
  a.solver = solver_of(a);
  const Model m(where);
  MemoryEstimate e;
  e.command = command;
  e.graph = g;
  e.what = command;
  const Place gp = m.graph_place();
  if (command == "generate" || command == "read_graph" || command == "from_edges") {
    e.what = command == "generate" ? input_name(o.input) : command == "read_graph" ? o.input.path : "from_edges";
    e.phases.push_back(make_phase(m, command, g, o.input.undirected, gp));
    if (command == "from_edges")  // on the node where the edges were sent (rank 0's), beside the parts received
      e.phases.back().items.push_back({"the edges sent, joined into one array each and as unsigned ids for the build "
                                       "(32 B an edge, 40 weighted)",
                                       0, 0,
                                       (g.weighted ? 40.0 : 32.0) * static_cast<double>(g.directed ? g.arcs : g.arcs / 2),
                                       Place::memory});
    if (g.directed && o.input.undirected && command != "generate") {
      // read --undirected: a directed file symmetrized while read (one build of both directions)
      e.phases.back() = make_phase(m, command, g, true, gp);
    }
    return finish(e, where, m);
  }
  if (command == "components" || command == "cc") {
    std::vector<MemoryPhase> ps;
    if (g.directed && o.algorithm != "afforest" && o.algorithm != "") {
      e.phases.push_back(make_phase(m, "symmetrize", g, true, Place::memory));
    }
    e.phases.push_back({"components", m.components(g, o.algorithm.empty() ? "afforest" : o.algorithm)});
    e.phases.push_back({"summary", m.summary(g, o.algorithm)});
    return finish(e, where, m);
  }
  if (command == "largest_component") {
    // Components unless given (their labels then already resident), the
    // component copied out, then rebalanced: a build of its arcs.
    std::vector<MemoryItem> labels_kept;
    if (!g.largest_known) {  // no components given: labelled here
      e.phases.push_back({"components", m.components(g, o.algorithm.empty() ? "afforest" : o.algorithm)});
    }
    e.phases.push_back({"largest component", m.largest(g, true)});
    std::vector<MemoryItem> copy;
    m.graph_arrays(copy, "the component copy", static_cast<double>(g.largest), static_cast<double>(g.largest_arcs),
                   g.id_bytes, g.weighted, gp);
    copy.push_back({"original ids of the component (8 B a vertex of it)", 8 * static_cast<double>(g.largest), 0, 0,
                    m.array_place()});
    e.phases.push_back(with({"rebalance", m.build("the component's", static_cast<double>(g.largest),
                                                  static_cast<double>(g.largest_arcs), g.id_bytes, g.weighted, gp,
                                                  kSourceBatch)},
                            copy));
    return finish(e, where, m);
  }
  if (command == "hitting_times" || command == "hitting") {
    if (!g.connected || g.directed) {
      // A graph not known to be connected: FastSV finds who reaches a target.
      e.phases.push_back({"reachability (FastSV)", m.components(g, "fastsv")});
    }
    GraphSize h = g;
    if (g.directed) {
      e.phases.push_back(make_phase(m, "symmetrize", g, true, gp));
      h.arcs *= 2;
    }
    h.largest = h.vertices;
    h.largest_arcs = h.arcs;
    e.phases.push_back({"hitting times", m.hitting(h, false, a)});
    return finish(e, where, m);
  }
  if (command == "pagerank" || command == "bfs") {
    std::vector<MemoryItem> base;
    if (g.directed && (command == "pagerank" || o.bfs.direction != "top-down")) {
      e.phases.push_back(make_phase(m, "transpose", g, false, Place::memory));
      base = loaded(m, g, Place::memory);
    }
    e.phases.push_back(with(command == "pagerank" ? MemoryPhase{"pagerank", m.pagerank(g, o.pagerank)}
                                                  : MemoryPhase{"bfs", m.bfs(g)},
                            base));
    return finish(e, where, m);
  }
  if (command == "spectral") {
    e.phases.push_back({"spectral", m.spectral(g, a)});
    return finish(e, where, m);
  }
  throw ConfigError("no memory estimate for the command " + command);
}

json MemoryEstimate::to_json() const {
  json phases_json = json::array();
  for (const auto& p : phases) {
    json items = json::array();
    std::uint64_t sum = 0;
    for (const auto& i : p.items) {
      const auto b = i.on_node(ranks, ranks_on_node);
      sum += b;
      items.push_back({{"name", i.name}, {"bytes", b}, {"shared", i.place == MemoryItem::Place::shared}});
    }
    phases_json.push_back({{"name", p.name}, {"bytes", sum}, {"items", std::move(items)}});
  }
  return {{"what", what},
          {"command", command},
          {"ranks", ranks},
          {"ranks_on_node", ranks_on_node},
          {"peak_phase", peak_phase},
          {"shared_phase", shared_phase},
          {"bytes", bytes},
          {"shared_bytes", shared_bytes},
          {"private_bytes", private_bytes},
          {"graph",
           {{"vertices", graph.vertices},
            {"arcs", graph.arcs},
            {"build_arcs", graph.build_arcs},
            {"largest", graph.largest},
            {"largest_arcs", graph.largest_arcs},
            {"id_bytes", graph.id_bytes},
            {"weighted", graph.weighted},
            {"directed", graph.directed},
            {"exact", graph.exact},
            {"basis", graph.basis}}},
          {"phases", std::move(phases_json)}};
}

// -- the node ---------------------------------------------------------------------

namespace {

std::uint64_t meminfo(const char* key) {
  std::ifstream f("/proc/meminfo");
  std::string name;
  std::uint64_t kib = 0;
  std::string unit;
  while (f >> name >> kib) {
    std::getline(f, unit);
    if (name == key) return kib * 1024;
  }
  return 0;
}

std::uint64_t read_number(const std::filesystem::path& p, bool& ok) {
  std::ifstream f(p);
  std::string text;
  ok = static_cast<bool>(f >> text);
  if (!ok || text == "max") {
    ok = false;
    return 0;
  }
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    ok = false;
    return 0;
  }
}

// The smallest memory limit along this process's cgroup path (v2, or v1's
// memory controller), and the usage where it is set.
void cgroup_limit(NodeResources& r) {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  std::string v2, v1;
  while (std::getline(f, line)) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty() && line.compare(0, 2, "0:") == 0) v2 = path;
    std::istringstream list(controllers);
    std::string c;
    while (std::getline(list, c, ','))
      if (c == "memory") v1 = path;
  }
  namespace fs = std::filesystem;
  auto walk = [&](const fs::path& root, const std::string& path, const char* limit_file, const char* usage_file) {
    fs::path p = root / fs::path(path).relative_path();
    std::error_code ec;
    while (true) {
      bool ok = false;
      const std::uint64_t limit = read_number(p / limit_file, ok);
      // v1 reports "no limit" as a number near 2^63.
      if (ok && limit > 0 && limit < (std::uint64_t{1} << 60) && (r.cgroup_limit == 0 || limit < r.cgroup_limit)) {
        bool used = false;
        r.cgroup_limit = limit;
        r.cgroup_usage = read_number(p / usage_file, used);
      }
      if (p == root || !p.has_parent_path() || !fs::exists(p.parent_path(), ec)) break;
      p = p.parent_path();
      if (p.string().size() < root.string().size()) break;
    }
  };
  if (!v1.empty() && std::filesystem::exists("/sys/fs/cgroup/memory"))
    walk("/sys/fs/cgroup/memory", v1, "memory.limit_in_bytes", "memory.usage_in_bytes");
  if (!v2.empty() && std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers"))
    walk("/sys/fs/cgroup", v2, "memory.max", "memory.current");
}

}  // namespace

std::uint64_t NodeResources::usable() const noexcept {
  std::uint64_t u = available;
  if (cgroup_limit) u = std::min(u, cgroup_limit > cgroup_usage ? cgroup_limit - cgroup_usage : 0);
  return u;
}

std::uint64_t NodeResources::capacity() const noexcept {
  return cgroup_limit && cgroup_limit < total ? cgroup_limit : total;
}

NodeResources node_resources(const std::string& dir) {
  NodeResources r;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  r.host = host;
  r.shm_dir = dir.empty() ? default_shared_dir() : dir;
  r.total = meminfo("MemTotal:");
  r.available = meminfo("MemAvailable:");
  cgroup_limit(r);
  struct statvfs v {};
  if (::statvfs(r.shm_dir.c_str(), &v) == 0) r.shm_free = static_cast<std::uint64_t>(v.f_bavail) * v.f_frsize;
  struct statfs f {};
  if (::statfs(r.shm_dir.c_str(), &f) == 0) r.shm_in_memory = is_memory_file_system(static_cast<unsigned long>(f.f_type));
  return r;
}

std::uint64_t MemoryLimit::of(const NodeResources& node) const {
  if (none) return ~std::uint64_t{0};
  if (bytes) return bytes;
  return u64(fraction * static_cast<double>(node.capacity()));
}

std::string MemoryLimit::describe(const NodeResources& node) const {
  if (none) return "none";
  if (bytes) return human_bytes(static_cast<double>(bytes));
  return human_bytes(static_cast<double>(of(node))) + " = " + fixed(fraction * 100, fraction * 100 == std::floor(fraction * 100) ? 0 : 1) +
         "% of the node's " + human_bytes(static_cast<double>(node.capacity())) +
         (node.cgroup_limit && node.cgroup_limit < node.total ? " (its cgroup's limit)" : "");
}

MemoryLimit parse_memory_limit(const std::string& given) {
  MemoryLimit l;
  std::string t = given;
  t.erase(0, t.find_first_not_of(" \t"));
  t.erase(t.find_last_not_of(" \t") + 1);
  t.erase(std::remove(t.begin(), t.end(), ' '), t.end());  // "20 GiB" as "20GiB"
  if (t.empty() || t == "default") return l;
  if (t == "none" || t == "off" || t == "inf") {
    l.none = true;
    return l;
  }
  auto bad = [&] {
    return ConfigError("memory limit '" + given + "' is not a fraction of the node's memory (0.9 or 90%), a byte "
                       "count (20G, 21474836480) or none");
  };
  if (t.back() == '%') {
    try {
      std::size_t used = 0;
      const double p = std::stod(t.substr(0, t.size() - 1), &used);
      if (used != t.size() - 1 || !(p > 0 && p <= 100)) throw bad();
      l.fraction = p / 100;
      return l;
    } catch (const std::invalid_argument&) {
      throw bad();
    }
  }
  if (t.find('.') != std::string::npos && t.find_first_not_of("0123456789.") == std::string::npos) {
    const double f = std::stod(t);
    if (f > 0 && f <= 1) {
      l.fraction = f;
      return l;
    }
    if (f > 1 && f == std::floor(f)) {
      l.bytes = static_cast<std::uint64_t>(f);
      return l;
    }
    throw bad();
  }
  if (t == "1") {
    l.fraction = 1.0;
    return l;
  }
  try {
    l.bytes = parse_bytes(t, "memory limit", std::uint64_t{1} << 62);
  } catch (const ConfigError&) {
    throw bad();
  }
  return l;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) bytes /= 1024, ++u;
  return (u == 0 ? std::to_string(static_cast<long long>(bytes)) : fixed(bytes, 1)) + " " + units[u];
}

std::uint64_t node_memory_in_use(Runtime& rt) {
  const std::uint64_t mine = anonymous_memory_bytes() + shared_memory_pss_bytes();
  return all_reduce<std::uint64_t>(rt.node().comm, mine, MPI_SUM);
}

namespace {

// The biggest arrays of the peak phase, for the message.
std::string top_items(const MemoryEstimate& e, const std::string& phase) {
  for (const auto& p : e.phases) {
    if (p.name != phase) continue;
    std::vector<std::pair<std::uint64_t, std::string>> items;
    for (const auto& i : p.items) items.emplace_back(i.on_node(e.ranks, e.ranks_on_node), i.name);
    std::sort(items.rbegin(), items.rend());
    std::string out;
    for (std::size_t k = 0; k < items.size() && k < 3; ++k)
      if (items[k].first > 0) out += (out.empty() ? "" : ", ") + items[k].second + " " + human_bytes(static_cast<double>(items[k].first));
    return out;
  }
  return {};
}

}  // namespace

json check_memory(Runtime& rt, const MemoryEstimate& e, const MemoryLimit& limit, bool count_in_use) {
  const std::uint64_t in_use = count_in_use ? node_memory_in_use(rt) : 0;
  const NodeResources node = node_resources();
  std::string problem;
  const bool leader = rt.node().rank == 0;
  const std::uint64_t need_memory = e.memory_bytes(node.shm_in_memory);
  const std::uint64_t usable = node.usable(), cap = limit.of(node);
  if (leader) {
    const bool shared_short = e.shared_bytes > node.shm_free;
    const bool memory_short = need_memory > usable;
    const bool over_limit = !limit.none && in_use + need_memory > cap;
    if (shared_short || memory_short || over_limit) {
      std::string what = e.what.empty() ? e.command : e.what;
      std::string m = what + " needs ";
      std::vector<std::string> outs;
      if (shared_short) {
        m += human_bytes(static_cast<double>(e.shared_bytes)) + " of Shared storage on node " + node.host + " (" +
             human_bytes(static_cast<double>(node.shm_free)) + " free in " + node.shm_dir + ")";
        if (node.shm_in_memory) outs.push_back("set TESSERA_SHM_DIR to a disk (--shm-dir DIR)");
        else outs.push_back("free space in " + node.shm_dir + " or set TESSERA_SHM_DIR to a larger disk");
      }
      if (memory_short || over_limit) {
        if (shared_short) m += " and ";
        m += human_bytes(static_cast<double>(need_memory)) + " of memory" +
             (shared_short ? std::string() : " on node " + node.host) + " (";
        m += human_bytes(static_cast<double>(usable)) + " available";
        if (node.cgroup_limit)
          m += ", its cgroup's limit " + human_bytes(static_cast<double>(node.cgroup_limit)) + " with " +
               human_bytes(static_cast<double>(node.cgroup_usage)) + " used";
        if (count_in_use) m += "; the session's ranks hold " + human_bytes(static_cast<double>(in_use));
        if (!limit.none) m += "; memory limit " + limit.describe(node);
        m += ")";
        if (node.shm_in_memory && e.shared_bytes > 0 && !shared_short && e.shared_bytes * 5 >= need_memory)
          outs.push_back("set TESSERA_SHM_DIR to a disk (--shm-dir DIR): its " +
                         human_bytes(static_cast<double>(e.shared_bytes)) + " of Shared storage then live there");
        if (count_in_use && in_use > need_memory / 10)
          outs.push_back("drop resident objects (s.drop) to free some of the " +
                         human_bytes(static_cast<double>(in_use)) + " the session holds");
        if (over_limit && !memory_short) outs.push_back("raise the memory limit (memory_limit=, --memory-limit)");
      }
      outs.push_back("use more nodes");
      std::string ways;
      for (std::size_t k = 0; k < outs.size(); ++k)
        ways += (k == 0 ? "" : k + 1 == outs.size() ? ", or " : ", ") + outs[k];
      m += "; " + ways + " (estimated at its peak, " + e.peak_phase + ": " + top_items(e, e.peak_phase) + ")";
      problem = m;
    }
  }
  problem = first_problem(rt.comm(), problem);
  if (!problem.empty()) throw RangeError(problem);
  json j = e.to_json();
  j["node"] = {{"host", node.host},
               {"shm_dir", node.shm_dir},
               {"shm_free", node.shm_free},
               {"shm_in_memory", node.shm_in_memory},
               {"available", node.available},
               {"usable", usable},
               {"total", node.total},
               {"cgroup_limit", node.cgroup_limit},
               {"in_use", in_use},
               {"limit", limit.none ? json(nullptr) : json(cap)},
               {"memory_bytes", need_memory}};
  return j;
}

json check_memory(Runtime& rt, const MemoryEstimate& e, const std::string& limit, bool count_in_use) {
  return check_memory(rt, e, parse_memory_limit(limit), count_in_use);
}

}  // namespace tessera::pipeline
