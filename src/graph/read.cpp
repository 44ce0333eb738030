// Parallel text readers: Matrix Market coordinate files and whitespace edge
// lists. Rank 0 reads the header; every rank then maps the file, takes the
// lines that start in its byte range and learns their line numbers from a
// prefix sum of newline counts, so errors name the file and line.
#include "tessera/graph/read.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "tessera/comm/aggregators.hpp"
#include "tessera/comm/request_reply.hpp"
#include "tessera/graph/arc_hash.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/exit_cleanup.hpp"
#include "tessera/runtime/splitmix64.hpp"
#include "tessera/runtime/trace.hpp"
#include "tessera/storage/attach.hpp"
#include "tessera/storage/disk_tier.hpp"
#include "tessera/storage/mapping.hpp"
#include "tessera/storage/metadata.hpp"
#include "binary_format.hpp"

namespace tessera::graph {

std::string vertex_arrays_problem(std::uint64_t vertices, std::uint64_t edges) {
  const unsigned __int128 bytes = static_cast<unsigned __int128>(vertices) * kVertexArrayBytes;
  const double gib = static_cast<double>(bytes) / double(1ull << 30);
  char need[64];
  std::snprintf(need, sizeof(need), "%.1f GiB", gib);
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const unsigned __int128 memory =
      pages > 0 && page > 0 ? static_cast<unsigned __int128>(pages) * static_cast<unsigned long>(page) : 0;
  if (memory && bytes > memory) {
    char have[64];
    std::snprintf(have, sizeof(have), "%.1f GiB", static_cast<double>(memory) / double(1ull << 30));
    return std::string(need) + " of vertex arrays (" + std::to_string(kVertexArrayBytes) +
           " bytes per vertex) but this machine has " + have;
  }
  if (vertices > kSparseVertexFloor && vertices / kMaxVerticesPerEdge > edges)
    return std::string(need) + " of vertex arrays for " + std::to_string(vertices) + " vertices but the file has only " +
           std::to_string(edges) + " edges";
  return {};
}

namespace {

// What rank 0 learns from the top of the file; sent to every rank as bytes.
struct TextHeader {
  std::uint64_t data_offset = 0;   // first byte after the header
  std::uint64_t lines_before = 0;  // lines in the header
  std::uint64_t rows = 0, cols = 0, entries = 0;
  std::uint8_t matrix_market = 0, symmetric = 0, weighted = 0, integer = 0;
  // Edge lists: the first data line when it has exactly two fields, set
  // aside as a possible SNAP-style count header ("vertices edges").
  std::uint8_t has_first_line = 0;
  std::uint64_t first_line_number = 0;
  std::uint64_t first_line_offset = 0, first_line_end = 0;
  // A "# tessera graph:" line (write.hpp): the kind the writer recorded.
  std::uint8_t declared = 0, declared_directed = 0, declared_weighted = 0, declared_base = 0;
  std::uint64_t declared_vertices = 0;
  // DIMACS (.gr): rows = the problem line's vertices, entries its arcs.
  // METIS (.graph): rows = n, entries = m (edges); metis_skip vertex
  // weights open each vertex line; `weighted`: each neighbour has a weight.
  std::uint8_t dimacs = 0, metis = 0;
  std::uint64_t metis_skip = 0;
};

// Parses a Tessera edge-list header line (without its '#'): the current
// form "tessera graph: undirected, unweighted, ids from 0; V vertices, E
// edges (A arcs)" and the older "tessera undirected graph: V vertices, E
// edges". False when the line is something else.
bool parse_tessera_header(std::string_view line, TextHeader& h) {
  auto at = line.find_first_not_of(" \t");
  if (at == std::string_view::npos) return false;
  line.remove_prefix(at);
  const bool current = line.rfind("tessera graph:", 0) == 0;
  const bool older = line.rfind("tessera directed graph:", 0) == 0 || line.rfind("tessera undirected graph:", 0) == 0;
  if (!current && !older) return false;
  std::string text(line);
  auto has = [&](const char* word) { return text.find(word) != std::string::npos; };
  h.declared = 1;
  h.declared_directed = !has("undirected");
  h.declared_weighted = current && has(" weighted");
  h.declared_base = 0;
  if (auto p = text.find("ids from "); p != std::string::npos && p + 9 < text.size()) h.declared_base = text[p + 9] == '1' ? 1 : 0;
  if (auto p = text.find(" vertices"); p != std::string::npos) {
    auto b = text.find_last_not_of("0123456789", p - 1);
    b = b == std::string::npos ? 0 : b + 1;
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data() + b, text.data() + p, v);
    if (ec == std::errc() && end == text.data() + p) h.declared_vertices = v;
  }
  return true;
}

// Compressed files start with a magic number; their bytes are never a graph.
const char* compression_of(const unsigned char* b, std::size_t n) {
  if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) return "gzip";
  if (n >= 3 && b[0] == 'B' && b[1] == 'Z' && b[2] == 'h') return "bzip2";
  if (n >= 6 && b[0] == 0xfd && b[1] == '7' && b[2] == 'z' && b[3] == 'X' && b[4] == 'Z' && b[5] == 0) return "xz";
  if (n >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd) return "zstd";
  if (n >= 4 && b[0] == 'P' && b[1] == 'K' && b[2] == 3 && b[3] == 4) return "zip";
  return nullptr;
}

bool has_utf8_bom(const unsigned char* b, std::size_t n) { return n >= 3 && b[0] == 0xef && b[1] == 0xbb && b[2] == 0xbf; }

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
  if (has_utf8_bom(reinterpret_cast<const unsigned char*>(line.data()), line.size())) line.erase(0, 3);
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

// The byte after the header line just read from `in` (the file's size at
// its end).
std::uint64_t offset_after(std::ifstream& in, const std::string& path) {
  if (!in.eof()) return static_cast<std::uint64_t>(in.tellg());
  struct stat st {};
  ::stat(path.c_str(), &st);
  return static_cast<std::uint64_t>(st.st_size);
}

bool blank_char(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// The header line of a format with comment lines (DIMACS's 'c', METIS's
// '%'): the first line neither blank nor a comment, a byte-order mark and
// trailing CRs removed, h.lines_before counting the lines read. False at
// the end of the file.
bool header_line(std::istream& in, char comment, TextHeader& h, std::string& line) {
  while (std::getline(in, line)) {
    ++h.lines_before;
    if (h.lines_before == 1 && has_utf8_bom(reinterpret_cast<const unsigned char*>(line.data()), line.size()))
      line.erase(0, 3);
    while (!line.empty() && line.back() == '\r') line.pop_back();
    const auto first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] != comment) return true;
  }
  return false;
}

// DIMACS shortest paths (.gr): 'c' comment lines, then "p sp VERTICES ARCS".
TextHeader read_dimacs_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SystemError("cannot open " + path, errno);
  TextHeader h;
  h.dimacs = 1;
  h.weighted = 1;
  std::string line;
  auto fail = [&](const std::string& what) {
    throw FormatError(path + ":" + std::to_string(h.lines_before) + ": " + what);
  };
  if (header_line(in, 'c', h, line)) {
    std::istringstream fields(line);
    std::string tag, problem, extra;
    long long n = -1, m = -1;
    fields >> tag;
    if (tag != "p")
      fail("expected the problem line 'p sp VERTICES ARCS' before the arcs, found '" + line.substr(0, 80) + "'");
    fields >> problem;
    if (problem != "sp")
      fail("DIMACS problem '" + problem + "' is not supported (only 'sp', shortest paths: 'p sp VERTICES ARCS')");
    if (!(fields >> n >> m) || (fields >> extra) || n < 0 || m < 0)
      fail("expected the problem line 'p sp VERTICES ARCS', found '" + line.substr(0, 80) + "'");
    h.rows = h.cols = static_cast<std::uint64_t>(n);
    h.entries = static_cast<std::uint64_t>(m);
    h.data_offset = offset_after(in, path);
    return h;
  }
  throw FormatError(path + ": the DIMACS problem line 'p sp VERTICES ARCS' is missing");
}

// METIS (.graph): '%' comment lines, then "n m [fmt [ncon]]".
TextHeader read_metis_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SystemError("cannot open " + path, errno);
  TextHeader h;
  h.metis = 1;
  std::string line;
  auto fail = [&](const std::string& what) {
    throw FormatError(path + ":" + std::to_string(h.lines_before) + ": " + what);
  };
  if (header_line(in, '%', h, line)) {
    std::istringstream fields(line);
    std::string n_text, m_text, fmt = "000", given, extra;
    long long ncon = 0;
    fields >> n_text >> m_text;
    std::uint64_t n = 0, m = 0;
    auto number = [](const std::string& t, std::uint64_t& v) {
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      return !t.empty() && ec == std::errc() && end == t.data() + t.size();
    };
    if (!number(n_text, n) || !number(m_text, m))
      fail("expected the METIS header 'VERTICES EDGES [FMT [NCON]]', found '" + line.substr(0, 80) + "'");
    if (fields >> given) {
      if (given.size() > 3 || given.find_first_not_of("01") != std::string::npos)
        fail("METIS fmt '" + given + "' is not 0, 1, 10, 11 (or 100, as GAPBS reads it)");
      fmt = std::string(3 - given.size(), '0') + given;
      if (fmt[0] == '1' && fmt != "100")
        fail("METIS fmt " + fmt + ": vertex sizes are not supported (fmt 100 alone is read as GAPBS reads it: "
             "every number on a vertex line is a neighbour)");
      if (fields >> extra) {
        std::uint64_t c = 0;
        if (!number(extra, c) || c == 0) fail("METIS ncon '" + extra + "' is not a positive number");
        ncon = static_cast<long long>(c);
        if (fields >> extra) fail("the METIS header has more than 4 fields: '" + line.substr(0, 80) + "'");
      }
    }
    h.rows = h.cols = n;
    h.entries = m;
    h.weighted = fmt[2] == '1';
    h.metis_skip = fmt[1] == '1' ? static_cast<std::uint64_t>(ncon ? ncon : 1) : 0;
    h.data_offset = offset_after(in, path);
    return h;
  }
  throw FormatError(path + ": the METIS header line 'VERTICES EDGES [FMT [NCON]]' is missing");
}

