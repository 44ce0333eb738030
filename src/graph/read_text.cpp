// Parallel text readers: Matrix Market coordinate files and whitespace edge
// lists. Rank 0 reads the header; every rank then maps the file, takes the
// lines that start in its byte range and learns their line numbers from a
// prefix sum of newline counts, so errors name the file and line.
#include "tessera/graph/io.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tessera/comm/aggregators.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/storage/mapping.hpp"

namespace tessera::graph {

FileFormat format_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return FileFormat::binary;
  auto ends_with = [&](const char* ext) {
    std::string e = ext;
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends_with(".mtx")) return FileFormat::matrix_market;
  if (ends_with(".wel")) return FileFormat::weighted_edge_list;
  if (ends_with(".tsg") || ends_with("/")) return FileFormat::binary;
  return FileFormat::edge_list;
}

std::string format_name(FileFormat f) {
  switch (f) {
    case FileFormat::edge_list: return "edge list";
    case FileFormat::weighted_edge_list: return "weighted edge list";
    case FileFormat::matrix_market: return "Matrix Market";
    case FileFormat::binary: return "Tessera binary";
  }
  return "?";
}

namespace {

// What rank 0 learns from the top of the file; sent to every rank as bytes.
struct TextHeader {
  std::uint64_t data_offset = 0;   // first byte after the header
  std::uint64_t lines_before = 0;  // lines in the header
  std::uint64_t rows = 0, cols = 0, entries = 0;
  std::uint8_t matrix_market = 0, symmetric = 0, weighted = 0, integer = 0;
};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

TextHeader read_matrix_market_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SystemError("cannot open " + path, errno);
  TextHeader h;
  h.matrix_market = 1;
  std::string line;
  auto fail = [&](const std::string& what) {
    throw FormatError(path + ":" + std::to_string(h.lines_before) + ": " + what);
  };
  if (!std::getline(in, line)) throw FormatError(path + " is empty");
  h.lines_before = 1;
  std::istringstream banner(line);
  std::string tag, object, layout, field, symmetry;
  banner >> tag >> object >> layout >> field >> symmetry;
  if (tag != "%%MatrixMarket") fail("not a Matrix Market file (the first line must start with %%MatrixMarket)");
  object = lower(object), layout = lower(layout), field = lower(field), symmetry = lower(symmetry);
  if (object != "matrix") fail("Matrix Market object '" + object + "' is not supported (only 'matrix')");
  if (layout != "coordinate") fail("Matrix Market layout '" + layout + "' is not supported (only 'coordinate')");
  if (field == "real" || field == "double") h.weighted = 1;
  else if (field == "integer") h.weighted = 1, h.integer = 1;
  else if (field != "pattern") fail("Matrix Market field '" + field + "' is not supported (pattern, real, integer)");
  if (symmetry == "symmetric") h.symmetric = 1;
  else if (symmetry != "general")
    fail("Matrix Market symmetry '" + symmetry + "' is not supported (general, symmetric)");
  while (std::getline(in, line)) {
    ++h.lines_before;
    auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '%') continue;
    std::istringstream size(line);
    long long r = -1, c = -1, nnz = -1;
    std::string extra;
    if (!(size >> r >> c >> nnz) || (size >> extra) || r < 0 || c < 0 || nnz < 0)
      fail("expected the size line 'rows cols entries', found '" + line + "'");
    if (r != c) fail("the matrix is " + std::to_string(r) + " x " + std::to_string(c) + "; a graph needs a square one");
    h.rows = static_cast<std::uint64_t>(r), h.cols = static_cast<std::uint64_t>(c);
    h.entries = static_cast<std::uint64_t>(nnz);
    h.data_offset = static_cast<std::uint64_t>(in.tellg());
    if (in.eof()) {
      struct stat st {};
      ::stat(path.c_str(), &st);
      h.data_offset = static_cast<std::uint64_t>(st.st_size);
    }
    return h;
  }
  throw FormatError(path + ": the Matrix Market size line is missing");
}

// One rank's lines, parsed. The first error is kept with its line number.
struct ParsedRange {
  LocalEdges edges;
  std::uint64_t max_id = 0;
  std::uint64_t entries = 0;
  std::string error;
};

struct LineParser {
  const std::string& path;
  std::uint64_t line;
  std::size_t fields;  // 2 or 3
  std::uint64_t base;
  std::uint64_t limit;  // ids must be < limit after subtracting base (0: no limit)

