// IdMap (file ids through base, relabel, symmetrize and subgraphs), the
// per-vertex value writer, outputs committed together, streams (FIFOs)
// written in place in rank order, output checks,
// --dims parsing and ReadOptions::pattern. References are serial: the ids
// and edges computed from the file text on every rank.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "../test_util.hpp"
#include "graph_test_util.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/id_map.hpp"
#include "tessera/graph/io.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/wait.hpp"

using namespace tessera;
using namespace tessera::graph;
namespace fs = std::filesystem;

using test::read_error;
using test::write_file;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::uint64_t> all_file_ids(const IdMap& ids) {
  auto mine = ids.local_file_ids();
  return test::gather_all<std::uint64_t>(ids.runtime(), std::span<const std::uint64_t>(mine));
}

// A directed graph with sparse ids, some ranks' worth of vertices, and a
// second component: the shape that broke hitting --relabel at 2+ ranks.
std::vector<std::pair<std::uint64_t, std::uint64_t>> sparse_directed_edges() {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> e;
  for (std::uint64_t i = 0; i + 1 < 40; ++i) e.emplace_back(1000 + 7 * i, 1000 + 7 * (i + 1));  // a path
  for (std::uint64_t i = 0; i < 40; i += 5) e.emplace_back(1000 + 7 * ((i * 13 + 5) % 40), 1000 + 7 * i);  // chords
  e.emplace_back(5, 1000);            // a small id pointing into the big component
  e.emplace_back(900000, 900001);     // a second component
  e.emplace_back(900001, 900002);
  return e;
}

std::string edge_text(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& edges, std::uint64_t shift = 0) {
  std::string t;
  for (auto [u, v] : edges) t += std::to_string(u + shift) + " " + std::to_string(v + shift) + "\n";
  return t;
}

}  // namespace

TEST(IdMap, IdentityKeepsTheFileBase) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto path = write_file(rt, dir.path(), "p.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n2 3\n");
  auto g = read_graph(rt, path);
  EXPECT_TRUE(g.ids.is_identity());
  EXPECT_EQ(g.ids.base(), 1u);
  EXPECT_EQ(all_file_ids(g.ids), (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(g.ids.find(1), 0u);  // file vertex 1 is the first vertex, not the second
  EXPECT_EQ(g.ids.find(3), 2u);
  EXPECT_EQ(g.ids.find(0), kNoIndex);
  EXPECT_EQ(g.ids.find(4), kNoIndex);
  EXPECT_EQ(g.ids.file_id(0), 1u);
  EXPECT_EQ(g.ids.file_id(kNoIndex), kNoIndex);
  std::vector<std::uint64_t> values = {2, 0, kNoIndex};
  g.ids.translate(values);
  EXPECT_EQ(values, (std::vector<std::uint64_t>{3, 1, kNoIndex}));
}

TEST(IdMap, RelabelledOneBasedIds) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto path = write_file(rt, dir.path(), "r.el", "10 20\n20 30\n");
  ReadOptions o;
  o.base = 1;
  o.relabel = true;
  auto g = read_graph(rt, path, o);
  ASSERT_EQ(g.graph.vertices(), 3u);
  EXPECT_EQ(all_file_ids(g.ids), (std::vector<std::uint64_t>{10, 20, 30}));
  EXPECT_EQ(g.ids.find(std::vector<std::uint64_t>{30, 10, 11, 0}),
            (std::vector<std::uint64_t>{2, 0, kNoIndex, kNoIndex}));
}

