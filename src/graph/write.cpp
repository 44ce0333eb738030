// Writers: text in parallel through one temporary file (a stream -- device,
// FIFO, standard output -- in place by rank 0), binary as persisted
// Shared-storage arrays.
#include "tessera/graph/write.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/exit_cleanup.hpp"
#include "tessera/runtime/trace.hpp"
#include "tessera/runtime/wait.hpp"
#include "tessera/storage/attach.hpp"
#include "tessera/storage/mapping.hpp"
#include "binary_format.hpp"

namespace tessera::graph {

using namespace binary_format;

namespace {

// Rank 0's view of an output, on every rank.
void share(Runtime& rt, OutputPath& out) {
  int numbers[2] = {static_cast<int>(out.kind), out.descriptor};
  broadcast(rt.comm(), numbers, 2, 0);
  out.kind = static_cast<OutputPath::Kind>(numbers[0]);
  out.descriptor = numbers[1];
  out.path = broadcast(rt.comm(), out.path, 0);
  out.what = broadcast(rt.comm(), out.what, 0);
}

// Rank 0 looks at `path`; every rank gets its answer (and its refusal).
OutputPath resolve_on_rank0(Runtime& rt, const std::string& path) {
  OutputPath out;
  agree(rt.comm(), [&] {
    if (rt.rank() == 0) out = resolve_output_path(path);
  });
  share(rt, out);
  return out;
}

constexpr int kStreamTag = 0x7e55;
constexpr std::size_t kStreamChunk = std::size_t{16} << 20;

// Collective: rank 0 opens the stream and writes its `mine`, then every
// other rank's in rank order, received in chunks (no rank's text is copied
// whole to rank 0). Only rank 0 opens it: a FIFO's reader sees one writer and
// one end of file, and every other rank waits in MPI, not in open(). Rank 0
// receives everything even after a failed write, so no rank is left waiting.
void write_stream(Runtime& rt, const OutputPath& out, std::string_view mine) {
  MPI_Comm comm = rt.comm();
  agree(comm, [&] {
    if (rt.rank() != 0) {
      std::uint64_t size = mine.size();
      MPI_Request request;
      TESSERA_MPI(MPI_Isend(&size, 1, MPI_UINT64_T, 0, kStreamTag, comm, &request));
      wait(request);
      for (std::size_t done = 0; done < mine.size(); done += kStreamChunk) {
        const int n = static_cast<int>(std::min(kStreamChunk, mine.size() - done));
        TESSERA_MPI(MPI_Isend(mine.data() + done, n, MPI_BYTE, 0, kStreamTag, comm, &request));
        wait(request);
      }
      return;
    }
    std::optional<OutputStream> stream;
    std::exception_ptr failed;
    auto put = [&](std::string_view bytes) {
      if (failed) return;
      try {
        if (!stream) stream.emplace(out);
        stream->write(bytes);
      } catch (...) {
        failed = std::current_exception();
      }
    };
    put(mine);  // opens the stream even when there is nothing to write: its reader gets an end of file
    std::vector<char> buffer;
    for (int r = 1; r < rt.size(); ++r) {
      std::uint64_t size = 0;
      MPI_Request request;
      TESSERA_MPI(MPI_Irecv(&size, 1, MPI_UINT64_T, r, kStreamTag, comm, &request));
      wait(request);
      for (std::uint64_t done = 0; done < size; done += kStreamChunk) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kStreamChunk, size - done));
        buffer.resize(n);
        TESSERA_MPI(MPI_Irecv(buffer.data(), static_cast<int>(n), MPI_BYTE, r, kStreamTag, comm, &request));
        wait(request);
        put(std::string_view(buffer.data(), n));
      }
    }
    if (!failed) {
      try {
        stream->close();
      } catch (...) {
        failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
  });
}

// Collective: rank 0's `header`, then section 0 of every rank in rank order,
// then section 1 of every rank, ...: one file, written through a temporary
// renamed at the end (or handed to `pending`), every rank writing its
// sections at their offsets. `out` a file (resolve_on_rank0's).
void write_sections_to(Runtime& rt, const OutputPath& out, const std::string& header,
                       const std::vector<std::string>& sections, PendingOutputs* pending) {
  std::vector<std::uint64_t> offsets;
  std::uint64_t at = header.size();
  for (const auto& part : sections) {
    offsets.push_back(at + exclusive_prefix_sum(rt.comm(), part.size()));
    at += all_reduce<std::uint64_t>(rt.comm(), part.size(), MPI_SUM);
  }
  const std::string& destination = out.path;
  std::string tmp;
  if (rt.rank() == 0) tmp = unique_temporary_name(destination);
  tmp = broadcast(rt.comm(), tmp, 0);
  bool created = false;
  int slot = -1;
  try {
    agree(rt.comm(), [&] {
      if (rt.rank() != 0) return;
      int fd = create_exclusive(tmp, 0644);
      if (fd < 0) throw SystemError("cannot create " + tmp, errno);
      created = true;
      slot = exit_cleanup::add(tmp);
      ::close(fd);
    });
    agree(rt.comm(), [&] {
      int fd = ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) throw SystemError("cannot open " + tmp, errno);
      FileDescriptor guard(fd);
      auto write_at = [&](const std::string& data, std::uint64_t offset) {
        for (std::size_t done = 0; done < data.size();) {
          ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) throw SystemError("cannot write " + tmp, n < 0 ? errno : ENOSPC);
          done += static_cast<std::size_t>(n);
        }
      };
      if (rt.rank() == 0) write_at(header, 0);
      for (std::size_t k = 0; k < sections.size(); ++k) write_at(sections[k], offsets[k]);
    });
    if (pending) {
      pending->add(tmp, destination, false, slot >= 0 ? std::vector<int>{slot} : std::vector<int>{});
      return;
    }
    agree(rt.comm(), [&] {
      if (rt.rank() == 0 && std::rename(tmp.c_str(), destination.c_str()) != 0)
        throw SystemError("cannot rename " + tmp + " to " + destination, errno);
    });
    if (slot >= 0) exit_cleanup::remove(slot);
  } catch (...) {
    if (created) ::unlink(tmp.c_str());
    if (slot >= 0) exit_cleanup::remove(slot);
    throw;
  }
}

}  // namespace