// Rank 0's look at the top of the file: refuses compressed input, skips a
// UTF-8 byte-order mark, and sets aside a first data line of two fields
// that may be a count header.
TextHeader read_text_header(const std::string& path, FileFormat format) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw SystemError("cannot open graph file " + path, errno);
  FileDescriptor guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw SystemError("cannot stat graph file " + path, errno);
  if (!S_ISREG(st.st_mode)) throw FormatError(path + " is not a regular file");
  if (st.st_size == 0) throw FormatError(path + " is empty");
  std::string top(std::min<std::uint64_t>(static_cast<std::uint64_t>(st.st_size), 1 << 20), '\0');
  ssize_t got = ::pread(fd, top.data(), top.size(), 0);
  if (got < 0) throw SystemError("cannot read graph file " + path, errno);
  top.resize(static_cast<std::size_t>(got));
  auto bytes = reinterpret_cast<const unsigned char*>(top.data());
  if (const char* kind = compression_of(bytes, top.size()))
    throw FormatError(path + ": compressed input is not supported (this is a " + std::string(kind) +
                      " file; decompress it first)");
  if (format == FileFormat::matrix_market) return read_matrix_market_header(path);
  if (format == FileFormat::dimacs) return read_dimacs_header(path);
  if (format == FileFormat::metis) return read_metis_header(path);
  TextHeader h;
  if (format == FileFormat::weighted_edge_list) h.weighted = 1;
  if (has_utf8_bom(bytes, top.size())) h.data_offset = 3;
  std::uint64_t line = 1;
  for (std::size_t p = h.data_offset; p < top.size(); ++line) {
    auto nl = top.find('\n', p);
    if (nl == std::string::npos) {
      if (top.size() < static_cast<std::size_t>(st.st_size)) return h;  // a line longer than we looked at
      nl = top.size();
    }
    auto first = top.find_first_not_of(" \t\r", p);
    if (first >= nl || top[first] == '#' || top[first] == '%') {
      if (first < nl && top[first] == '#' && !h.declared)
        parse_tessera_header(std::string_view(top).substr(first + 1, nl - first - 1), h);
      p = nl + 1;
      continue;
    }
    // A file that says what it is has no count header to guess at.
    if (h.declared || format != FileFormat::edge_list) return h;
    h.has_first_line = 1;
    h.first_line_number = line;
    h.first_line_offset = p;
    h.first_line_end = nl;
    h.data_offset = std::min<std::uint64_t>(nl + 1, static_cast<std::uint64_t>(st.st_size));
    h.lines_before = line;
    return h;
  }
  return h;
}

// One rank's lines, parsed. The first error is kept with its line number.
struct ParsedRange {
  LocalEdges edges;
  std::uint64_t max_id = 0;
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;  // of the file, in this rank's range
  std::string error;
};

struct LineParser {
  const std::string& path;
  std::uint64_t line;
  std::size_t fields;  // 2 or 3
  std::uint64_t base;
  std::uint64_t limit;  // ids must be < limit after subtracting base (0: no limit, unless `limited`)
  bool keep_weight = true;  // false (ReadOptions::pattern): the third field is skipped unread
  bool limited = false;     // a header gave `limit` (it may be 0)
  bool dimacs = false;      // lines "a u v w", 'c' comments
  // METIS: vertex weights opening each vertex line; each neighbour weighted.
  std::uint64_t metis_skip = 0;
  bool metis_weights = false;

  // Parses [p, e); returns false (and sets error) when malformed.
  bool parse(const char* p, const char* e, ParsedRange& out) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r')) ++p;
    if (p == e || *p == '#' || *p == '%') return true;
    if (dimacs) {
      if (*p == 'c') return true;
      if (*p != 'a' || p + 1 == e || (p[1] != ' ' && p[1] != '\t')) {
        const std::string text(p, static_cast<std::size_t>(std::min<std::ptrdiff_t>(e - p, 60)));
        if (*p == 'p')
          return fail(out, "a second problem line '" + text + "' (a DIMACS file has one, before its arcs)");
        return fail(out, "expected an arc line 'a u v w' (or a 'c' comment), found '" + text + "'");
      }
      ++p;
    }
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
        if ((limit || limited) && id[f] >= limit)
          return fail(out, "vertex id " + std::string(tok) + " is out of range (the header says " +
                               std::to_string(limit) + " vertices)");
      } else if (keep_weight) {
        auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), w);
        if (ec != std::errc() || end != tok.data() + tok.size())
          return fail(out, "'" + std::string(tok) + "' is not a weight");
        if (!std::isfinite(w)) return fail(out, "weight " + std::string(tok) + " is not a finite number");
      }
    }
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r')) ++p;
    if (p != e) return fail(out, "expected " + std::to_string(fields) + " fields, found more");
    if (fields == 3 && keep_weight)
      out.edges.add(id[0], id[1], w);
    else
      out.edges.add(id[0], id[1]);
    out.max_id = std::max({out.max_id, id[0], id[1]});
    ++out.entries;
    return true;
  }
  // A METIS vertex line [p, e): `vertex` (0-based) is the next vertex's,
  // advanced past this line unless it is a '%' comment. Lines past the
  // header's `limit` vertices must be blank.
  bool parse_metis(const char* p, const char* e, std::uint64_t& vertex, ParsedRange& out) {
    while (p < e && blank_char(*p)) ++p;
    if (p < e && *p == '%') return true;
    const std::uint64_t u = vertex++;
    if (u >= limit) {
      if (p == e) return true;  // blank lines after the last vertex's
      return fail(out, "a vertex line past the header's " + std::to_string(limit) + " vertices");
    }
    auto token = [&]() -> std::string_view {
      while (p < e && blank_char(*p)) ++p;
      const char* start = p;
      while (p < e && !blank_char(*p)) ++p;
      return {start, static_cast<std::size_t>(p - start)};
    };
    for (std::uint64_t k = 0; k < metis_skip; ++k)
      if (token().empty())
        return fail(out, "vertex " + std::to_string(u + 1) + "'s line lacks its " + std::to_string(metis_skip) +
                             " vertex weight" + (metis_skip > 1 ? "s" : "") + " (the header's fmt says they open it)");
    for (std::string_view tok = token(); !tok.empty(); tok = token()) {
      if (tok[0] == '-') return fail(out, "negative neighbour " + std::string(tok));
      std::uint64_t v = 0;
      auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (ec == std::errc::result_out_of_range) return fail(out, "neighbour " + std::string(tok) + " is too large");
      if (ec != std::errc() || end != tok.data() + tok.size())
        return fail(out, "'" + std::string(tok) + "' is not a neighbour id");
      if (v == 0) return fail(out, "neighbour 0: METIS ids start at 1");
      if (v > limit)
        return fail(out, "neighbour " + std::string(tok) + " is out of range (the header says " +
                             std::to_string(limit) + " vertices)");
      double w = 1.0;
      if (metis_weights) {
        std::string_view wt = token();
        if (wt.empty())
          return fail(out, "neighbour " + std::string(tok) + " has no weight (the header's fmt says each has one)");
        if (keep_weight) {
          auto [wend, wec] = std::from_chars(wt.data(), wt.data() + wt.size(), w);
          if (wec != std::errc() || wend != wt.data() + wt.size())
            return fail(out, "'" + std::string(wt) + "' is not a weight");
          if (!std::isfinite(w)) return fail(out, "weight " + std::string(wt) + " is not a finite number");
        }
      }
      if (metis_weights && keep_weight)
        out.edges.add(u, v - 1, w);
      else
        out.edges.add(u, v - 1);
      out.max_id = std::max({out.max_id, u, v - 1});
      ++out.entries;
    }
    return true;
  }
  bool fail(ParsedRange& out, const std::string& what) {
    out.error = path + ":" + std::to_string(line) + ": " + what;
    return false;
  }
};

// A rank's lines of a text file: bytes [start, end), the first one's line
// number, the newlines in them. Found collectively once; a streamed build's
// passes reuse it, so the passes themselves are local.
struct TextRange {
  bool known = false;
  std::uint64_t start = 0, end = 0, first_line = 0, newlines = 0;
  // METIS: the rank's vertex lines (not '%' comments), and the vertex of the first.
  std::uint64_t vertex_lines = 0, first_vertex = 0;
};

// A METIS line [p, e) that is a '%' comment (no vertex).
bool metis_comment(const char* p, const char* e) {
  while (p < e && blank_char(*p)) ++p;
  return p < e && *p == '%';
}