TEST(IdMap, FollowsSymmetrizeAndTheLargestComponent) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  const auto edges = sparse_directed_edges();
  for (std::uint64_t base : {0, 1}) {
    auto path = write_file(rt, dir.path(), "d" + std::to_string(base) + ".el", edge_text(edges, base));
    ReadOptions o;
    o.base = static_cast<int>(base);
    o.relabel = true;
    auto loaded = read_graph(rt, path, o);
    ASSERT_TRUE(loaded.graph.directed());

    // Serial reference: the distinct file ids in order, and the undirected edge set in file ids.
    std::set<std::uint64_t> distinct;
    std::set<std::pair<std::uint64_t, std::uint64_t>> want_edges;
    for (auto [u, v] : edges) {
      distinct.insert(u + base), distinct.insert(v + base);
      want_edges.emplace(u + base, v + base), want_edges.emplace(v + base, u + base);
    }
    std::vector<std::uint64_t> sorted_ids(distinct.begin(), distinct.end());
    EXPECT_EQ(all_file_ids(loaded.ids), sorted_ids);

    auto sym = loaded.graph.symmetrized();
    auto ids = loaded.ids.redistributed(sym.vertex_ranges());
    EXPECT_EQ(all_file_ids(ids), sorted_ids);
    // Every edge of the symmetrized graph, translated to file ids, is an edge of the file.
    std::vector<std::uint64_t> ends;
    sym.for_each_arc([&](std::uint64_t u, std::uint64_t v, std::size_t) { ends.push_back(u), ends.push_back(v); });
    ids.translate(ends);
    auto all_ends = test::gather_all<std::uint64_t>(rt, std::span<const std::uint64_t>(ends));
    std::set<std::pair<std::uint64_t, std::uint64_t>> got_edges;
    for (std::size_t k = 0; k < all_ends.size(); k += 2) got_edges.emplace(all_ends[k], all_ends[k + 1]);
    EXPECT_EQ(got_edges, want_edges);

    // The largest component: the 40 vertices of the path with chords, and id 5.
    auto c = fastsv(sym);
    auto lcc = largest_component(sym, c.labels);
    auto lcc_ids = ids.compose(lcc.original_ids);
    std::vector<std::uint64_t> want_lcc;
    for (auto id : sorted_ids)
      if (id < 900000 + base) want_lcc.push_back(id);
    EXPECT_EQ(all_file_ids(lcc_ids), want_lcc);
    EXPECT_EQ(lcc_ids.find(5 + base), 0u);
    EXPECT_EQ(lcc_ids.find(900000 + base), kNoIndex);
    EXPECT_EQ(lcc_ids.file_id(lcc.graph.vertices() - 1), want_lcc.back());
  }
}

TEST(IdMap, UnorderedMapsAreSearchedToo) {
  Runtime& rt = Runtime::current();
  const std::uint64_t n = 11;
  auto ids = IdMap::identity(rt, Distribution::block(n, rt.size()), 1);
  DistArray<std::uint64_t> reversed(rt, Distribution::block(n, rt.size()));
  for (std::size_t i = 0; i < reversed.local().size(); ++i) reversed.local()[i] = n - 1 - (reversed.local_begin() + i);
  auto composed = ids.compose(reversed);
  for (std::uint64_t f = 1; f <= n; ++f) EXPECT_EQ(composed.find(f), n - f);
  EXPECT_EQ(composed.find(0), kNoIndex);
  EXPECT_EQ(composed.file_id(0), n);
}

TEST(IdMap, BadValuesFailOnEveryRank) {
  Runtime& rt = Runtime::current();
  auto ids = IdMap::identity(rt, Distribution::block(5, rt.size()));
  std::vector<std::uint64_t> values;
  if (rt.rank() == rt.size() - 1) values.push_back(5);  // one rank only
  EXPECT_THROW(ids.translate(values), RangeError);
  EXPECT_THROW((void)ids.redistributed(Distribution::block(6, rt.size())), MismatchError);
}