// Every rank writes its text at its offset of one temporary file, which rank
// 0 renames into place only when all ranks succeeded (or hands to `pending`).
void write_text_file(Runtime& rt, const std::string& path, const std::string& header, const std::string& body,
                     PendingOutputs* pending) {
  trace::Span traced(trace::Category::io, "write file");
  const OutputPath out = resolve_on_rank0(rt, path);
  if (out.kind == OutputPath::Kind::directory) throw ConfigError(path + " is a directory; name a file");
  if (out.stream()) {
    std::string data = rt.rank() == 0 ? header + body : body;
    if (pending) return pending->add_stream(out, std::move(data));
    return write_stream(rt, out, data);
  }
  write_sections_to(rt, out, header, {body}, pending);
}

PendingOutputs::~PendingOutputs() { discard(); }

void PendingOutputs::add(std::string temporary, std::string destination, bool directory,
                         std::vector<int> cleanup_slots) {
  Entry e;
  e.temporary = std::move(temporary);
  e.destination = std::move(destination);
  e.directory = directory;
  e.cleanup_slots = std::move(cleanup_slots);
  entries_.push_back(std::move(e));
}

void PendingOutputs::add_stream(OutputPath target, std::string data) {
  Entry e;
  e.destination = target.path;
  e.stream = true;
  e.target = std::move(target);
  e.data = std::move(data);
  entries_.push_back(std::move(e));
}

void PendingOutputs::discard() noexcept {
  for (auto& e : entries_) {
    if (rt_->rank() == 0 && !e.stream) {
      std::error_code ec;
      std::filesystem::remove_all(e.temporary, ec);
    }
    for (int s : e.cleanup_slots) exit_cleanup::remove(s);
  }
  entries_.clear();
}