// `sink` null: the edges are kept in the result. Otherwise they go to the
// sink in batches and are not kept, and the parsed part of the file leaves
// the resident set as the parse goes. `range`: found here (collectively)
// unless already known.
ParsedRange parse_range(Runtime& rt, const std::string& path, const TextHeader& h, std::size_t fields,
                        std::uint64_t base, bool keep_weight, const EdgeSink* sink = nullptr,
                        TextRange* range = nullptr) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw SystemError("cannot open " + path, errno);
  FileDescriptor guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw SystemError("cannot stat " + path, errno);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  Mapping file = size > 0 ? Mapping::file(fd, size, false, path) : Mapping{};
  const char* data = reinterpret_cast<const char*>(file.data());
  constexpr std::uint64_t kWindow = std::uint64_t{16} << 20;

  TextRange found;
  TextRange& at = range ? *range : found;
  if (!at.known) {
    // Lines belong to the rank whose byte range holds their first byte.
    const std::uint64_t P = static_cast<std::uint64_t>(rt.size()), r = static_cast<std::uint64_t>(rt.rank());
    const std::uint64_t span = size - std::min(size, h.data_offset);
    std::uint64_t start = h.data_offset + static_cast<std::uint64_t>((static_cast<unsigned __int128>(span) * r) / P);
    if (r > 0)
      while (start < size && data[start - 1] != '\n') ++start;
    std::vector<std::uint64_t> starts = all_gather(rt.comm(), start);
    const std::uint64_t end = r + 1 < P ? starts[r + 1] : size;
    std::uint64_t newlines = 0, vertex_lines = 0;
    if (h.metis) {
      // Each line that is no comment is the next vertex's.
      for (std::uint64_t p = start, released = start; p < end;) {
        const char* nl = static_cast<const char*>(std::memchr(data + p, '\n', end - p));
        const std::uint64_t e = nl ? static_cast<std::uint64_t>(nl - data) : end;
        newlines += nl != nullptr;
        vertex_lines += !metis_comment(data + p, data + e);
        p = e + 1;
        if (sink && p - released >= kWindow) {
          release_file_pages(file.data(), released, std::min(p, end));
          released = p;
        }
      }
    } else {
      for (std::uint64_t p = start; p < end; p += kWindow) {
        const std::uint64_t q = std::min(end, p + kWindow);
        newlines += static_cast<std::uint64_t>(std::count(data + p, data + q, '\n'));
        if (sink) release_file_pages(file.data(), p, q);  // the page cache keeps them
      }
    }
    at = {true, start, end, h.lines_before + exclusive_prefix_sum(rt.comm(), newlines) + 1, newlines, vertex_lines, 0};
    if (h.metis) at.first_vertex = exclusive_prefix_sum(rt.comm(), vertex_lines);
  }
  const std::uint64_t start = at.start, end = at.end, newlines = at.newlines, first_line = at.first_line;

  ParsedRange out;
  out.bytes = end > start ? end - start : 0;
  // At most one edge per line: reserving once keeps the parse loop free of reallocation.
  constexpr std::uint64_t kBatch = 1 << 16;
  const std::uint64_t room = sink ? std::min(kBatch, newlines + 1) : newlines + 1;
  out.edges.src.reserve(room);
  out.edges.dst.reserve(room);
  if (fields == 3 && keep_weight) out.edges.weight.reserve(room);
  auto pass_on = [&] {
    (*sink)(EdgeBatch{out.edges.src, out.edges.dst, out.edges.weight});
    out.edges.src.clear(), out.edges.dst.clear(), out.edges.weight.clear();
  };
  std::uint64_t released = start;
  LineParser parser{path, first_line, fields, base, h.matrix_market || h.dimacs || h.metis ? h.rows : 0, keep_weight};
  parser.limited = h.matrix_market || h.dimacs || h.metis;
  parser.dimacs = h.dimacs != 0;
  parser.metis_skip = h.metis_skip;
  parser.metis_weights = h.metis && h.weighted;
  std::uint64_t vertex = at.first_vertex;
  for (std::uint64_t p = start; p < end;) {
    const char* nl = static_cast<const char*>(std::memchr(data + p, '\n', end - p));
    std::uint64_t e = nl ? static_cast<std::uint64_t>(nl - data) : end;
    if (!(h.metis ? parser.parse_metis(data + p, data + e, vertex, out) : parser.parse(data + p, data + e, out))) break;
    ++parser.line;
    p = e + 1;
    if (sink && out.edges.size() >= kBatch) {  // a METIS line may add many
      pass_on();
      if (p - released >= kWindow) {
        release_file_pages(file.data(), released, p);
        released = p;
      }
    }
  }
  if (sink && out.edges.size()) pass_on();
  return out;
}

std::size_t owner_of(const std::vector<std::uint64_t>& splitters, std::uint64_t id) {
  return static_cast<std::size_t>(std::upper_bound(splitters.begin(), splitters.end(), id) - splitters.begin());
}

// The first data line set aside by read_text_header, parsed as an edge (its
// error kept), and its two numbers as a count header would give them.
ParsedRange parse_first_line(const std::string& path, const TextHeader& h, std::uint64_t base,
                             std::uint64_t& claimed_vertices, std::uint64_t& claimed_edges) {
  std::string text(h.first_line_end - h.first_line_offset, '\0');
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw SystemError("cannot open " + path, errno);
  FileDescriptor guard(fd);
  if (::pread(fd, text.data(), text.size(), static_cast<off_t>(h.first_line_offset)) !=
      static_cast<ssize_t>(text.size()))
    throw SystemError("cannot read " + path, errno);
  ParsedRange out;
  LineParser parser{path, h.first_line_number, 2, base, 0};
  parser.parse(text.data(), text.data() + text.size(), out);
  std::istringstream fields(text);
  std::string a, b, extra;
  claimed_vertices = claimed_edges = ~std::uint64_t{0};
  if (fields >> a >> b && !(fields >> extra)) {
    std::uint64_t v = 0, e = 0;
    auto [pa, ea] = std::from_chars(a.data(), a.data() + a.size(), v);
    auto [pb, eb] = std::from_chars(b.data(), b.data() + b.size(), e);
    if (ea == std::errc() && eb == std::errc() && pa == a.data() + a.size() && pb == b.data() + b.size())
      claimed_vertices = v, claimed_edges = e;
  }
  return out;
}