  // Parses [p, e); returns false (and sets error) when malformed.
  bool parse(const char* p, const char* e, ParsedRange& out) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r')) ++p;
    if (p == e || *p == '#' || *p == '%') return true;
    std::uint64_t id[2];
    double w = 1.0;
    for (std::size_t f = 0; f < fields; ++f) {
      while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == ',')) ++p;
      if (p == e) return fail(out, "expected " + std::to_string(fields) + " fields, found " + std::to_string(f));
      const char* start = p;
      while (p < e && *p != ' ' && *p != '\t' && *p != '\r' && *p != ',') ++p;
      std::string_view tok(start, static_cast<std::size_t>(p - start));
      if (f < 2) {
        if (tok[0] == '-') return fail(out, "negative vertex id " + std::string(tok));
        auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), id[f]);
        if (ec == std::errc::result_out_of_range) return fail(out, "vertex id " + std::string(tok) + " is too large");
        if (ec != std::errc() || end != tok.data() + tok.size())
          return fail(out, "'" + std::string(tok) + "' is not a vertex id");
        if (id[f] < base)
          return fail(out, "vertex id " + std::string(tok) + " is below the first id " + std::to_string(base));
        id[f] -= base;
        if (limit && id[f] >= limit)
          return fail(out, "vertex id " + std::string(tok) + " is out of range (the header says " +
                               std::to_string(limit) + " vertices)");
      } else {
        auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), w);
        if (ec != std::errc() || end != tok.data() + tok.size())
          return fail(out, "'" + std::string(tok) + "' is not a weight");
      }
    }
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r')) ++p;
    if (p != e) return fail(out, "expected " + std::to_string(fields) + " fields, found more");
    if (fields == 3)
      out.edges.add(id[0], id[1], w);
    else
      out.edges.add(id[0], id[1]);
    out.max_id = std::max({out.max_id, id[0], id[1]});
    ++out.entries;
    return true;
  }
  bool fail(ParsedRange& out, const std::string& what) {
    out.error = path + ":" + std::to_string(line) + ": " + what;
    return false;
  }
};

ParsedRange parse_range(Runtime& rt, const std::string& path, const TextHeader& h, std::size_t fields,
                        std::uint64_t base) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw SystemError("cannot open " + path, errno);
  FileDescriptor guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw SystemError("cannot stat " + path, errno);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  Mapping file = size > 0 ? Mapping::file(fd, size, false, path) : Mapping{};
  const char* data = reinterpret_cast<const char*>(file.data());

  // Lines belong to the rank whose byte range holds their first byte.
  const std::uint64_t P = static_cast<std::uint64_t>(rt.size()), r = static_cast<std::uint64_t>(rt.rank());
  const std::uint64_t span = size - std::min(size, h.data_offset);
  std::uint64_t start = h.data_offset + static_cast<std::uint64_t>((static_cast<unsigned __int128>(span) * r) / P);
  if (r > 0)
    while (start < size && data[start - 1] != '\n') ++start;
  std::vector<std::uint64_t> starts(P);
  TESSERA_MPI(MPI_Allgather(&start, 1, MPI_UINT64_T, starts.data(), 1, MPI_UINT64_T, rt.comm()));
  const std::uint64_t end = r + 1 < P ? starts[r + 1] : size;

  std::uint64_t newlines = static_cast<std::uint64_t>(std::count(data + start, data + std::max(start, end), '\n'));
  std::uint64_t first_line = h.lines_before + exclusive_prefix_sum(rt.comm(), newlines) + 1;

  ParsedRange out;
  LineParser parser{path, first_line, fields, base, h.matrix_market ? h.rows : 0};
  for (std::uint64_t p = start; p < end;) {
    const char* nl = static_cast<const char*>(std::memchr(data + p, '\n', end - p));
    std::uint64_t e = nl ? static_cast<std::uint64_t>(nl - data) : end;
    if (!parser.parse(data + p, data + e, out)) break;
    ++parser.line;
    p = e + 1;
  }
  return out;
}