void PendingOutputs::commit() {
  // Streams first, while every file is still a temporary: a stream cannot be
  // taken back, a temporary can.
  try {
    for (auto& e : entries_) {
      if (!e.stream) continue;
      write_stream(*rt_, e.target, e.data);
      std::string().swap(e.data);
    }
  } catch (...) {
    discard();
    throw;
  }
  std::erase_if(entries_, [](const Entry& e) { return e.stream; });
  std::size_t done = 0;
  try {
    agree(rt_->comm(), [&] {
      if (rt_->rank() != 0) return;
      for (; done < entries_.size(); ++done) {
        const auto& e = entries_[done];
        if (std::rename(e.temporary.c_str(), e.destination.c_str()) == 0) continue;
        int err = errno;
        std::string written;
        for (std::size_t k = 0; k < done; ++k) written += (k ? ", " : "") + entries_[k].destination;
        std::string note = done ? " (already written: " + written + ")" : "";
        if (e.directory && (err == ENOTEMPTY || err == EEXIST))
          throw ConfigError("a Tessera graph was written to " + e.destination + " by another job meanwhile; it is kept" +
                            note);
        throw SystemError("cannot rename " + e.temporary + " to " + e.destination + note, err);
      }
    });
  } catch (...) {
    // The renamed ones are in place; the others are removed.
    done = broadcast(rt_->comm(), static_cast<std::uint64_t>(done), 0);
    for (std::size_t k = 0; k < done; ++k)
      for (int s : entries_[k].cleanup_slots) exit_cleanup::remove(s);
    entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(done));
    discard();
    throw;
  }
  for (auto& e : entries_)
    for (int s : e.cleanup_slots) exit_cleanup::remove(s);
  entries_.clear();
}