// This rank's edge endpoints, sorted, each once.
// Sorts and deduplicates `ids` in place.
void keep_distinct(std::vector<std::uint64_t>& ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

// The distinct ids (sorted) of the edges `each` gives this rank, without
// holding the edges: the list is deduplicated whenever it doubles, so it
// stays within twice the distinct count plus a batch.
std::vector<std::uint64_t> local_distinct_ids(const EdgeSource& each) {
  std::vector<std::uint64_t> ids;
  std::size_t distinct = 0;
  each([&](const EdgeBatch& b) {
    ids.insert(ids.end(), b.src.begin(), b.src.end());
    ids.insert(ids.end(), b.dst.begin(), b.dst.end());
    if (ids.size() > 2 * distinct + (std::size_t{1} << 20)) keep_distinct(ids), distinct = ids.size();
  });
  keep_distinct(ids);
  return ids;
}

// This rank's share of the distinct ids of all ranks' edges, sorted, from
// each rank's `ids` (its local_distinct_ids): ids are range-partitioned by
// splitters sampled from every rank, so rank r's ids all precede rank r+1's.
// Costs O(distinct ids), never O(largest id).
std::vector<std::uint64_t> distinct_ids(Runtime& rt, const std::vector<std::uint64_t>& ids,
                                        std::vector<std::uint64_t>& splitters) {
  const auto P = static_cast<std::size_t>(rt.size());
  std::vector<std::uint64_t> samples;
  for (std::size_t k = 0; k < P && !ids.empty(); ++k) samples.push_back(ids[k * ids.size() / P]);
  auto all = gather_to_root<std::uint64_t>(rt.comm(), samples, 0);
  splitters.assign(P > 0 ? P - 1 : 0, ~std::uint64_t{0});
  if (rt.rank() == 0 && !all.empty()) {
    std::sort(all.begin(), all.end());
    for (std::size_t k = 1; k < P; ++k) splitters[k - 1] = all[k * all.size() / P];
  }
  broadcast(rt.comm(), splitters.data(), splitters.size(), 0);
  // Sorted ids under sorted splitters: already grouped, sent without a copy.
  auto mine = comm::deliver<std::uint64_t>(rt.comm(), ids, [&](std::uint64_t id) { return owner_of(splitters, id); });
  std::sort(mine.begin(), mine.end());
  mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
  return mine;
}

std::uint64_t count_distinct(Runtime& rt, const std::vector<std::uint64_t>& ids) {
  std::vector<std::uint64_t> splitters;
  return all_reduce<std::uint64_t>(rt.comm(), distinct_ids(rt, ids, splitters).size(), MPI_SUM);
}

// Numbers the ids that occur 0..n-1 in increasing order, from each rank's
// sorted distinct `ids`: returns n, the old id of every new one this rank
// numbered (`old_of_new`: contiguous new ids from the prefix sum of the
// counts), and the new id of each of `ids` (`new_of_id`).
std::uint64_t number_ids(Runtime& rt, const std::vector<std::uint64_t>& ids, std::vector<std::uint64_t>& old_of_new,
                         std::vector<std::uint64_t>& new_of_id) {
  std::vector<std::uint64_t> splitters;
  old_of_new = distinct_ids(rt, ids, splitters);
  const std::uint64_t first_new = exclusive_prefix_sum(rt.comm(), old_of_new.size());
  const std::uint64_t n = all_reduce<std::uint64_t>(rt.comm(), old_of_new.size(), MPI_SUM);
  // Ask each owner for the new ids of this rank's distinct ids, in order.
  new_of_id = comm::request_reply<std::uint64_t>(
      rt.comm(), ids, [&](std::uint64_t id) { return owner_of(splitters, id); },
      [&](std::uint64_t id) {
        return first_new + static_cast<std::uint64_t>(std::lower_bound(old_of_new.begin(), old_of_new.end(), id) -
                                                      old_of_new.begin());
      });
  return n;
}

// The parse step of load_text: every rank's edges as the file lists them
// (ids minus the base), the count header resolved, nothing built.
struct TextParse {
  TextHeader h;
  ParsedRange parsed;  // no edges when counted only
  int base = 0;
  std::uint64_t entries = 0, max_id = 0;
  // Counted only: the first data line, when it is an edge after all (rank 0).
  LocalEdges first_edge;
  TextRange range;  // this rank's lines
  bool metis_undirected = false;  // a METIS file listing each of its m edges at both ends
};

// `count_only`: the edges are parsed and checked but not kept (a streamed
// build parses them again, twice).
TextParse parse_text(Runtime& rt, const std::string& path, FileFormat format, const ReadOptions& options,
                     bool count_only = false) {
  const bool mm = format == FileFormat::matrix_market;
  TextParse t;
  TextHeader& h = t.h;
  ParsedRange& parsed = t.parsed;
  agree(rt.comm(), [&] {
    if (rt.rank() != 0) return;
    h = read_text_header(path, format);
  });
  broadcast(rt.comm(), &h, 1, 0);
  const bool one_based = mm || h.dimacs || h.metis;
  const int base = t.base = options.base.value_or(h.declared ? h.declared_base : one_based ? 1 : 0);
  if (h.declared && h.declared_weighted && !mm) h.weighted = 1;  // "u v w" lines, whatever the name says
  if (base != 0 && base != 1) throw ConfigError("the first vertex id must be 0 or 1, not " + std::to_string(base));
  if (one_based && base != 1)
    throw ConfigError(std::string(mm ? "Matrix Market" : h.dimacs ? "DIMACS" : "METIS") +
                      " ids are 1-based; --base 0 does not apply to " + path);

  ParsedRange first;
  std::uint64_t claimed_vertices = 0, claimed_edges = 0;
  const EdgeSink discard = [](const EdgeBatch&) {};
  agree(rt.comm(), [&] {
    parsed = parse_range(rt, path, h, h.weighted ? 3 : 2, static_cast<std::uint64_t>(base), !options.pattern,
                         count_only ? &discard : nullptr, &t.range);
    if (!parsed.error.empty()) throw FormatError(parsed.error);
    if (rt.rank() == 0 && h.has_first_line)
      first = parse_first_line(path, h, static_cast<std::uint64_t>(base), claimed_vertices, claimed_edges);
  });
  std::uint64_t entries = all_reduce(rt.comm(), parsed.entries, MPI_SUM);
  // A SNAP-style count header "V E": its E is the number of edges that
  // follow and its V the number of vertices (dense ids or distinct ids).
  if (h.has_first_line) {
    std::uint64_t rest_max = all_reduce(rt.comm(), parsed.max_id, MPI_MAX);
    int header = 0;
    if (rt.rank() == 0) header = claimed_edges == entries && entries > 0 && claimed_vertices > 0 &&
                                    rest_max != ~std::uint64_t{0} && claimed_vertices == rest_max + 1;
    header = broadcast(rt.comm(), header, 0);
    if (!header && broadcast(rt.comm(), static_cast<int>(claimed_edges == entries && entries > 0 && claimed_vertices > 0), 0)) {
      // Counting distinct ids: a counted-only parse reads the file once more.
      const EdgeSource each = [&](const EdgeSink& take) {
        if (count_only)
          parse_range(rt, path, h, h.weighted ? 3 : 2, static_cast<std::uint64_t>(base), false, &take);
        else
          take(EdgeBatch{parsed.edges.src, parsed.edges.dst, {}});
      };
      header = broadcast(rt.comm(), static_cast<int>(count_distinct(rt, local_distinct_ids(each)) ==
                                                     claimed_vertices), 0);
    }
    if (!header) {  // an ordinary edge after all
      if (rt.rank() == 0 && count_only) {
        if (!first.error.empty() && parsed.error.empty()) parsed.error = first.error;
        t.first_edge = std::move(first.edges);
        parsed.max_id = std::max(parsed.max_id, first.max_id);
        parsed.entries += first.entries;
      } else if (rt.rank() == 0) {
        if (!first.error.empty() && parsed.error.empty()) parsed.error = first.error;
        for (std::size_t k = 0; k < first.edges.size(); ++k) {
          if (first.edges.weighted())
            parsed.edges.add(first.edges.src[k], first.edges.dst[k], first.edges.weight[k]);
          else
            parsed.edges.add(first.edges.src[k], first.edges.dst[k]);
        }
        parsed.max_id = std::max(parsed.max_id, first.max_id);
        parsed.entries += first.entries;
      }
      agree(rt.comm(), [&] {
        if (rt.rank() == 0 && !first.error.empty()) throw FormatError(first.error);
      });
      entries = all_reduce(rt.comm(), parsed.entries, MPI_SUM);
    }
  }
  std::uint64_t max_id = all_reduce(rt.comm(), parsed.max_id, MPI_MAX);
  if (mm && entries != h.entries)
    throw FormatError(path + ": the header promises " + std::to_string(h.entries) + " entries but the file has " +
                      std::to_string(entries));
  if (h.dimacs && entries != h.entries)
    throw FormatError(path + ":" + std::to_string(h.lines_before) + ": the problem line promises " +
                      std::to_string(h.entries) + " arcs but the file has " + std::to_string(entries));
  if (h.metis) {
    const std::uint64_t lines = all_reduce(rt.comm(), t.range.vertex_lines, MPI_SUM);
    if (lines < h.rows)
      throw FormatError(path + ":" + std::to_string(h.lines_before) + ": the header says " + std::to_string(h.rows) +
                        " vertices but the file has " + std::to_string(lines) +
                        " vertex lines (one a vertex, empty for a vertex without neighbours)");
    // m edges: each listed at both ends (METIS), or once (GAPBS's test
    // graphs, read as GAPBS reads them: line i lists i's out-neighbours).
    const unsigned __int128 both = static_cast<unsigned __int128>(h.entries) * 2;
    if (entries == both && entries > 0) t.metis_undirected = true;
    else if (entries != h.entries)
      throw FormatError(path + ":" + std::to_string(h.lines_before) + ": the header says " +
                        std::to_string(h.entries) + " edges, which its vertex lines list " +
                        (both <= ~std::uint64_t{0} ? std::to_string(static_cast<std::uint64_t>(both)) : "2m") +
                        " times (each edge at both ends; or " + std::to_string(h.entries) +
                        " times, one arc each, as GAPBS's test graphs do), but they list " + std::to_string(entries) +
                        " neighbours");
  }
  if (entries == 0) throw FormatError(path + " has no edges");
  t.entries = entries, t.max_id = max_id;
  return t;
}

// The graph of `lines` (this rank's edges, ids less the file's base, given
// again at every call) on `n` vertices, or, relabelled, on the ids that occur
// (numbered in their order, each vertex remembering its id); `checked` sees
// the graph before it is returned.
LoadedGraph build_graph(Runtime& rt, std::uint64_t n, bool directed, const EdgeSource& lines,
                        const BuildOptions& build, bool relabel, std::uint64_t file_base,
                        const std::function<EdgeList(EdgeList)>& checked) {
  if (!relabel) {
    auto g = checked(EdgeList::build(rt, n, directed, lines, build));
    auto ids = IdMap::identity(rt, g.vertex_ranges(), file_base);
    return {std::move(g), std::move(ids)};
  }
  // Relabelled: this rank's distinct ids, numbered over all ranks; each
  // build pass renumbers its batches.
  std::vector<std::uint64_t> ids;
  agree(rt.comm(), [&] { ids = local_distinct_ids(lines); });  // a changed file fails on every rank
  std::vector<std::uint64_t> old_of_new, new_of_id;
  n = number_ids(rt, ids, old_of_new, new_of_id);
  auto renumber = [&](std::uint64_t id) {
    return new_of_id[static_cast<std::size_t>(std::lower_bound(ids.begin(), ids.end(), id) - ids.begin())];
  };
  const EdgeSource renumbered = [&](const EdgeSink& take) {
    std::vector<std::uint64_t> src, dst;
    lines([&](const EdgeBatch& b) {
      src.resize(b.src.size());
      dst.resize(b.dst.size());
      std::transform(b.src.begin(), b.src.end(), src.begin(), renumber);
      std::transform(b.dst.begin(), b.dst.end(), dst.begin(), renumber);
      take(EdgeBatch{src, dst, b.weight});
    });
  };
  auto g = checked(EdgeList::build(rt, n, directed, renumbered, build));
  DistArray<std::uint64_t> file_ids(rt, g.vertex_ranges());
  {
    DstAggregator<std::uint64_t> put(file_ids);
    std::uint64_t first_new = exclusive_prefix_sum(rt.comm(), old_of_new.size());
    for (std::size_t k = 0; k < old_of_new.size(); ++k) put.put(first_new + k, old_of_new[k]);
  }
  auto ids_map = IdMap::relabelled(std::move(file_ids), file_base);
  return {std::move(g), std::move(ids_map)};
}

// A file's graph is simple unless ReadOptions::multigraph: the build drops
// self loops and repeated arcs, and counts them either way.
void clean_as_asked(BuildOptions& build, const ReadOptions& options, BuildCounts& counts) {
  build.drop_self_loops = build.drop_duplicates = !options.multigraph;
  build.keep_duplicates = options.multigraph;
  build.counts = &counts;
}

std::string plural(std::uint64_t n, const std::string& one) {
  return std::to_string(n) + " " + one + (n == 1 ? "" : "s");
}

// What the build found, in the file's entries (a symmetrized entry made two
// arcs), recorded on the graph and said through options.note. A self loop
// counts as one, however often repeated: duplicates are the other entries
// that repeat an edge, so entries = kept edges + duplicates + self loops.
void record_cleaning(EdgeList& g, const BuildCounts& c, bool symmetrized, const ReadOptions& options) {
  EdgeList::Cleaning cleaning;
  cleaning.self_loops = c.self_loops;
  cleaning.duplicates = symmetrized ? c.duplicate_arcs / 2 : c.duplicate_arcs;
  cleaning.kept = options.multigraph;
  g.set_cleaning(cleaning);
  if (!options.note || (!cleaning.duplicates && !cleaning.self_loops)) return;
  std::string what;
  if (cleaning.duplicates) what = plural(cleaning.duplicates, symmetrized ? "duplicate edge" : "duplicate arc");
  if (cleaning.self_loops) what += (what.empty() ? "" : " and ") + plural(cleaning.self_loops, "self loop");
  options.note(options.multigraph ? "kept " + what + " (--multigraph)"
                                  : "dropped " + what + ": a simple graph, as GAPBS and networkx count it "
                                                        "(--multigraph keeps them)");
}

LoadedGraph load_text(Runtime& rt, const std::string& path, FileFormat format, const ReadOptions& options) {
  const bool mm = format == FileFormat::matrix_market;
  const bool counted = mm || format == FileFormat::dimacs || format == FileFormat::metis;  // the header's vertices
  // The file is counted first, then parsed again by each pass of a streamed
  // build, so no list of its edges is ever held (a file larger than memory
  // builds in the graph's own arrays). Relabelling adds one pass that
  // collects the ids that occur: O(vertices), not O(edges).
  TextParse t = parse_text(rt, path, format, options, true);
  const TextHeader& h = t.h;
  const int base = t.base;
  const std::uint64_t entries = t.entries, max_id = t.max_id;

  if (!options.relabel && !counted) {
    agree(rt.comm(), [&] {
      if (rt.rank() != 0) return;
      if (max_id == ~std::uint64_t{0})
        throw RangeError(path + ": vertex id " + std::to_string(max_id) +
                         " is the largest 64-bit number: the vertices up to it cannot be counted; use --relabel");
      if (auto why = vertex_arrays_problem(max_id + 1, entries); !why.empty())
        throw RangeError(path + ": vertex id " + std::to_string(max_id + static_cast<std::uint64_t>(base)) +
                         " needs " + why + "; use --relabel");
    });
  }
  if (counted) {
    agree(rt.comm(), [&] {
      if (auto why = vertex_arrays_problem(h.rows, entries); rt.rank() == 0 && !why.empty())
        throw RangeError(path + ": the header's " + std::to_string(h.rows) + (mm ? " rows" : " vertices") + " need " +
                         why);
    });
  }
  BuildOptions build;
  build.storage = options.storage;
  build.symmetrize = h.symmetric || options.undirected;
  // A file whose header says "undirected" lists both directions of every
  // edge, as --symmetric reads them; what an option overrides is said.
  if (h.declared && options.note) {
    std::string kind = std::string(h.declared_directed ? "directed" : "undirected") +
                       (h.declared_weighted ? ", weighted" : "") + ", ids from " + std::to_string(h.declared_base);
    options.note("the file's header says: " + kind + ", " + std::to_string(h.declared_vertices) + " vertices");
    if (options.base && *options.base != h.declared_base)
      options.note("--base " + std::to_string(*options.base) + " overrides the header's ids from " +
                   std::to_string(h.declared_base));
    if (h.declared_directed && (options.undirected || options.symmetric))
      options.note(std::string(options.undirected ? "--undirected" : "--symmetric") +
                   " overrides the header: read as undirected");
    if (h.declared_weighted && options.pattern) options.note("--pattern overrides the header: the weights are ignored");
  }
  if (h.metis && options.note) {
    const std::string counts =
        "METIS: " + std::to_string(entries) + " neighbours for the header's " + std::to_string(h.entries) + " edges, ";
    options.note(counts + (t.metis_undirected ? "each listed at both ends: undirected"
                                              : "one arc each (line i lists vertex i's out-neighbours, as GAPBS reads "
                                                "it): directed"));
  }
  // --symmetric: the file's arcs are the undirected graph's, as they are.
  const bool declared_undirected = (h.declared && !h.declared_directed) || t.metis_undirected;
  const bool listed_both_ways = (options.symmetric || declared_undirected) && !build.symmetrize;
  BuildCounts counts;
  clean_as_asked(build, options, counts);
  const bool directed = !build.symmetrize && !listed_both_ways;
  auto checked = [&](EdgeList g) {
    if (listed_both_ways && !arcs_are_symmetric(g)) {
      if (!options.symmetric && t.metis_undirected)
        throw FormatError(path + ": its " + std::to_string(entries) + " neighbours for the header's " +
                          std::to_string(h.entries) + " edges say each edge is listed at both ends, but some is "
                          "listed at one end only (or with two weights): correct the file, or use --undirected to "
                          "add the missing reverses");
      throw FormatError(path + (options.symmetric ? " was read with --symmetric" : "'s header says undirected") +
                        ", but its arcs are not symmetric (some edge is listed in one direction only, or with "
                        "another weight): " + (options.symmetric ? "drop --symmetric to read it as directed" :
                        "correct the '# tessera graph:' line") + ", or use --undirected to add the missing reverses");
    }
    record_cleaning(g, counts, build.symmetrize, options);
    return g;
  };
  std::uint64_t n = counted ? h.rows : max_id + 1;
  // Vertices without edges at the top of the id range: the header counts them.
  if (h.declared && !counted && base == h.declared_base) n = std::max(n, h.declared_vertices);
  const auto file_base = static_cast<std::uint64_t>(base);
  // The file's edges as it lists them (ids less the base), parsed again at
  // every call; --pattern drops the weights.
  const EdgeSource lines = [&](const EdgeSink& take) {
    ParsedRange again = parse_range(rt, path, h, h.weighted ? 3 : 2, file_base, !options.pattern, &take, &t.range);
    if (!again.error.empty()) throw FormatError(again.error);  // the file changed since it was counted
    if (!t.first_edge.src.empty())
      take(EdgeBatch{t.first_edge.src, t.first_edge.dst, options.pattern ? std::span<const double>{}
                                                                         : std::span<const double>(t.first_edge.weight)});
  };
  return build_graph(rt, n, directed, lines, build, options.relabel, file_base, checked);
}

// A stream copied to a temporary file (created exclusively, removed on
// every exit path); its format sniffed from the first data line.
struct SpooledInput {
  std::string path, display;
  int slot = -1;
  bool created = false;
  bool matrix_market = false;
  FileFormat format = FileFormat::edge_list;

  SpooledInput(Runtime& rt, const std::string& source) : display(source == "-" ? "<stdin>" : source) {
    int flags[2] = {0, 0};
    try {
      agree(rt.comm(), [&] {
        if (rt.rank() != 0) return;
        const char* env = std::getenv("TMPDIR");
        path = unique_temporary_name(std::string(env && *env ? env : "/tmp") + "/tessera-input");
        slot = exit_cleanup::add(path);
        int out = create_exclusive(path, 0600);
        if (out < 0) throw SystemError("cannot create " + path + " to hold " + display, errno);
        created = true;
        FileDescriptor out_guard(out);
        int in = source == "-" ? ::dup(0) : ::open(source.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (in < 0) throw SystemError("cannot open " + display, errno);
        FileDescriptor in_guard(in);
        ::fcntl(in, F_SETFL, ::fcntl(in, F_GETFL) & ~O_NONBLOCK);  // a FIFO without writer reads as empty
        std::string head;
        std::vector<char> buf(1 << 20);
        for (;;) {
          ssize_t n = ::read(in, buf.data(), buf.size());
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) throw SystemError("cannot read " + display, errno);
          if (n == 0) break;
          if (head.size() < 4096) head.append(buf.data(), std::min<std::size_t>(static_cast<std::size_t>(n), 4096));
          for (ssize_t done = 0; done < n;) {
            ssize_t w = ::write(out, buf.data() + done, static_cast<std::size_t>(n - done));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) throw SystemError("cannot write " + path + " (holding " + display + ")", w < 0 ? errno : ENOSPC);
            done += w;
          }
        }
        auto first = head.find_first_not_of("\xef\xbb\xbf");
        flags[0] = first != std::string::npos && head.compare(first, 14, "%%MatrixMarket") == 0;
        // Three fields on the first data line: a weighted edge list.
        std::istringstream lines(head);
        std::string line;
        while (std::getline(lines, line)) {
          auto at = line.find_first_not_of(" \t\r");
          if (at == std::string::npos || line[at] == '#' || line[at] == '%') continue;
          std::istringstream fields(line);
          std::string a, b, c, d;
          flags[1] = (fields >> a >> b >> c) && !(fields >> d);
          break;
        }
      });
    } catch (...) {
      cleanup();
      throw;
    }
    path = broadcast(rt.comm(), path, 0);
    broadcast(rt.comm(), flags, 2, 0);
    matrix_market = flags[0] != 0;
    format = flags[1] ? FileFormat::weighted_edge_list : FileFormat::edge_list;
  }
  ~SpooledInput() { cleanup(); }
  void cleanup() {
    if (created) ::unlink(path.c_str());
    created = false;
    exit_cleanup::remove(slot);
    slot = -1;
  }
  std::string rename(std::string message) const {
    for (auto at = message.find(path); at != std::string::npos; at = message.find(path, at + display.size()))
      message.replace(at, path.size(), display);
    return message;
  }
};