// Numbers the ids that occur 0..n-1 in increasing order, rewrites the edges,
// and returns the old id of every new one (indexed by new id, block layout).
std::uint64_t relabel(Runtime& rt, std::uint64_t id_space, LocalEdges& edges, std::vector<std::uint64_t>& old_of_new) {
  DistArray<std::uint8_t> present(rt, id_space);
  {
    DstAggregator<std::uint8_t> mark(present);
    for (std::size_t k = 0; k < edges.size(); ++k) {
      mark.put(edges.src[k], 1);
      mark.put(edges.dst[k], 1);
    }
    mark.flush();
  }
  std::uint64_t mine = 0;
  for (auto p : present.local()) mine += p;
  std::uint64_t next = exclusive_prefix_sum(rt.comm(), mine);
  std::uint64_t n = all_reduce(rt.comm(), mine, MPI_SUM);
  DistArray<std::uint64_t> new_id(rt, id_space);
  old_of_new.clear();
  for (std::size_t i = 0; i < present.local().size(); ++i)
    if (present.local()[i]) {
      new_id.local()[i] = next++;
      old_of_new.push_back(present.local_begin() + i);
    }
  LocalEdges out;
  out.src.resize(edges.size());
  out.dst.resize(edges.size());
  {
    SrcAggregator<std::uint64_t> get(new_id);
    for (std::size_t k = 0; k < edges.size(); ++k) {
      get.get(edges.src[k], out.src[k]);
      get.get(edges.dst[k], out.dst[k]);
    }
    get.flush();
  }
  out.weight = std::move(edges.weight);
  edges = std::move(out);
  return n;
}

LoadedGraph load_text(Runtime& rt, const std::string& path, FileFormat format, const ReadOptions& options) {
  const bool mm = format == FileFormat::matrix_market;
  TextHeader h;
  agree(rt.comm(), [&] {
    if (rt.rank() != 0) return;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw SystemError("cannot open graph file " + path, errno);
    if (st.st_size == 0) throw FormatError(path + " is empty");
    if (mm) h = read_matrix_market_header(path);
    if (format == FileFormat::weighted_edge_list) h.weighted = 1;
  });
  TESSERA_MPI(MPI_Bcast(&h, sizeof(h), MPI_BYTE, 0, rt.comm()));
  const int base = options.base.value_or(mm ? 1 : 0);
  if (base != 0 && base != 1) throw ConfigError("the first vertex id must be 0 or 1, not " + std::to_string(base));
  if (mm && base != 1) throw ConfigError("Matrix Market ids are 1-based; --base 0 does not apply to " + path);

  ParsedRange parsed;
  agree(rt.comm(), [&] {
    parsed = parse_range(rt, path, h, h.weighted ? 3 : 2, static_cast<std::uint64_t>(base));
    if (!parsed.error.empty()) throw FormatError(parsed.error);
  });
  std::uint64_t entries = all_reduce(rt.comm(), parsed.entries, MPI_SUM);
  std::uint64_t max_id = all_reduce(rt.comm(), parsed.max_id, MPI_MAX);
  if (mm && entries != h.entries)
    throw FormatError(path + ": the header promises " + std::to_string(h.entries) + " entries but the file has " +
                      std::to_string(entries));
  if (entries == 0) throw FormatError(path + " has no edges");

  BuildOptions build;
  build.storage = options.storage;
  build.symmetrize = h.symmetric || options.undirected;
  const bool directed = !build.symmetrize;
  std::uint64_t n = mm ? h.rows : max_id + 1;
  if (!options.relabel) {
    return {EdgeList::build(rt, n, directed, std::move(parsed.edges), build), std::nullopt};
  }
  std::vector<std::uint64_t> old_of_new;
  n = relabel(rt, n, parsed.edges, old_of_new);
  LoadedGraph out{EdgeList::build(rt, n, directed, std::move(parsed.edges), build), std::nullopt};
  out.original_ids.emplace(rt, out.graph.vertex_ranges());
  {
    DstAggregator<std::uint64_t> put(*out.original_ids);
    std::uint64_t first_new = exclusive_prefix_sum(rt.comm(), old_of_new.size());
    for (std::size_t k = 0; k < old_of_new.size(); ++k) put.put(first_new + k, old_of_new[k]);
    put.flush();
  }
  return out;
}

}  // namespace

LoadedGraph read_graph(Runtime& rt, const std::string& path, const ReadOptions& options) {
  FileFormat f = format_of(path);
  if (f == FileFormat::binary) {
    if (options.relabel || options.base)
      throw ConfigError("--relabel and --base apply to text files, not to the binary graph " + path);
    LoadedGraph g{load_binary(rt, path, options.storage), std::nullopt};
    if (options.undirected && g.graph.directed()) g.graph = g.graph.symmetrized(options.storage);
    return g;
  }
  return load_text(rt, path, f, options);
}

}  // namespace tessera::graph