namespace {

bool ends_with(const std::string& text, std::string_view end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

// "-", or a stream whose name says no format: edge-list text with the
// graph's weights when it has some.
bool free_edge_list(const std::string& path) {
  if (path == "-") return true;
  if (ends_with(path, ".el")) return false;
  try {
    return resolve_output_path(path).stream();
  } catch (const Error&) {
    return false;  // check_output_path names what is wrong with it
  }
}

// Where a binary graph named `dir_in` goes: `dir_in` with its links followed
// (a link to an empty directory keeps pointing there). Refuses what cannot
// take one; a missing directory is created later, under a writable ancestor.
std::string binary_destination(const std::string& dir_in) {
  namespace fs = std::filesystem;
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string real = follow_symlinks(dir);
  const std::string via = real == dir ? "" : " (a link to " + real + ")";
  std::error_code ec;
  struct stat st {};
  if (::stat(real.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
      throw ConfigError(dir + via + " is a " +
                        (S_ISCHR(st.st_mode) ? "character device" : S_ISFIFO(st.st_mode) ? "FIFO" : "socket") +
                        ": a binary graph (.tsg) is a directory of files and cannot be streamed; write .el, .wel or "
                        ".mtx text there instead");
    if (S_ISDIR(st.st_mode) && fs::exists(real + "/" + kGraphFile, ec))
      throw ConfigError("a Tessera graph already exists in " + dir + via + "; remove it or choose another directory");
    if (!S_ISDIR(st.st_mode) || !fs::is_empty(real, ec))
      throw ConfigError(dir + via + " exists and is not an empty directory");
  }
  fs::path ancestor = fs::path(real).parent_path();
  while (!ancestor.empty() && !fs::exists(ancestor, ec)) ancestor = ancestor.parent_path();
  if (ancestor.empty()) ancestor = ".";
  if (!fs::is_directory(ancestor, ec))
    throw ConfigError("cannot write " + dir + via + ": " + ancestor.string() + " is not a directory");
  if (::access(ancestor.c_str(), W_OK | X_OK) != 0)
    throw ConfigError("cannot write " + dir + via + ": directory " + ancestor.string() + " is not writable");
  return real;
}

}  // namespace

void check_graph_format(const std::string& path, bool weighted) {
  FileFormat f = format_of(path);
  if (f == FileFormat::weighted_edge_list && !weighted)
    throw ConfigError(path + ": a .wel file needs a weighted graph; use .el");
  if (f == FileFormat::edge_list && weighted && !free_edge_list(path))
    throw ConfigError(path + ": a .el file would drop the weights; use .wel or .mtx");
  if (f == FileFormat::gapbs_weighted_serialized && !weighted)
    throw ConfigError(path + ": a .wsg file needs a weighted graph; use .sg");
  if (f == FileFormat::gapbs_serialized && weighted)
    throw ConfigError(path + ": a .sg file would drop the weights; use .wsg (GAPBS's weighted form, int32 weights)");
}

OutputPath check_output_path(Runtime& rt, const std::string& path, OutputKind kind) {
  OutputPath result;
  agree(rt.comm(), [&] {
    if (rt.rank() != 0) return;
    if (path.empty()) throw ConfigError("an output path is empty");
    const bool binary = format_of(path) == FileFormat::binary;
    if (binary && kind == OutputKind::text_lines) {
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        throw ConfigError(path + " is a directory; name a file for these text lines (\"vertex value\")");
      throw ConfigError(path + " names a binary graph directory, but this output is text lines (\"vertex value\"): "
                        "choose a file name such as values.txt");
    }
    if (binary) {
      result.kind = OutputPath::Kind::directory;
      result.path = binary_destination(path);
      return;
    }
    result = resolve_output_path(path);
    if (result.kind == OutputPath::Kind::directory) throw ConfigError(path + " is a directory; name a file");
  });
  share(rt, result);
  return result;
}

namespace {

template <class T, class Format>
void write_values(const IdMap& ids, std::span<const T> values, const std::string& path,
                  const VertexValuesOptions& options, Format format) {
  Runtime& rt = ids.runtime();
  agree(rt.comm(), [&] {
    if (values.size() != ids.vertex_ranges().count(rt.rank()))
      throw MismatchError("write_vertex_values: " + std::to_string(values.size()) + " values for this rank's " +
                          std::to_string(ids.vertex_ranges().count(rt.rank())) + " vertices");
  });
  auto file_ids = ids.local_file_ids();
  std::string body;
  body.reserve(values.size() * 24);
  char buf[96];
  for (std::size_t i = 0; i < values.size(); ++i) {
    int n = std::snprintf(buf, sizeof(buf), "%" PRIu64 " ", file_ids[i]);
    body.append(buf, static_cast<std::size_t>(n));
    format(body, values[i]);
    body.push_back('\n');
  }
  std::string header = "# " + options.id_column + " " + options.value_column + "\n";
  if (!options.note.empty()) header += "# " + options.note + "\n";
  write_text_file(rt, path, header, body, options.pending);
}

}  // namespace

void write_vertex_values(const IdMap& ids, std::span<const double> local_values, const std::string& path,
                         const VertexValuesOptions& options) {
  write_values(ids, local_values, path, options, [&](std::string& out, double v) {
    if (std::isnan(v)) {
      out += options.nan_text;
      return;
    }
    char buf[40];
    int n = std::snprintf(buf, sizeof(buf), "%.17g", v);
    out.append(buf, static_cast<std::size_t>(n));
  });
}

void write_vertex_values(const IdMap& ids, std::span<const std::uint64_t> local_values, const std::string& path,
                         const VertexValuesOptions& options) {
  write_values(ids, local_values, path, options, [](std::string& out, std::uint64_t v) {
    char buf[24];
    int n = std::snprintf(buf, sizeof(buf), "%" PRIu64, v);
    out.append(buf, static_cast<std::size_t>(n));
  });
}

namespace {

std::string format_edges(const EdgeList& g, std::uint64_t base, bool lower_triangle_only) {
  std::string out;
  auto w = g.local_weight();
  out.reserve(g.local_arcs() * 16);
  char buf[96];
  g.for_each_arc([&](std::uint64_t u, std::uint64_t v, std::size_t k) {
    if (lower_triangle_only && u < v) return;
    int len = w.empty() ? std::snprintf(buf, sizeof(buf), "%" PRIu64 " %" PRIu64 "\n", u + base, v + base)
                        : std::snprintf(buf, sizeof(buf), "%" PRIu64 " %" PRIu64 " %.17g\n", u + base, v + base, w[k]);
    out.append(buf, static_cast<std::size_t>(len));
  });
  return out;
}

// A comment line (or nothing), each line of `text` after `mark`.
std::string comment_line(const char* mark, const std::string& text) {
  if (text.empty()) return {};
  std::string out;
  std::size_t at = 0;
  while (at <= text.size()) {
    auto nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    out += std::string(mark) + " " + text.substr(at, nl - at) + "\n";
    at = nl + 1;
  }
  return out;
}

}  // namespace

std::string edge_list_header(const EdgeList& g) {
  std::string counts = std::to_string(g.vertices()) + " vertices, ";
  if (g.directed()) counts += std::to_string(g.arcs()) + " arcs";
  else counts += std::to_string(g.edges()) + " edges (" + std::to_string(g.arcs()) + " arcs)";
  return std::string("# tessera graph: ") + (g.directed() ? "directed" : "undirected") + ", " +
         (g.weighted() ? "weighted" : "unweighted") + ", ids from 0; " + counts + "\n";
}

namespace {

// DIMACS shortest paths: "p sp N M", then an arc line "a u v w" (1-based)
// for every stored arc (an undirected edge's two arcs; weight 1 unweighted).
void write_dimacs(const EdgeList& g, const std::string& path, const WriteOptions& options) {
  std::string body;
  auto w = g.local_weight();
  body.reserve(g.local_arcs() * 20);
  char buf[96];
  g.for_each_arc([&](std::uint64_t u, std::uint64_t v, std::size_t k) {
    const double weight = w.empty() ? 1.0 : w[k];
    int len = std::snprintf(buf, sizeof(buf), "a %" PRIu64 " %" PRIu64 " %.17g\n", u + 1, v + 1, weight);
    body.append(buf, static_cast<std::size_t>(len));
  });
  std::string header = "c written by tessera: " +
                       std::string(g.directed() ? "directed" : "undirected (both arcs of every edge)") +
                       (g.weighted() ? "" : ", unweighted (weight 1)") + "\n" + comment_line("c", options.comment) +
                       "p sp " + std::to_string(g.vertices()) + " " + std::to_string(g.arcs()) + "\n";
  write_text_file(g.runtime(), path, header, body, options.pending);
}

// METIS: "n m [1]", then vertex i's neighbours on line i (1-based, each
// followed by its weight when weighted, and by a space: GAPBS's reader
// drops a line's last number without one). An undirected graph lists its
// m edges at both ends; a directed one its m arcs once each, as GAPBS's
// test graphs do (read_graph tells them apart by the count).
void write_metis(const EdgeList& g, const std::string& path, const WriteOptions& options) {
  Runtime& rt = g.runtime();
  agree(rt.comm(), [&] {
    if (!g.directed() && g.self_loops() > 0)
      throw ConfigError(path + ": METIS lists no self loops, and this undirected graph has " +
                        std::to_string(g.self_loops()) + " (read it without --multigraph, or write .el or .mtx)");
  });
  std::string body;
  auto w = g.local_weight();
  auto rows = g.row_offsets();
  body.reserve(g.local_arcs() * 12 + g.local_vertices());
  char buf[64];
  g.with_dst([&](auto dst) {
    for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
      for (std::uint64_t k = rows[i]; k < rows[i + 1]; ++k) {
        int len = w.empty() ? std::snprintf(buf, sizeof(buf), "%" PRIu64 " ", static_cast<std::uint64_t>(dst[k]) + 1)
                            : std::snprintf(buf, sizeof(buf), "%" PRIu64 " %.17g ",
                                            static_cast<std::uint64_t>(dst[k]) + 1, w[k]);
        body.append(buf, static_cast<std::size_t>(len));
      }
      body.push_back('\n');
    }
  });
  std::string header = "% written by tessera: " +
                       std::string(g.directed() ? "directed, line i lists vertex i's out-neighbours (GAPBS's reading)"
                                                : "undirected, each edge at both ends") +
                       "\n" + comment_line("%", options.comment) + std::to_string(g.vertices()) + " " +
                       std::to_string(g.edges()) + (g.weighted() ? " 1" : "") + "\n";
  write_text_file(rt, path, header, body, options.pending);
}

// Appends `value`'s bytes (little-endian, as GAPBS writes them on x86).
template <class T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Collective: rank 0's `header`, then section 0 of every rank in rank order,
// then section 1 of every rank, ...: one file (not a stream).
void write_sections(Runtime& rt, const std::string& path, const std::string& header,
                    const std::vector<std::string>& sections, PendingOutputs* pending) {
  const OutputPath out = resolve_on_rank0(rt, path);
  if (out.kind == OutputPath::Kind::directory) throw ConfigError(path + " is a directory; name a file");
  if (out.stream())
    throw ConfigError(path + " is a stream; a GAPBS serialized graph (.sg, .wsg) is written to a file (or write .el "
                      "text to the stream)");
  write_sections_to(rt, out, header, sections, pending);
}

// GAPBS's serialized graph (its writer.h): bool directed, int64 arcs, int64
// vertices, int64 offsets[n+1], the neighbours (int32; .wsg: int32 neighbour,
// int32 weight), and for a directed graph the in-arcs' offsets and
// neighbours. 32-bit ids, int32 weights: anything else is refused.
void write_serialized(const EdgeList& g, const std::string& path, const WriteOptions& options) {
  Runtime& rt = g.runtime();
  const bool weighted = g.weighted();
  agree(rt.comm(), [&] {
    if (g.vertices() > (std::uint64_t{1} << 31))
      throw ConfigError(path + ": GAPBS's serialized graphs hold 32-bit ids; " + std::to_string(g.vertices()) +
                        " vertices do not fit");
    for (double w : g.local_weight())
      if (w != std::floor(w) || w < -2147483648.0 || w > 2147483647.0)
        throw ConfigError(path + ": GAPBS's .wsg holds int32 weights, and this graph has the weight " +
                          std::to_string(w) + " (write .wel or .mtx)");
  });
  std::string header;
  put<std::uint8_t>(header, g.directed() ? 1 : 0);
  put<std::int64_t>(header, static_cast<std::int64_t>(g.arcs()));
  put<std::int64_t>(header, static_cast<std::int64_t>(g.vertices()));
  std::vector<std::string> sections;
  auto csr = [&](const EdgeList& h) {
    std::string offsets, neighbours;
    const std::uint64_t first = exclusive_prefix_sum(rt.comm(), h.local_arcs());
    auto rows = h.row_offsets();
    for (std::size_t i = 0; i + 1 < rows.size(); ++i)
      put<std::int64_t>(offsets, static_cast<std::int64_t>(first + rows[i]));
    if (rt.rank() == rt.size() - 1) put<std::int64_t>(offsets, static_cast<std::int64_t>(h.arcs()));
    auto w = h.local_weight();
    h.with_dst([&](auto dst) {
      neighbours.reserve(dst.size() * (weighted ? 8 : 4));
      for (std::size_t k = 0; k < dst.size(); ++k) {
        put<std::int32_t>(neighbours, static_cast<std::int32_t>(dst[k]));
        if (weighted) put<std::int32_t>(neighbours, static_cast<std::int32_t>(w[k]));
      }
    });
    sections.push_back(std::move(offsets));
    sections.push_back(std::move(neighbours));
  };
  csr(g);
  if (g.directed()) csr(g.transposed({}, true));  // the in-arcs, as GAPBS's reader expects them
  write_sections(rt, path, header, sections, options.pending);
}

}  // namespace

void write_graph(const EdgeList& g, const std::string& path, const WriteOptions& options) {
  trace::Span traced(trace::Category::io, "write graph");
  Runtime& rt = g.runtime();
  FileFormat f = format_of(path);
  if (f == FileFormat::binary) return save_binary(g, path, options);
  check_graph_format(path, g.weighted());
  if (f == FileFormat::dimacs) return write_dimacs(g, path, options);
  if (f == FileFormat::metis) return write_metis(g, path, options);
  if (f == FileFormat::gapbs_serialized || f == FileFormat::gapbs_weighted_serialized)
    return write_serialized(g, path, options);
  if (f == FileFormat::matrix_market) {
    bool sym = !g.directed();
    std::string body = format_edges(g, 1, sym);
    std::uint64_t entries = 0;
    g.for_each_arc([&](std::uint64_t u, std::uint64_t v, std::size_t) { entries += !sym || u >= v; });
    entries = all_reduce(rt.comm(), entries, MPI_SUM);
    std::string header = std::string("%%MatrixMarket matrix coordinate ") + (g.weighted() ? "real" : "pattern") +
                         (sym ? " symmetric" : " general") + "\n% written by tessera\n" +
                         comment_line("%", options.comment) +
                         std::to_string(g.vertices()) + " " + std::to_string(g.vertices()) + " " +
                         std::to_string(entries) + "\n";
    return write_text_file(rt, path, header, body, options.pending);
  }
  std::string header = edge_list_header(g) + comment_line("#", options.comment);
  write_text_file(rt, path, header, format_edges(g, 0, false), options.pending);
}

namespace {

// Writes all of `text` into a new file (never through a symlink, never over
// an existing file); every write checked.
void write_new_file(const std::string& path, const std::string& text, mode_t mode) {
  int fd = create_exclusive(path, mode);
  if (fd < 0) throw SystemError("cannot create " + path, errno);
  FileDescriptor guard(fd);
  ::fchmod(fd, mode);  // the umask must not narrow what the caller asked
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw SystemError("cannot write " + path, n < 0 ? errno : ENOSPC);
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 && errno != EINVAL) throw SystemError("cannot write " + path, errno);
}

// Exit-cleanup slots of a temporary directory and its files: a SIGTERM or
// SIGINT during the write removes them.
struct CleanupSlots {
  std::vector<int> slots;
  void add(const std::string& path) { slots.push_back(exit_cleanup::add(path)); }
  std::vector<int> release() { return std::exchange(slots, {}); }
  ~CleanupSlots() {
    for (int s : slots) exit_cleanup::remove(s);
  }
};

}  // namespace