// GAPBS's serialized graph (its writer.h, WriteSerializedGraph; reader.h
// reads it back): a bool `directed` (one byte), int64 arcs stored (an
// undirected graph's both directions), int64 vertices, int64 offsets[n+1],
// the neighbours (int32; .wsg: int32 neighbour then int32 weight), and for a
// directed graph the in-arcs' offsets and neighbours (the transpose). No
// padding: the offsets start at byte 17.
constexpr std::uint64_t kSerializedHeaderBytes = 17;

struct SerializedHeader {
  std::uint64_t arcs = 0, vertices = 0;
  std::uint8_t directed = 0;
};

// Where each section of a serialized graph starts (and the file ends).
struct SerializedLayout {
  std::uint64_t offsets, neighbours, in_offsets, in_neighbours, end;
  SerializedLayout(const SerializedHeader& h, std::uint64_t entry_bytes) {
    offsets = kSerializedHeaderBytes;
    neighbours = offsets + 8 * (h.vertices + 1);
    in_offsets = neighbours + entry_bytes * h.arcs;
    in_neighbours = in_offsets + (h.directed ? 8 * (h.vertices + 1) : 0);
    end = in_neighbours + (h.directed ? entry_bytes * h.arcs : 0);
  }
  std::string section_at(std::uint64_t byte) const {
    if (byte < offsets) return "header";
    if (byte < neighbours) return "row offsets";
    if (byte < in_offsets) return "neighbours";
    if (byte < in_neighbours) return "in-arc row offsets";
    return "in-arc neighbours";
  }
};

template <class T>
T unaligned(const std::byte* at) {
  T v;
  std::memcpy(&v, at, sizeof(T));
  return v;
}

// Rank 0: the header, checked against the file's length.
SerializedHeader read_serialized_header(const std::string& path, bool weighted) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw SystemError("cannot open graph file " + path, errno);
  FileDescriptor guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw SystemError("cannot stat graph file " + path, errno);
  if (!S_ISREG(st.st_mode)) throw FormatError(path + " is not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size == 0) throw FormatError(path + " is empty");
  unsigned char top[kSerializedHeaderBytes] = {};
  const ssize_t got = ::pread(fd, top, sizeof(top), 0);
  if (got < 0) throw SystemError("cannot read graph file " + path, errno);
  if (const char* kind = compression_of(top, static_cast<std::size_t>(got)))
    throw FormatError(path + ": compressed input is not supported (this is a " + std::string(kind) +
                      " file; decompress it first)");
  if (size < kSerializedHeaderBytes)
    throw FormatError(path + ": truncated at byte offset " + std::to_string(size) + ", inside the " +
                      std::to_string(kSerializedHeaderBytes) +
                      "-byte GAPBS header (bool directed, int64 arcs, int64 vertices)");
  if (top[0] > 1)
    throw FormatError(path + ": byte offset 0: the directed flag is " + std::to_string(top[0]) +
                      ", not 0 or 1: not a GAPBS serialized graph");
  const auto arcs = unaligned<std::int64_t>(reinterpret_cast<const std::byte*>(top + 1));
  const auto vertices = unaligned<std::int64_t>(reinterpret_cast<const std::byte*>(top + 9));
  if (arcs < 0) throw FormatError(path + ": byte offset 1: the arc count " + std::to_string(arcs) + " is negative");
  if (vertices < 0)
    throw FormatError(path + ": byte offset 9: the vertex count " + std::to_string(vertices) + " is negative");
  if (vertices > (std::int64_t{1} << 31))
    throw FormatError(path + ": byte offset 9: " + std::to_string(vertices) +
                      " vertices do not fit GAPBS's 32-bit serialized ids");
  SerializedHeader h{static_cast<std::uint64_t>(arcs), static_cast<std::uint64_t>(vertices), top[0]};
  const std::uint64_t entry = weighted ? 8 : 4;
  // The length the header implies (no overflow: arcs past 2^59 are no file).
  if (h.arcs > (std::uint64_t{1} << 59))
    throw FormatError(path + ": byte offset 1: " + std::to_string(h.arcs) + " arcs cannot be in a file");
  const SerializedLayout at(h, entry), other(h, weighted ? 4 : 8);
  const std::string kind = std::string(h.directed ? "directed" : "undirected") + ", " + std::to_string(h.arcs) +
                           " arcs, " + std::to_string(h.vertices) + " vertices";
  // The length of the other kind: a weighted file named .sg, or the reverse.
  const std::string misnamed =
      size == other.end ? std::string(" (the length of a GAPBS ") + (weighted ? ".sg" : ".wsg") + " file: " +
                              (weighted ? "an .sg named .wsg?)" : "a .wsg named .sg?)")
                        : "";
  if (size < at.end)
    throw FormatError(path + ": truncated at byte offset " + std::to_string(size) + ", inside its " +
                      at.section_at(size) + ": its header (" + kind + ") needs " + std::to_string(at.end) + " bytes" +
                      misnamed);
  if (size > at.end)
    throw FormatError(path + ": " + plural(size - at.end, "byte") + " past byte offset " + std::to_string(at.end) +
                      ", where the graph its header describes (" + kind + ") ends" + misnamed);
  return h;
}