TEST(VertexValues, WritesFileIdsInVertexOrder) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto path = write_file(rt, dir.path(), "r.el", "10 20\n20 30\n40 10\n");
  ReadOptions o;
  o.relabel = true;
  auto g = read_graph(rt, path, o);
  std::vector<double> values;
  for (auto id : g.ids.local_file_ids()) values.push_back(id == 30 ? std::nan("") : static_cast<double>(id) / 4);
  write_vertex_values(g.ids, values, dir.path() + "/h.txt", {"vertex", "time", "unreachable", nullptr, ""});
  std::vector<std::uint64_t> labels(g.ids.local_file_ids());
  write_vertex_values(g.ids, std::span<const std::uint64_t>(labels), dir.path() + "/l.txt", {});
  barrier(rt.comm());
  EXPECT_EQ(slurp(dir.path() + "/h.txt"), "# vertex time\n10 2.5\n20 5\n30 unreachable\n40 10\n");
  EXPECT_EQ(slurp(dir.path() + "/l.txt"), "# vertex value\n10 10\n20 20\n30 30\n40 40\n");
  std::vector<double> too_few;
  EXPECT_THROW(write_vertex_values(g.ids, too_few, dir.path() + "/x.txt", {}),
               std::exception);  // on every rank, even those with the right count
}

TEST(PendingOutputs, AllOrNone) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto keep = write_file(rt, dir.path(), "keep.el", "precious\n");
  auto g = generate(rt, GraphSpec::grid({3, 3}));
  {
    PendingOutputs outputs(rt);
    WriteOptions w;
    w.pending = &outputs;
    write_graph(g, keep, w);
    write_graph(g, dir.path() + "/g.tsg", w);
    // An error before commit: nothing replaced, no temporaries left.
  }
  barrier(rt.comm());
  EXPECT_EQ(slurp(keep), "precious\n");
  EXPECT_FALSE(fs::exists(dir.path() + "/g.tsg"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
  barrier(rt.comm());
  {
    PendingOutputs outputs(rt);
    WriteOptions w;
    w.pending = &outputs;
    write_graph(g, keep, w);
    write_graph(g, dir.path() + "/g.tsg", w);
    write_text_file(rt, dir.path() + "/n.txt", "# note\n", "", &outputs);
    outputs.commit();
  }
  barrier(rt.comm());
  EXPECT_NE(slurp(keep), "precious\n");
  EXPECT_EQ(read_graph(rt, dir.path() + "/g.tsg").graph.arcs(), g.arcs());
  EXPECT_EQ(slurp(dir.path() + "/n.txt"), "# note\n");
}

TEST(OutputChecks, RefuseBeforeWriting) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  EXPECT_THROW(check_output_path(rt, dir.path() + "/missing/m.txt"), ConfigError);
  EXPECT_NO_THROW(check_output_path(rt, dir.path()));  // an empty directory takes a binary graph
  write_file(rt, dir.path(), "other.txt", "x\n");
  EXPECT_THROW(check_output_path(rt, dir.path()), ConfigError);  // but not one holding other files
  EXPECT_NO_THROW(check_output_path(rt, dir.path() + "/ok.el"));
  EXPECT_NO_THROW(check_output_path(rt, dir.path() + "/new.tsg"));
  EXPECT_THROW(check_graph_format("w.el", true), ConfigError);
  EXPECT_THROW(check_graph_format("w.wel", false), ConfigError);
  EXPECT_NO_THROW(check_graph_format("w.mtx", true));
  EXPECT_NO_THROW(check_graph_format("w.el", false));
}

namespace {

// Rank 0 makes a FIFO at `path` and a thread that reads it until the end of
// file, or closes it after `stop_after` bytes (a reader that goes away).
class FifoReader {
 public:
  FifoReader(Runtime& rt, std::string path, std::size_t stop_after = std::string::npos)
      : rt_(rt), path_(std::move(path)) {
    if (rt.rank() == 0) {
      EXPECT_EQ(::mkfifo(path_.c_str(), 0600), 0);
      thread_ = std::thread([this, stop_after] {
        int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return;
        char buf[4096];
        while (bytes_.size() < stop_after) {
          ssize_t n = ::read(fd, buf, std::min(sizeof(buf), stop_after - bytes_.size()));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) break;
          bytes_.append(buf, static_cast<std::size_t>(n));
        }
        ::close(fd);
      });
    }
    barrier(rt.comm());
  }
  ~FifoReader() {
    if (thread_.joinable()) {  // the writer never came: give the reader its end of file
      int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) ::close(fd);
      thread_.join();
    }
  }
  // What the reader got (rank 0; "" elsewhere).
  std::string finish() {
    if (thread_.joinable()) thread_.join();
    return bytes_;
  }

 private:
  Runtime& rt_;
  std::string path_;
  std::string bytes_;
  std::thread thread_;
};