void save_binary(const EdgeList& g, const std::string& dir_in, const WriteOptions& options) {
  Runtime& rt = g.runtime();
  namespace fs = std::filesystem;
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  // Everything goes into a fresh sibling directory that is renamed into
  // place when complete: a failed, killed or losing concurrent writer never
  // leaves a partial graph at `dir` nor touches another writer's files.
  std::string tmp;
  agree(rt.comm(), [&] {
    if (rt.rank() != 0) return;
    std::error_code ec;
    dir = binary_destination(dir);  // a link to an empty directory stays; the graph goes where it points
    fs::path parent = fs::path(dir).parent_path();
    if (!parent.empty() && !fs::exists(parent) && !fs::create_directories(parent, ec))
      throw SystemError("cannot create directory " + parent.string(), ec.value());
    tmp = unique_temporary_name(dir);
    if (::mkdir(tmp.c_str(), options.group_access ? 0770 : 0700) != 0)
      throw SystemError("cannot create directory " + tmp, errno);
    ::chmod(tmp.c_str(), options.group_access ? 0770 : 0700);  // whatever the umask
  });
  dir = broadcast(rt.comm(), dir, 0);
  tmp = broadcast(rt.comm(), tmp, 0);
  CleanupSlots cleanup;
  std::vector<std::string> names = {"offsets", "dst"};
  if (g.weighted()) names.push_back("weight");
  for (const auto& name : names) {
    cleanup.add(tmp + "/" + name + ".r" + std::to_string(rt.rank()) + ".seg");
    if (rt.rank() == 0) cleanup.add(array_file(tmp, name));
  }
  if (rt.rank() == 0) cleanup.add(tmp + "/" + kGraphFile), cleanup.add(tmp);
  try {
    auto copy = [&](const auto& from, const std::string& name) {
      using T = typename std::decay_t<decltype(from)>::value_type;
      StorageOptions o = StorageOptions::shared(name, tmp);
      o.persist = true;
      o.group_access = options.group_access;
      DistArray<T> to(rt, from.distribution(), o);
      std::copy(from.local().begin(), from.local().end(), to.local().begin());
      barrier(rt.comm());
    };
    copy(g.offsets(), "offsets");
    std::visit([&](const auto& dst) { copy(dst, "dst"); }, g.dst());
    if (g.weighted()) copy(*g.weight(), "weight");
    agree(rt.comm(), [&] {
      if (rt.rank() != 0) return;
      nlohmann::json j;
      j["format"] = kGraphFormat;
      j["version"] = kGraphVersion;
      j["vertices"] = g.vertices();
      j["edges"] = g.edges();
      j["arcs"] = g.arcs();
      j["id_type"] = id_width_name(g.id_width());
      j["directed"] = g.directed();
      j["weighted"] = g.weighted();
      j["ranks"] = rt.size();
      j["vertex_offsets"] = g.vertex_ranges().offsets();
      j["arrays"] = {{"offsets", "offsets.json"}, {"dst", "dst.json"}};
      if (g.weighted()) j["arrays"]["weight"] = "weight.json";
      if (!options.comment.empty()) j["note"] = options.comment;
      write_new_file(tmp + "/" + kGraphFile, j.dump(2) + "\n", options.group_access ? 0660 : 0600);
      if (options.pending) return;  // renamed at commit
      // rename() replaces only an empty directory: a graph that another job
      // completed meanwhile stays as it is.
      if (std::rename(tmp.c_str(), dir.c_str()) != 0) {
        int err = errno;
        if (err == ENOTEMPTY || err == EEXIST)
          throw ConfigError("a Tessera graph was written to " + dir + " by another job meanwhile; it is kept");
        throw SystemError("cannot rename " + tmp + " to " + dir, err);
      }
    });
  } catch (...) {
    barrier(rt.comm());
    if (rt.rank() == 0) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
    }
    throw;
  }  if (options.pending) options.pending->add(tmp, dir, true, cleanup.release());
}

}  // namespace tessera::graph