// Checks one CSR's row offsets (offsets[0] = 0, never decreasing, offsets[n]
// = arcs), each rank a block of them; FormatError naming the first bad byte.
void check_serialized_offsets(Runtime& rt, const std::string& path, const std::byte* data, std::uint64_t first_byte,
                              const SerializedHeader& h, const char* what) {
  agree(rt.comm(), [&] {
    auto block = Distribution::block(h.vertices + 1, rt.size());
    const std::uint64_t lo = block.begin(rt.rank()), hi = block.end(rt.rank());
    auto offset = [&](std::uint64_t v) { return unaligned<std::int64_t>(data + first_byte + 8 * v); };
    auto where = [&](std::uint64_t v) {
      return path + ": byte offset " + std::to_string(first_byte + 8 * v) + ": the " + what + " of vertex " +
             std::to_string(v);
    };
    for (std::uint64_t v = lo; v < hi; ++v) {
      const std::int64_t o = offset(v);
      if (v == 0 && o != 0) throw FormatError(where(v) + " is " + std::to_string(o) + ", not 0");
      if (o < 0 || static_cast<std::uint64_t>(o) > h.arcs)
        throw FormatError(where(v) + " is " + std::to_string(o) + ", outside the header's " + std::to_string(h.arcs) +
                          " arcs");
      if (v > 0 && o < offset(v - 1))
        throw FormatError(where(v) + " is " + std::to_string(o) + ", less than the previous row's " +
                          std::to_string(offset(v - 1)) + " (offsets never decrease)");
      if (v == h.vertices && static_cast<std::uint64_t>(o) != h.arcs)
        throw FormatError(path + ": byte offset " + std::to_string(first_byte + 8 * v) + ": the " + what +
                          " end at arc " + std::to_string(o) + ", but the header says " + std::to_string(h.arcs) +
                          " arcs");
    }
  });
}