bool is_fifo(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// Rank r's body: distinct per rank, so that any reordering shows.
std::string body_of(int rank, std::size_t bytes) {
  return "rank " + std::to_string(rank) + ": " + std::string(bytes, static_cast<char>('a' + rank % 26)) + "\n";
}

}  // namespace

TEST(OutputStreams, FifoGetsEveryRankInOrderAtCommit) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto keep = write_file(rt, dir.path(), "keep.txt", "old\n");
  const std::string fifo = dir.path() + "/fifo";
  std::string expected = "# head\n";
  for (int r = 0; r < rt.size(); ++r) expected += body_of(r, 1000 * static_cast<std::size_t>(r) + 1);
  FifoReader reader(rt, fifo);
  {
    PendingOutputs outputs(rt);
    write_text_file(rt, keep, "# head\n", body_of(rt.rank(), 1000 * static_cast<std::size_t>(rt.rank()) + 1),
                    &outputs);
    write_text_file(rt, fifo, "# head\n", body_of(rt.rank(), 1000 * static_cast<std::size_t>(rt.rank()) + 1),
                    &outputs);
    barrier(rt.comm());
    EXPECT_EQ(slurp(keep), "old\n");  // nothing replaced before commit
    outputs.commit();
  }
  const std::string got = reader.finish();
  barrier(rt.comm());
  if (rt.rank() == 0) {
    EXPECT_EQ(got, expected);
    EXPECT_TRUE(is_fifo(fifo));
  }
  EXPECT_EQ(slurp(keep), expected);
  EXPECT_EQ(names_in(dir.path()), (std::set<std::string>{"keep.txt", "fifo"}));  // no temporaries
}

TEST(OutputStreams, AReaderThatLeavesFailsTheCommitAndReplacesNothing) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto keep = write_file(rt, dir.path(), "keep.txt", "old\n");
  const std::string fifo = dir.path() + "/fifo";
  FifoReader reader(rt, fifo, 1);  // more than a pipe holds is written; the reader leaves after one byte
  {
    PendingOutputs outputs(rt);
    write_text_file(rt, keep, "# head\n", body_of(rt.rank(), 10), &outputs);
    write_text_file(rt, fifo, "# head\n", body_of(rt.rank(), std::size_t{256} << 10), &outputs);
    if (rt.rank() == 0) {
      try {
        outputs.commit();
        ADD_FAILURE() << "the commit succeeded";
      } catch (const SystemError& e) {
        EXPECT_EQ(e.error_number(), EPIPE);
        EXPECT_NE(std::string(e.what()).find(fifo), std::string::npos) << e.what();
      }
    } else {
      EXPECT_THROW(outputs.commit(), Error);
    }
  }
  reader.finish();
  barrier(rt.comm());
  EXPECT_EQ(slurp(keep), "old\n");
  EXPECT_TRUE(is_fifo(fifo));
  EXPECT_EQ(names_in(dir.path()), (std::set<std::string>{"keep.txt", "fifo"}));
}

TEST(OutputStreams, GraphsAndLinks) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto g = generate(rt, GraphSpec::grid({4, 3}));
  // A graph to a FIFO: the bytes a file gets.
  write_graph(g, dir.path() + "/g.el");
  std::string got;
  {
    FifoReader reader(rt, dir.path() + "/fifo");
    write_graph(g, dir.path() + "/fifo");
    got = reader.finish();
  }
  barrier(rt.comm());
  if (rt.rank() == 0) {
    EXPECT_EQ(got, slurp(dir.path() + "/g.el"));
  }
  auto out = check_output_path(rt, dir.path() + "/fifo");
  EXPECT_TRUE(out.stream());
  EXPECT_EQ(out.what, "FIFO");
  EXPECT_TRUE(check_output_path(rt, "-", OutputKind::text_lines).standard_output());
  EXPECT_NO_THROW(check_graph_format("-", true));  // "u v w" lines
  EXPECT_NO_THROW(check_graph_format(dir.path() + "/fifo", true));
  EXPECT_THROW(check_graph_format(dir.path() + "/g.el", true), ConfigError);
  // A directory, or a FIFO named as a binary graph, is refused.
  EXPECT_THROW(check_output_path(rt, dir.path(), OutputKind::text_lines), ConfigError);
  if (rt.rank() == 0) {
    EXPECT_EQ(::mkfifo((dir.path() + "/f.tsg").c_str(), 0600), 0);
  }
  barrier(rt.comm());
  EXPECT_THROW(check_output_path(rt, dir.path() + "/f.tsg"), ConfigError);
  EXPECT_THROW(write_graph(g, dir.path() + "/f.tsg"), ConfigError);
  EXPECT_TRUE(is_fifo(dir.path() + "/f.tsg"));
  // A symbolic link to a file: the target gets the bytes, the link stays.
  write_file(rt, dir.path(), "real.txt", "old\n");
  if (rt.rank() == 0) {
    EXPECT_EQ(::symlink("real.txt", (dir.path() + "/link.txt").c_str()), 0);
  }
  barrier(rt.comm());
  out = check_output_path(rt, dir.path() + "/link.txt", OutputKind::text_lines);
  EXPECT_EQ(out.kind, OutputPath::Kind::file);
  EXPECT_EQ(out.path, dir.path() + "/real.txt");
  write_text_file(rt, dir.path() + "/link.txt", "# h\n", "x\n");
  barrier(rt.comm());
  EXPECT_TRUE(fs::is_symlink(dir.path() + "/link.txt"));
  std::string lines = "# h\n";
  for (int r = 0; r < rt.size(); ++r) lines += "x\n";
  EXPECT_EQ(slurp(dir.path() + "/real.txt"), lines);
}

TEST(Generators, ParsesGridDims) {
  EXPECT_EQ(parse_grid_dims("100x100"), (std::vector<std::uint64_t>{100, 100}));
  EXPECT_EQ(parse_grid_dims("3x4x5"), (std::vector<std::uint64_t>{3, 4, 5}));
  for (const char* bad : {"", "100", "x4", "4x", "-3x4", "5abcx2", "1x2x3x4", "3X4", "99999999999999999999x2"})
    EXPECT_THROW(parse_grid_dims(bad), ConfigError) << bad;
}

TEST(Readers, PatternDropsTheWeights) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto path = write_file(rt, dir.path(), "w.wel", "0 1 -0.5\n1 2 2.5\n");
  ReadOptions o;
  o.pattern = true;
  auto g = read_graph(rt, path, o);
  EXPECT_FALSE(g.graph.weighted());
  EXPECT_EQ(g.graph.edges(), 2u);
  // Values are not read at all: a NaN in a structural matrix does not matter.
  auto nan = write_file(rt, dir.path(), "nan.mtx", "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 nan\n2 3 -1\n");
  EXPECT_NE(read_error(rt, nan).find("nan.mtx:3: weight nan is not a finite number"), std::string::npos);
  EXPECT_EQ(read_graph(rt, nan, o).graph.edges(), 2u);
  auto weighted = read_graph(rt, path).graph;
  EXPECT_TRUE(weighted.weighted());
  write_graph(weighted, dir.path() + "/w.tsg");
  auto binary = read_graph(rt, dir.path() + "/w.tsg", o);
  EXPECT_FALSE(binary.graph.weighted());
  EXPECT_EQ(test::gather_edges(binary.graph), test::gather_edges(g.graph));
}