LoadedGraph load_serialized(Runtime& rt, const std::string& path, bool weighted, const ReadOptions& options) {
  if (options.symmetric)
    throw ConfigError("--symmetric applies to text files; the GAPBS graph " + path + " records its direction");
  if (options.relabel || options.base)
    throw ConfigError("--relabel and --base apply to text files, not to the GAPBS graph " + path +
                      " (its ids are 0-based)");
  SerializedHeader h;
  agree(rt.comm(), [&] {
    if (rt.rank() == 0) h = read_serialized_header(path, weighted);
  });
  broadcast(rt.comm(), &h, 1, 0);
  if (h.arcs == 0) throw FormatError(path + " has no edges");
  agree(rt.comm(), [&] {
    if (auto why = vertex_arrays_problem(h.vertices, h.arcs); rt.rank() == 0 && !why.empty())
      throw RangeError(path + ": the header's " + std::to_string(h.vertices) + " vertices need " + why);
  });
  const std::uint64_t entry = weighted ? 8 : 4;
  const SerializedLayout layout(h, entry);
  std::optional<Mapping> file;
  agree(rt.comm(), [&] {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw SystemError("cannot open " + path, errno);
    FileDescriptor guard(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw SystemError("cannot stat " + path, errno);
    if (static_cast<std::uint64_t>(st.st_size) != layout.end)
      throw FormatError(path + " changed while it was read (" + std::to_string(st.st_size) + " bytes, " +
                        std::to_string(layout.end) + " a moment ago)");
    file.emplace(Mapping::file(fd, layout.end, false, path));
  });
  const std::byte* data = file->data();
  check_serialized_offsets(rt, path, data, layout.offsets, h, "row offset");
  if (h.directed) check_serialized_offsets(rt, path, data, layout.in_offsets, h, "in-arc row offset");
  auto row_start = [&](std::uint64_t first_byte, std::uint64_t v) {
    return static_cast<std::uint64_t>(unaligned<std::int64_t>(data + first_byte + 8 * v));
  };
  // This rank's rows: about arcs / P arcs each (boundary k: the first vertex
  // whose row starts at or after arc ceil(kE/P)), as a build balances them.
  const int P = rt.size();
  auto boundary = [&](int k) {
    if (k == 0) return std::uint64_t{0};
    if (k == P) return h.vertices;
    const auto arc = static_cast<std::uint64_t>((static_cast<unsigned __int128>(k) * h.arcs + P - 1) / P);
    std::uint64_t lo = 0, hi = h.vertices;
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      if (row_start(layout.offsets, mid) < arc) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const std::uint64_t vlo = boundary(rt.rank()), vhi = std::max(vlo, boundary(rt.rank() + 1));
  const bool with_weights = weighted && !options.pattern;
  // The neighbours of rows [vlo, vhi) in batches: ids (and weights) checked.
  auto neighbour_of = [&](std::uint64_t first_byte, std::uint64_t k, std::uint64_t row) {
    const std::uint64_t byte = first_byte + entry * k;
    const std::int32_t v = unaligned<std::int32_t>(data + byte);
    if (v < 0 || static_cast<std::uint64_t>(v) >= h.vertices)
      throw FormatError(path + ": byte offset " + std::to_string(byte) + ": neighbour " + std::to_string(v) +
                        " of vertex " + std::to_string(row) + " is outside [0, " + std::to_string(h.vertices) + ")");
    return static_cast<std::uint64_t>(v);
  };
  auto weight_of = [&](std::uint64_t first_byte, std::uint64_t k) {
    return static_cast<double>(unaligned<std::int32_t>(data + first_byte + entry * k + 4));
  };
  constexpr std::size_t kBatch = 1 << 16;
  // Rows [vlo, vhi) of one CSR, batch by batch, as (row, neighbour, weight).
  auto rows_of = [&](std::uint64_t offsets_byte, std::uint64_t neighbours_byte, bool weights, const auto& take) {
    std::vector<std::uint64_t> src, dst;
    std::vector<double> w;
    src.reserve(kBatch), dst.reserve(kBatch);
    for (std::uint64_t u = vlo; u < vhi; ++u) {
      const std::uint64_t end = row_start(offsets_byte, u + 1);
      for (std::uint64_t k = row_start(offsets_byte, u); k < end; ++k) {
        src.push_back(u);
        dst.push_back(neighbour_of(neighbours_byte, k, u));
        if (weights) w.push_back(weight_of(neighbours_byte, k));
        if (src.size() == kBatch) {
          take(src, dst, w);
          src.clear(), dst.clear(), w.clear();
        }
      }
    }
    if (!src.empty()) take(src, dst, w);
  };
  // A directed file's in-arcs must be its out-arcs reversed: the sums of a
  // hash over both (arc_hash.hpp's symmetry sums) must agree.
  if (h.directed) {
    SymmetrySums out_sums, in_sums;
    agree(rt.comm(), [&] {
      // A batch's arcs are whole or cut rows of consecutive vertices: its
      // row offsets from the sources, then the sums of those rows.
      std::vector<std::uint64_t> rows;
      auto sum = [&rows](SymmetrySums& into) {
        return [&into, &rows](const std::vector<std::uint64_t>& src, const std::vector<std::uint64_t>& dst,
                              const std::vector<double>& w) {
          const std::uint64_t lo = src.front();
          rows.assign(src.back() - lo + 2, 0);
          for (auto u : src) ++rows[u - lo + 1];
          std::partial_sum(rows.begin(), rows.end(), rows.begin());
          into += symmetry_sums(rows, std::span<const std::uint64_t>(dst), std::span<const double>(w), lo);
        };
      };
      rows_of(layout.offsets, layout.neighbours, weighted, sum(out_sums));
      rows_of(layout.in_offsets, layout.in_neighbours, weighted, sum(in_sums));
    });
    std::uint64_t both[2] = {out_sums.forward, in_sums.backward};
    all_reduce(rt.comm(), both, 2, MPI_SUM);
    if (both[0] != both[1])
      throw FormatError(path + ": its in-arcs (from byte offset " + std::to_string(layout.in_offsets) +
                        ") are not its out-arcs reversed: the file is corrupt (write it again with GAPBS's converter)");
  }
  const EdgeSource arcs = [&](const EdgeSink& take) {
    rows_of(layout.offsets, layout.neighbours, with_weights,
            [&](const std::vector<std::uint64_t>& src, const std::vector<std::uint64_t>& dst,
                const std::vector<double>& w) { take(EdgeBatch{src, dst, w}); });
  };
  BuildOptions build;
  build.storage = options.storage;
  build.symmetrize = options.undirected && h.directed;
  BuildCounts counts;
  clean_as_asked(build, options, counts);
  const bool listed_both_ways = !h.directed;
  auto checked = [&](EdgeList g) {
    if (listed_both_ways && !arcs_are_symmetric(g))
      throw FormatError(path + ": its header says undirected (byte offset 0), but its arcs are not symmetric (some "
                        "arc lacks its reverse, or has another weight): the file is corrupt");
    record_cleaning(g, counts, build.symmetrize, options);
    return g;
  };
  return build_graph(rt, h.vertices, h.directed && !build.symmetrize, arcs, build, false, 0, checked);
}

LoadedGraph load_file(Runtime& rt, const std::string& path, FileFormat format, const ReadOptions& options) {
  if (format == FileFormat::gapbs_serialized || format == FileFormat::gapbs_weighted_serialized)
    return load_serialized(rt, path, format == FileFormat::gapbs_weighted_serialized, options);
  return load_text(rt, path, format, options);
}

}  // namespace

namespace {
// load_binary, optionally without the weight array (ReadOptions::pattern).
EdgeList load_binary_arrays(Runtime& rt, const std::string& dir, const StorageOptions& storage, bool with_weights);
}  // namespace

LoadedGraph read_graph(Runtime& rt, const std::string& path, const ReadOptions& options) {
  trace::Span traced(trace::Category::io, "read graph");
  FileFormat f = format_of(path);
  if (options.symmetric && options.undirected)
    throw ConfigError("--symmetric (the file lists both directions) and --undirected (add the reverses) exclude each "
                      "other; name one");
  if (f == FileFormat::binary) {
    if (options.symmetric)
      throw ConfigError("--symmetric applies to text files; the binary graph " + path + " records its direction");
    if (options.relabel || options.base)
      throw ConfigError("--relabel and --base apply to text files, not to the binary graph " + path);
    auto g = load_binary_arrays(rt, path, options.storage, !options.pattern);
    if (options.undirected && g.directed()) g = g.symmetrized(options.storage);
    auto ids = IdMap::identity(rt, g.vertex_ranges(), 0);  // binary ids are 0-based
    return {std::move(g), std::move(ids)};
  }
  // Standard input ("-"), a pipe or a FIFO: rank 0 spools it to a temporary
  // file every rank then reads (ranks on one host, or TMPDIR shared).
  int stream = 0;
  agree(rt.comm(), [&] {
    if (rt.rank() != 0 || path == "-") {
      stream = path == "-";
      return;
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return;  // load_text names the error
    if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) stream = 1;
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
      throw FormatError(path + " is a device, not a graph file");
  });
  if (!broadcast(rt.comm(), stream, 0)) return load_file(rt, path, f, options);
  SpooledInput spool(rt, path);
  if (path == "-" || spool.matrix_market) f = spool.matrix_market ? FileFormat::matrix_market : spool.format;
  try {
    return load_file(rt, spool.path, f, options);
  } catch (const FormatError& e) {
    throw FormatError(spool.rename(e.what()));
  } catch (const RangeError& e) {
    throw RangeError(spool.rename(e.what()));
  }
}

ParsedText parse_text_edges(Runtime& rt, const std::string& path, const ReadOptions& options) {
  const FileFormat f = format_of(path);
  if (f == FileFormat::binary || f == FileFormat::gapbs_serialized || f == FileFormat::gapbs_weighted_serialized)
    throw ConfigError(path + " is a binary graph, not a text file to parse");
  TextParse t = parse_text(rt, path, f, options);
  ParsedText out;
  out.edges = std::move(t.parsed.edges);
  if (options.pattern) out.edges.weight.clear();
  out.vertices = f == FileFormat::matrix_market || t.h.dimacs || t.h.metis ? t.h.rows : t.max_id + 1;
  out.bytes = t.parsed.bytes;
  return out;
}

namespace {

// EdgeList::adopt on a file's arrays, its complaints (an arc out of its
// rank's range, out of order, a destination outside the graph) naming the file.
[[noreturn]] void throw_not_symmetric(const std::string& path) {
  throw MismatchError(path + " says \"directed\": false, but its arcs are not symmetric (some arc lacks its "
                      "reverse); the file is corrupt or was edited: write it again, or set \"directed\": true");
}

// An undirected file's arcs are checked to be their own reverses in the
// same pass (adopt's `symmetric`), its pages read once.
EdgeList adopted_from(const std::string& path, std::uint64_t n, bool directed, Distribution vertex_ranges,
                      DistArray<std::uint64_t> offsets, IdArray dst, std::optional<DistArray<double>> weight) {
  bool symmetric = true;
  std::optional<EdgeList> g;
  try {
    g.emplace(EdgeList::adopt(n, directed, std::move(vertex_ranges), std::move(offsets), std::move(dst),
                              std::move(weight), directed ? nullptr : &symmetric));
  } catch (const RangeError& e) {
    throw RangeError(path + ": " + e.what() + " (the file is corrupt: write it again)");
  } catch (const MismatchError& e) {
    throw MismatchError(path + ": " + e.what() + " (the file is corrupt: write it again)");
  }
  if (!symmetric) throw_not_symmetric(path + "/" + binary_format::kGraphFile);
  return std::move(*g);
}

}  // namespace

namespace {

// Element i of an attached array, wherever its segments put it.
template <class T>
T element_at(const AttachedArray& a, std::uint64_t i, const std::string& path) {
  for (std::size_t k = 0; k < a.segment_count(); ++k) {
    const auto& seg = a.segment(k);
    if (i >= seg.begin && i < seg.begin + seg.count) return a.segment_span<T>(k)[i - seg.begin];
  }
  throw FormatError(path + ": its segments do not cover element " + std::to_string(i));
}

// Copies elements [lo, hi) of an attached array into `out` (its local part).
template <class T>
void copy_range(const AttachedArray& a, std::uint64_t lo, std::uint64_t hi, std::span<T> out) {
  for (std::size_t k = 0; k < a.segment_count(); ++k) {
    const auto& seg = a.segment(k);
    const std::uint64_t b = std::max(lo, seg.begin), e = std::min(hi, seg.begin + seg.count);
    if (b < e) {
      auto data = a.segment_span<T>(k);
      std::copy(data.begin() + static_cast<std::ptrdiff_t>(b - seg.begin),
                data.begin() + static_cast<std::ptrdiff_t>(e - seg.begin),
                out.begin() + static_cast<std::ptrdiff_t>(b - lo));
    }
  }
}

// What edgelist.json says.
struct BinaryHeader {
  int version = 0, ranks = 0;
  std::uint64_t vertices = 0, arcs = 0;
  bool directed = true, weighted = false;
  IdWidth width = IdWidth::wide;
  std::vector<std::uint64_t> vertex_offsets;
};

BinaryHeader read_binary_header(Runtime& rt, const std::string& dir) {
  using namespace binary_format;
  const std::string path = dir + "/" + kGraphFile;
  std::string text;
  agree(rt.comm(), [&] {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 && errno == ENOENT)
      throw FormatError(dir + " is not a Tessera binary graph (no " + kGraphFile + ")");
    text = read_small_regular_file(path, "graph metadata");
  });
  BinaryHeader h;
  agree(rt.comm(), [&] {
    try {
      auto j = nlohmann::json::parse(text);
      h.version = j.at("format").get<std::string>() == kGraphFormat ? j.at("version").get<int>() : 0;
      if (h.version != 1 && h.version != kGraphVersion)
        throw FormatError(path + " is not a version 1 or " + std::to_string(kGraphVersion) + " " + kGraphFormat +
                          " file");
      h.vertices = j.at("vertices").get<std::uint64_t>();
      // Version 1 counted arcs as "edges".
      h.arcs = h.version == 1 ? j.at("edges").get<std::uint64_t>() : j.at("arcs").get<std::uint64_t>();
      h.directed = j.at("directed").get<bool>();
      h.weighted = j.at("weighted").get<bool>();
      h.ranks = j.at("ranks").get<int>();
      h.vertex_offsets = j.at("vertex_offsets").get<std::vector<std::uint64_t>>();
      if (h.version > 1) {
        const auto type = j.at("id_type").get<std::string>();
        if (type != "uint32" && type != "uint64")
          throw FormatError(path + ": \"id_type\" is \"" + type + "\", not \"uint32\" or \"uint64\"");
        h.width = type == "uint32" ? IdWidth::narrow : IdWidth::wide;
      }
    } catch (const nlohmann::json::exception& e) {
      throw FormatError(path + ": " + e.what());
    }
    if (auto why = vertex_arrays_problem(h.vertices, h.arcs); !why.empty())
      throw RangeError(path + ": \"vertices\": " + std::to_string(h.vertices) + " needs " + why);
    if (h.width == IdWidth::narrow && h.vertices > (std::uint64_t{1} << 32))
      throw FormatError(path + ": " + std::to_string(h.vertices) + " vertices cannot have 32-bit ids");
    if (h.ranks < 1 || h.vertex_offsets.size() != static_cast<std::size_t>(h.ranks) + 1 ||
        h.vertex_offsets.front() != 0 || h.vertex_offsets.back() != h.vertices ||
        !std::is_sorted(h.vertex_offsets.begin(), h.vertex_offsets.end()))
      throw FormatError(path + ": vertex_offsets must be " + std::to_string(h.ranks + 1) +
                        " increasing offsets from 0 to the vertex count");
  });
  return h;
}

// A version 1 directory (src and dst arrays): each rank reads a block of
// the arcs and the graph is built again (sorted and distributed).
EdgeList load_binary_v1(Runtime& rt, const std::string& dir, const BinaryHeader& h, const StorageOptions& storage,
                        bool with_weights) {
  using namespace binary_format;
  LocalEdges local;
  agree(rt.comm(), [&] {
    auto open = [&](const std::string& name) {
      auto a = AttachedArray::open(array_file(dir, name), Access::read_only);
      if (a.length() != h.arcs)
        throw MismatchError(array_file(dir, name) + " holds " + std::to_string(a.length()) + " elements, expected " +
                            std::to_string(h.arcs));
      return a;
    };
    auto block = Distribution::block(h.arcs, rt.size());
    const std::uint64_t lo = block.begin(rt.rank()), hi = block.end(rt.rank());
    local.src.resize(hi - lo), local.dst.resize(hi - lo);
    copy_range<std::uint64_t>(open("src"), lo, hi, local.src);
    copy_range<std::uint64_t>(open("dst"), lo, hi, local.dst);
    if (h.weighted && with_weights) local.weight.resize(hi - lo), copy_range<double>(open("weight"), lo, hi, local.weight);
  });
  BuildOptions o;
  o.storage = storage;
  return EdgeList::build(rt, h.vertices, h.directed, std::move(local), o);
}

EdgeList load_binary_arrays(Runtime& rt, const std::string& dir, const StorageOptions& storage, bool with_weights) {
  using namespace binary_format;
  const std::string path = dir + "/" + kGraphFile;
  const BinaryHeader h = read_binary_header(rt, dir);
  if (h.version == 1) {
    auto g = load_binary_v1(rt, dir, h, storage, with_weights);
    if (!g.directed() && !arcs_are_symmetric(g)) throw_not_symmetric(path);
    return g;
  }
  const std::uint64_t n = h.vertices, m = h.arcs;
  const int ranks = h.ranks;

  if (ranks == rt.size()) {  // map the files in place
    std::vector<std::uint64_t> esizes(static_cast<std::size_t>(ranks)), osizes(esizes.size()), vsizes(esizes.size());
    agree(rt.comm(), [&] {
      auto meta = SharedArrayMetadata::read(array_file(dir, "dst"));
      if (meta.length != m)
        throw MismatchError(array_file(dir, "dst") + " holds " + std::to_string(meta.length) + " arcs but " + path +
                            " says " + std::to_string(m));
      if (meta.element.name != id_width_name(h.width))
        throw MismatchError(array_file(dir, "dst") + " holds " + meta.element.name + " ids but " + path + " says " +
                            id_width_name(h.width));
      for (std::size_t r = 0; r < esizes.size(); ++r) {
        esizes[r] = meta.offsets[r + 1] - meta.offsets[r];
        vsizes[r] = h.vertex_offsets[r + 1] - h.vertex_offsets[r];
        osizes[r] = vsizes[r] + 1;
      }
    });
    auto edge_ranges = Distribution::weighted_block(esizes);
    DistArray<std::uint64_t> offsets(rt, Distribution::weighted_block(osizes), StorageOptions::existing("offsets", dir));
    IdArray dst = with_id_type(h.width, [&](auto zero) -> IdArray {
      return DistArray<decltype(zero)>(rt, edge_ranges, StorageOptions::existing("dst", dir));
    });
    std::optional<DistArray<double>> weight;
    if (h.weighted && with_weights) weight.emplace(rt, edge_ranges, StorageOptions::existing("weight", dir));
    return adopted_from(dir, n, h.directed, Distribution::weighted_block(vsizes), std::move(offsets), std::move(dst),
                        std::move(weight));
  }

  // Another rank count. Each rank finds its vertex range and those rows'
  // arcs through the mapped files and copies them, with no sort and no
  // all-to-all. The ranges give every rank about E/P arcs (as
  // EdgeList::build's do): boundary k is the first vertex whose row starts
  // at or after arc ceil(kE/P).
  std::optional<DistArray<std::uint64_t>> offsets;
  std::optional<IdArray> dst;
  std::optional<DistArray<double>> weight;
  std::optional<Distribution> vertex_ranges;
  agree(rt.comm(), [&] {
    auto open = [&](const std::string& name, std::uint64_t length) {
      auto a = AttachedArray::open(array_file(dir, name), Access::read_only);
      if (a.length() != length)
        throw MismatchError(array_file(dir, name) + " holds " + std::to_string(a.length()) + " elements, expected " +
                            std::to_string(length));
      return a;
    };
    const AttachedArray o = open("offsets", n + static_cast<std::uint64_t>(ranks)), d = open("dst", m);
    const std::string offsets_file = array_file(dir, "offsets");  // named once: row_start runs once a vertex
    std::optional<AttachedArray> w;
    if (h.weighted && with_weights) w.emplace(open("weight", m));
    if (d.element().name != id_width_name(h.width))
      throw MismatchError(array_file(dir, "dst") + " holds " + d.element().name + " ids but " + path + " says " +
                          id_width_name(h.width));
    // The writer's arc offsets: where each writing rank's arcs begin.
    std::vector<std::uint64_t> arc_begin(static_cast<std::size_t>(ranks) + 1, 0);
    for (int f = 0; f < ranks; ++f) {
      const auto uf = static_cast<std::size_t>(f);
      const std::uint64_t rows_end = h.vertex_offsets[uf + 1] + uf;  // its last offset, in the offsets array
      arc_begin[uf + 1] = arc_begin[uf] + element_at<std::uint64_t>(o, rows_end, offsets_file);
    }
    if (arc_begin.back() != m)
      throw MismatchError(offsets_file + " ends at arc " + std::to_string(arc_begin.back()) +
                          ", expected " + std::to_string(m) + " (the file is corrupt: write it again)");
    // Global arc position where vertex v's row starts (v = n: m); a row
    // offset outside its writing rank's arcs is refused before any use.
    auto row_start = [&](std::uint64_t v) {
      if (v >= n) return m;
      const auto f = static_cast<std::size_t>(
          std::upper_bound(h.vertex_offsets.begin(), h.vertex_offsets.end(), v) - h.vertex_offsets.begin() - 1);
      const std::uint64_t at = element_at<std::uint64_t>(o, v + f, offsets_file);
      if (at > arc_begin[f + 1] - arc_begin[f])
        throw MismatchError(offsets_file + ": the row of vertex " + std::to_string(v) + " starts at " +
                            std::to_string(at) + ", past its rank's " + std::to_string(arc_begin[f + 1] - arc_begin[f]) +
                            " arcs (the file is corrupt: write it again)");
      return arc_begin[f] + at;
    };
    const int P = rt.size();
    std::vector<std::uint64_t> vsizes(static_cast<std::size_t>(P), 0);
    if (m == 0) {
      vertex_ranges = Distribution::block(n, P);
    } else {
      std::uint64_t previous = 0;
      for (int k = 0; k < P; ++k) {
        std::uint64_t bound = n;
        if (k + 1 < P) {
          const auto arc = static_cast<std::uint64_t>((static_cast<unsigned __int128>(k + 1) * m + P - 1) / P);
          std::uint64_t lo = previous, hi = n;  // the first v >= previous with row_start(v) >= arc
          while (lo < hi) {
            const std::uint64_t mid = lo + (hi - lo) / 2;
            if (row_start(mid) < arc) lo = mid + 1;
            else hi = mid;
          }
          bound = lo;
        }
        vsizes[static_cast<std::size_t>(k)] = bound - previous;
        previous = bound;
      }
      vertex_ranges = Distribution::weighted_block(vsizes);
    }
    const std::uint64_t vlo = vertex_ranges->begin(rt.rank()), vhi = vertex_ranges->end(rt.rank());
    const std::uint64_t lo = row_start(vlo), hi = row_start(vhi);
    if (hi < lo)
      throw MismatchError(offsets_file + ": row offsets decrease between vertices " +
                          std::to_string(vlo) + " and " + std::to_string(vhi) +
                          " (the file is corrupt: write it again)");
    const auto edge_ranges = Distribution::weighted_block(all_gather(rt.comm(), hi - lo));
    auto& rows = offsets.emplace(rt, Distribution::weighted_block(all_gather(rt.comm(), vhi - vlo + 1)),
                                 array_storage(storage, "offsets"));
    for (std::uint64_t v = vlo; v <= vhi; ++v) rows.local()[v - vlo] = row_start(v) - lo;
    // The rows' offsets are rebased (a copy, per vertex); their arcs are
    // mapped in place when each rank's lie in one writer's segment (a file
    // written by one rank, read by several), as at the writer's rank count.
    // Copied when the caller asks for Shared storage of its own (a graph
    // it publishes to other processes).
    bool whole = false;
    for (int f = 0; f < ranks; ++f) whole |= arc_begin[static_cast<std::size_t>(f)] <= lo && hi <= arc_begin[static_cast<std::size_t>(f) + 1];
    const bool in_place = resolved_storage_kind(rt, storage) != StorageKind::shared &&
                          all_reduce(rt.comm(), static_cast<int>(whole), MPI_MIN);
    dst.emplace(with_id_type(h.width, [&](auto zero) -> IdArray {
      using Id = decltype(zero);
      if (in_place) return DistArray<Id>(rt, edge_ranges, StorageOptions::existing_by_range("dst", dir));
      DistArray<Id> a(rt, edge_ranges, array_storage(storage, "dst"));
      copy_range<Id>(d, lo, hi, a.local());
      return a;
    }));
    if (w && in_place) weight.emplace(rt, edge_ranges, StorageOptions::existing_by_range("weight", dir));
    else if (w) copy_range<double>(*w, lo, hi, weight.emplace(rt, edge_ranges, array_storage(storage, "weight")).local());
  });
  // The constructor checks every row: offsets in order, destinations inside
  // the graph and sorted (a corrupt file is refused there).
  return adopted_from(dir, n, h.directed, std::move(*vertex_ranges), std::move(*offsets), std::move(*dst),
                      std::move(weight));
}

}  // namespace

EdgeList load_binary(Runtime& rt, const std::string& dir, const StorageOptions& storage) {
  return load_binary_arrays(rt, dir, storage, true);
}

LoadedGraph from_edges(Runtime& rt, const EdgeBatch& local, const FromEdgesOptions& options) {
  const bool weighted = all_reduce(rt.comm(), static_cast<int>(!local.weight.empty()), MPI_MAX) != 0;
  agree(rt.comm(), [&] {  // a fault on one rank is every rank's
    if (local.src.size() != local.dst.size() || (!local.weight.empty() && local.weight.size() != local.src.size()))
      throw MismatchError("from_edges: " + std::to_string(local.src.size()) + " sources, " +
                          std::to_string(local.dst.size()) + " destinations and " +
                          std::to_string(local.weight.size()) + " weights; give as many of each (or no weights)");
    if (weighted && local.weight.empty() && !local.src.empty())
      throw MismatchError("from_edges: some ranks gave weights and this one did not");
    for (double w : local.weight)
      if (!std::isfinite(w)) throw RangeError("from_edges: a weight is not a finite number (NaN or infinite)");
  });
  const EdgeSource edges = [&](const EdgeSink& take) {
    if (!local.src.empty()) take(local);
  };
  std::uint64_t largest = 0;
  for (std::size_t k = 0; k < local.src.size(); ++k) largest = std::max({largest, local.src[k] + 1, local.dst[k] + 1});
  largest = all_reduce(rt.comm(), largest, MPI_MAX);
  std::uint64_t n = options.relabel ? 0 : options.vertices.value_or(largest);
  if (!options.relabel) {
    if (largest > n)
      throw RangeError("from_edges: vertex id " + std::to_string(largest - 1) + " is out of range for a graph of " +
                       std::to_string(n) + " vertices");
    if (auto why = vertex_arrays_problem(n, all_reduce(rt.comm(), std::uint64_t{local.src.size()}, MPI_SUM));
        !why.empty())
      throw RangeError("from_edges: vertex id " + std::to_string(n - 1) + " needs " + why + "; relabel");
  }
  BuildOptions build;
  build.storage = options.storage;
  build.symmetrize = options.undirected;
  build.drop_duplicates = options.symmetric && !options.undirected;
  const bool listed_both_ways = build.drop_duplicates;
  const bool directed = !options.undirected && !options.symmetric;
  auto checked = [&](EdgeList g) {
    if (listed_both_ways && !arcs_are_symmetric(g))
      throw FormatError("from_edges: the edges were given as symmetric, but some edge is given in one direction "
                        "only, or with another weight; pass undirected to add the missing reverses");
    return g;
  };
  return build_graph(rt, n, directed, edges, build, options.relabel, 0, checked);
}

}  // namespace tessera::graph
