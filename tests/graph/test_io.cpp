// Readers and writers: every format read back against the edges written by
// hand, round trips through each writer, the binary format mapped in place,
// the real SNAP graphs, and every kind of bad input with its message.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "../test_util.hpp"
#include "graph_test_util.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/io.hpp"
#include "tessera/runtime/wait.hpp"
#include "tessera/storage/metadata.hpp"

using namespace tessera;
using namespace tessera::graph;
using tessera::test::EdgeTuple;
namespace fs = std::filesystem;

using test::read_error;
using test::write_file;

namespace {

std::vector<EdgeTuple> edges_of(std::initializer_list<std::pair<std::uint64_t, std::uint64_t>> list) {
  std::vector<EdgeTuple> out;
  for (auto [u, v] : list) out.emplace_back(u, v, 1.0);
  std::sort(out.begin(), out.end());
  return out;
}

// The real graphs of ../shared/data (or $TESSERA_DATA_DIR).
std::string data_dir() {
  const char* env = std::getenv("TESSERA_DATA_DIR");
  return env && *env ? env : std::string(TESSERA_SOURCE_DIR) + "/../shared/data";
}

std::vector<std::string> files_in(Runtime& rt, const std::string& dir) {
  barrier(rt.comm());
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  barrier(rt.comm());
  return out;
}

}  // namespace

TEST(Readers, EdgeListWithCommentsAndBases) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto path = write_file(rt, dir.path(), "g.el",
                         "# a comment\n% another\n\n0 1\n1\t2\r\n  2 0  \n4 0\n# trailing comment\n3 4");
  auto g = read_graph(rt, path).graph;
  EXPECT_EQ(g.vertices(), 5u);
  EXPECT_TRUE(g.directed());
  EXPECT_EQ(test::gather_edges(g), edges_of({{0, 1}, {1, 2}, {2, 0}, {4, 0}, {3, 4}}));

  ReadOptions one;
  one.base = 1;
  auto g1 = read_graph(rt, write_file(rt, dir.path(), "one.el", "1 2\n2 3\n"), one).graph;
  EXPECT_EQ(g1.vertices(), 3u);
  EXPECT_EQ(test::gather_edges(g1), edges_of({{0, 1}, {1, 2}}));

  ReadOptions und;
  und.undirected = true;
  auto gu = read_graph(rt, path, und).graph;
  EXPECT_FALSE(gu.directed());
  EXPECT_EQ(gu.arcs(), 10u);  // both arcs of each of the 5 edges
  EXPECT_EQ(gu.edges(), 5u);
}

TEST(Readers, RelabelsSparseIdsInOrder) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto path = write_file(rt, dir.path(), "sparse.el", "1000 7\n7 500000\n500000 1000\n42 7\n");
  ReadOptions o;
  o.relabel = true;
  auto loaded = read_graph(rt, path, o);
  EXPECT_EQ(loaded.graph.vertices(), 4u);  // 7, 42, 1000, 500000 -> 0, 1, 2, 3
  EXPECT_EQ(test::gather_edges(loaded.graph), edges_of({{2, 0}, {0, 3}, {3, 2}, {1, 0}}));
  ASSERT_NE(loaded.ids.relabelled_ids(), nullptr);
  EXPECT_EQ(test::gather_all(*loaded.ids.relabelled_ids()), (std::vector<std::uint64_t>{7, 42, 1000, 500000}));
}

TEST(Readers, MatrixMarketKinds) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto sym = write_file(rt, dir.path(), "sym.mtx",
                        "%%MatrixMarket matrix coordinate pattern symmetric\n% comment\n4 4 3\n2 1\n3 2\n4 4\n");
  auto g = read_graph(rt, sym).graph;
  EXPECT_FALSE(g.directed());
  EXPECT_EQ(g.vertices(), 4u);
  // The diagonal entry is a self loop: dropped (a simple graph), kept with multigraph.
  EXPECT_EQ(test::gather_edges(g), edges_of({{1, 0}, {0, 1}, {2, 1}, {1, 2}}));
  EXPECT_EQ(g.cleaning().self_loops, 1u);
  ReadOptions multi;
  multi.multigraph = true;
  EXPECT_EQ(test::gather_edges(read_graph(rt, sym, multi).graph), edges_of({{1, 0}, {0, 1}, {2, 1}, {1, 2}, {3, 3}}));

  auto real = write_file(rt, dir.path(), "real.mtx",
                         "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 0.5\n3 1 -2e3\n");
  auto w = read_graph(rt, real).graph;
  EXPECT_TRUE(w.directed());
  EXPECT_TRUE(w.weighted());
  EXPECT_EQ(test::gather_edges(w), (std::vector<EdgeTuple>{{0, 1, 0.5}, {2, 0, -2000.0}}));

  auto integer = write_file(rt, dir.path(), "int.mtx", "%%MatrixMarket matrix coordinate integer general\n2 2 1\n2 1 7\n");
  EXPECT_EQ(test::gather_edges(read_graph(rt, integer).graph), (std::vector<EdgeTuple>{{1, 0, 7.0}}));

  auto wel = write_file(rt, dir.path(), "g.wel", "0 1 2.5\n1 0 3\n");
  EXPECT_EQ(test::gather_edges(read_graph(rt, wel).graph), (std::vector<EdgeTuple>{{0, 1, 2.5}, {1, 0, 3.0}}));
}

TEST(Readers, BadInputNamesFileAndLine) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto expect_error = [&](const std::string& name, const std::string& text, const std::string& want,
                          ReadOptions o = {}) {
    auto path = write_file(rt, dir.path(), name, text);
    auto err = read_error(rt, path, o);
    EXPECT_NE(err.find(want), std::string::npos) << name << ": got '" << err << "', want '" << want << "'";
  };
  // Many lines, so the bad one sits in the last rank's byte range.
  std::string good;
  for (int i = 0; i < 200; ++i) good += std::to_string(i) + " " + std::to_string(i + 1) + "\n";
  expect_error("malformed.el", good + "5 x7\n", "malformed.el:201: 'x7' is not a vertex id");
  expect_error("short.el", "0 1\n2\n", "short.el:2: expected 2 fields, found 1");
  expect_error("long.el", "0 1 2\n", "long.el:1: expected 2 fields, found more");
  expect_error("negative.el", "# c\n0 -3\n", "negative.el:2: negative vertex id -3");
  expect_error("huge.el", "0 99999999999999999999999\n", "is too large");
  ReadOptions one;
  one.base = 1;
  expect_error("zero.el", "1 2\n0 1\n", "zero.el:2: vertex id 0 is below the first id 1", one);
  expect_error("empty.el", "", "empty.el is empty");
  expect_error("comments.el", "# only\n% comments\n", "comments.el has no edges");
  expect_error("badweight.wel", "0 1 heavy\n", "badweight.wel:1: 'heavy' is not a weight");
  expect_error("nobanner.mtx", "3 3 1\n1 2\n", "not a Matrix Market file");
  expect_error("array.mtx", "%%MatrixMarket matrix array real general\n2 2\n", "layout 'array' is not supported");
  expect_error("complex.mtx", "%%MatrixMarket matrix coordinate complex general\n", "field 'complex'");
  expect_error("rect.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 4 1\n1 1\n", "3 x 4");
  expect_error("count.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 3\n1 2\n2 3\n",
               "the header promises 3 entries but the file has 2");
  expect_error("range.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n4 1\n",
               "range.mtx:4: vertex id 4 is out of range (the header says 3 vertices)");
  expect_error("zero.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n0 1\n",
               "zero.mtx:3: vertex id 0 is below the first id 1");
  expect_error("nosize.mtx", "%%MatrixMarket matrix coordinate pattern general\n% only comments\n",
               "size line is missing");
  EXPECT_NE(read_error(rt, dir.path() + "/missing.el").find("cannot open graph file"), std::string::npos);
}

// Issue 8 items 4, 6, 16: hostile and unusual text input.
TEST(Readers, NonFiniteWeightsAreRefusedNegativeKept) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  for (std::string w : {"nan", "inf", "-inf", "NaN", "1e999"}) {
    auto path = write_file(rt, dir.path(), "w.wel", "0 1 1\n1 2 " + w + "\n");
    auto err = read_error(rt, path);
    EXPECT_TRUE(err.find("w.wel:2: weight " + w + " is not a finite number") != std::string::npos ||
                (w == "1e999" && err.find("w.wel:2: '1e999' is not a weight") != std::string::npos))
        << w << ": " << err;
  }
  auto mtx = write_file(rt, dir.path(), "w.mtx",
                        "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 inf\n");
  EXPECT_NE(read_error(rt, mtx).find("w.mtx:3: weight inf is not a finite number"), std::string::npos);
  // Negative and zero weights are read as they are (linear algebra decides).
  auto neg = write_file(rt, dir.path(), "neg.wel", "0 1 -0.4\n1 2 0\n");
  EXPECT_EQ(test::gather_edges(read_graph(rt, neg).graph),
            (std::vector<EdgeTuple>{{0, 1, -0.4}, {1, 2, 0.0}}));
  // Duplicates: one arc per (u, v) stays, the one with the smallest weight
  // (multigraph keeps every line, each an arc).
  auto dup = write_file(rt, dir.path(), "dup.wel", "0 1 5\n0 1 2\n0 1 3\n");
  EXPECT_EQ(test::gather_edges(read_graph(rt, dup).graph), (std::vector<EdgeTuple>{{0, 1, 2.0}}));
  ReadOptions multi;
  multi.multigraph = true;
  EXPECT_EQ(test::gather_edges(read_graph(rt, dup, multi).graph).size(), 3u);
  ReadOptions undirected;
  undirected.undirected = true;
  EXPECT_EQ(test::gather_edges(read_graph(rt, dup, undirected).graph),
            (std::vector<EdgeTuple>{{0, 1, 2.0}, {1, 0, 2.0}}));
}

TEST(Readers, HugeIdsAreRefusedOrRelabelledCheaply) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  for (std::string id : {"9223372036854775807", "4294967296", "2305843009213693952"}) {
    auto path = write_file(rt, dir.path(), "h.el", "0 1\n1 " + id + "\n");
    auto err = read_error(rt, path);
    EXPECT_NE(err.find("h.el: vertex id " + id + " needs "), std::string::npos) << err;
    EXPECT_NE(err.find("GiB of vertex arrays"), std::string::npos) << err;
    EXPECT_NE(err.find("use --relabel"), std::string::npos) << err;
  }
  auto max = write_file(rt, dir.path(), "max.el", "0 1\n1 18446744073709551615\n");
  EXPECT_NE(read_error(rt, max).find("use --relabel"), std::string::npos);
  auto mtx = write_file(rt, dir.path(), "big.mtx",
                        "%%MatrixMarket matrix coordinate pattern general\n"
                        "4611686018427387904 4611686018427387904 1\n1 2\n");
  EXPECT_NE(read_error(rt, mtx).find("big.mtx: the header's 4611686018427387904 rows need"), std::string::npos);
  // Relabelling costs O(distinct ids): 2^64-1 and 1e11 are fine.
  ReadOptions relabel;
  relabel.relabel = true;
  std::string text = "7 18446744073709551615\n100000000000 7\n3 100000000000\n";
  for (int i = 0; i < 50; ++i) text += std::to_string(1000000000000ull * (i + 1)) + " 3\n";
  auto loaded = read_graph(rt, write_file(rt, dir.path(), "sparse.el", text), relabel);
  EXPECT_EQ(loaded.graph.vertices(), 54u);
  auto all = test::gather_all(*loaded.ids.relabelled_ids());
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  ASSERT_EQ(all.size(), 54u);
  EXPECT_EQ(all.front(), 3u);
  EXPECT_EQ(all.back(), 18446744073709551615ull);
  auto edges = test::gather_edges(loaded.graph);
  auto new_of = [&](std::uint64_t old) {
    return static_cast<std::uint64_t>(std::lower_bound(all.begin(), all.end(), old) - all.begin());
  };
  EXPECT_NE(std::find(edges.begin(), edges.end(), EdgeTuple{new_of(7), new_of(18446744073709551615ull), 1.0}),
            edges.end());
  EXPECT_NE(std::find(edges.begin(), edges.end(), EdgeTuple{new_of(100000000000ull), new_of(7), 1.0}), edges.end());
  EXPECT_EQ(edges.size(), 53u);
}

TEST(Readers, CountHeaderBomAndCompressedInput) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  // SNAP-derived "vertices edges" first line: 4 edges follow, ids 0..4.
  auto snap = write_file(rt, dir.path(), "snap.el", "# from SNAP\n5 4\n0 1\n1 2\n2 3\n3 4\n");
  auto g = read_graph(rt, snap).graph;
  EXPECT_EQ(g.vertices(), 5u);
  EXPECT_EQ(test::gather_edges(g), edges_of({{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
  // V may count distinct (sparse) ids instead.
  auto sparse = write_file(rt, dir.path(), "sparse.el", "3 2\n10 20\n20 30\n");
  EXPECT_EQ(test::gather_edges(read_graph(rt, sparse).graph), edges_of({{10, 20}, {20, 30}}));
  // A first line that does not match the rest is an edge.
  auto plain = write_file(rt, dir.path(), "plain.el", "5 4\n0 1\n1 2\n");
  EXPECT_EQ(test::gather_edges(read_graph(rt, plain).graph), edges_of({{5, 4}, {0, 1}, {1, 2}}));
  auto bad_first = write_file(rt, dir.path(), "badfirst.el", "# c\n0 x\n1 2\n");
  EXPECT_NE(read_error(rt, bad_first).find("badfirst.el:2: 'x' is not a vertex id"), std::string::npos);
  auto bad_later = write_file(rt, dir.path(), "badlater.el", "0 1\n1 2\n1 y\n");
  EXPECT_NE(read_error(rt, bad_later).find("badlater.el:3: 'y' is not a vertex id"), std::string::npos);
  // A UTF-8 byte-order mark is skipped; line numbers stay right.
  auto bom = write_file(rt, dir.path(), "bom.el", "\xef\xbb\xbf" "0 1\n1 2\n");
  EXPECT_EQ(test::gather_edges(read_graph(rt, bom).graph), edges_of({{0, 1}, {1, 2}}));
  auto bom_bad = write_file(rt, dir.path(), "bombad.el", "\xef\xbb\xbf# c\n0 1\n1 z\n");
  EXPECT_NE(read_error(rt, bom_bad).find("bombad.el:3: 'z' is not a vertex id"), std::string::npos);
  auto bom_mtx = write_file(rt, dir.path(), "bom.mtx",
                            "\xef\xbb\xbf%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n");
  EXPECT_EQ(read_graph(rt, bom_mtx).graph.vertices(), 2u);
  // Compressed files are named as such, their bytes never echoed.
  auto gz = write_file(rt, dir.path(), "g.el", std::string("\x1f\x8b\x08\x00\x00\x00", 6) + "junk");
  EXPECT_NE(read_error(rt, gz).find("g.el: compressed input is not supported (this is a gzip file"),
            std::string::npos);
  auto bz = write_file(rt, dir.path(), "g.mtx", "BZh91AY&SY");
  EXPECT_NE(read_error(rt, bz).find("compressed input is not supported (this is a bzip2 file"), std::string::npos);
}

TEST(Writers, RoundTripEveryFormat) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto g = generate(rt, GraphSpec::kronecker(8, 4, 11));
  auto want = test::gather_edges(g);
  for (std::string name : {"k.el", "k.mtx", "k.tsg"}) {
    std::string path = dir.path() + "/" + name;
    write_graph(g, path);
    auto back = read_graph(rt, path).graph;
    EXPECT_EQ(back.vertices(), g.vertices()) << name;
    EXPECT_EQ(test::gather_edges(back), want) << name;
    // Every format records the kind: an edge list in its "# tessera graph:" header.
    EXPECT_EQ(back.directed(), g.directed()) << name;
    EXPECT_EQ(back.edges(), g.edges()) << name;
    EXPECT_EQ(back.arcs(), g.arcs()) << name;
  }
  // Weighted graphs keep their weights through .wel, .mtx and binary.
  LocalEdges e;
  if (rt.rank() == 0) e.add(0, 1, 0.1), e.add(1, 2, 1e-300), e.add(2, 0, -7.25);
  auto w = EdgeList::build(rt, 3, true, std::move(e));
  for (std::string name : {"w.wel", "w.mtx", "w.tsg"}) {
    write_graph(w, dir.path() + "/" + name);
    EXPECT_EQ(test::gather_edges(read_graph(rt, dir.path() + "/" + name).graph), test::gather_edges(w)) << name;
  }
  EXPECT_THROW(write_graph(w, dir.path() + "/w.el"), ConfigError);
  // No temporary files are left behind.
  for (auto& f : files_in(rt, dir.path())) EXPECT_EQ(f.find(".tmp"), std::string::npos) << f;
}

TEST(Writers, FailedWriteLeavesNothing) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto g = generate(rt, GraphSpec::grid({4, 4}));
  EXPECT_THROW(write_graph(g, dir.path() + "/no/such/dir/g.el"), Error);
  write_graph(g, dir.path() + "/g.tsg");
  EXPECT_THROW(write_graph(g, dir.path() + "/g.tsg"), ConfigError);  // never overwrites a graph
  EXPECT_EQ(files_in(rt, dir.path()), std::vector<std::string>{"g.tsg"});
  // A non-empty directory is never written into, and is left as it was.
  if (rt.rank() == 0) fs::create_directory(dir.path() + "/full.tsg"), std::ofstream(dir.path() + "/full.tsg/x");
  barrier(rt.comm());
  EXPECT_THROW(write_graph(g, dir.path() + "/full.tsg"), ConfigError);
  EXPECT_EQ(files_in(rt, dir.path() + "/full.tsg"), std::vector<std::string>{"x"});
}

TEST(Binary, ReloadMapsInPlaceAndChecksMetadata) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto g = generate(rt, GraphSpec::uniform(9, 4));
  std::string path = dir.path() + "/g.tsg";
  save_binary(g, path);
  {
    auto back = load_binary(rt, path);
    EXPECT_EQ(back.storage_kind(), StorageKind::shared);
    EXPECT_EQ(back.dst_metadata_path(), path + "/dst.json");  // the files themselves, not a copy
    EXPECT_EQ(back.id_width(), g.id_width());
    EXPECT_EQ(test::gather_edges(back), test::gather_edges(g));
    EXPECT_EQ(back.vertex_ranges(), g.vertex_ranges());
    barrier(rt.comm());
  }
  EXPECT_TRUE(fs::exists(path + "/dst.json"));  // loading never removes the files

  // Wrong metadata: each is named.
  auto corrupt = [&](const std::string& from, const std::string& to) -> std::string {
    barrier(rt.comm());
    if (rt.rank() == 0) {
      std::ifstream in(path + "/edgelist.json");
      std::string text((std::istreambuf_iterator<char>(in)), {});
      auto at = text.find(from);
      if (at == std::string::npos) ADD_FAILURE() << "no '" << from << "' in edgelist.json";
      else text.replace(at, from.size(), to);
      std::ofstream(path + "/edgelist.json.bad") << text;
      fs::rename(path + "/edgelist.json", path + "/edgelist.json.good");
      fs::rename(path + "/edgelist.json.bad", path + "/edgelist.json");
    }
    barrier(rt.comm());
    auto err = read_error(rt, path);
    barrier(rt.comm());
    if (rt.rank() == 0) fs::rename(path + "/edgelist.json.good", path + "/edgelist.json");
    barrier(rt.comm());
    return err;
  };
  EXPECT_NE(corrupt("tessera.edge-list", "other").find("is not a version 1"), std::string::npos);
  EXPECT_NE(corrupt("\"arcs\": ", "\"arcs\": 1").find("dst.json holds"), std::string::npos);
  // The id width: a name that is none, and the other width than the array's.
  const std::string width = id_width_name(g.id_width());
  const std::string other = id_width_name(g.id_width() == IdWidth::narrow ? IdWidth::wide : IdWidth::narrow);
  EXPECT_NE(corrupt("\"id_type\": \"", "\"id_type\": \"int").find("\"id_type\""), std::string::npos);
  EXPECT_NE(corrupt("\"id_type\": \"" + width, "\"id_type\": \"" + other).find("dst.json holds " + width + " ids"),
            std::string::npos);
  EXPECT_NE(corrupt("\"vertex_offsets\": [", "\"vertex_offsets\": [7,").find("vertex_offsets"), std::string::npos);
  EXPECT_NE(read_error(rt, dir.path()).find("is not a Tessera binary graph"), std::string::npos);
}

// Directories written before issue 41 (format version 1: src and dst arrays
// of 8-byte ids, "edges" counting arcs) still load, rebuilt at the width the
// graph needs.
TEST(Binary, VersionOneDirectoriesStillLoad) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  LocalEdges e;
  if (rt.rank() == 0)
    for (std::uint64_t u = 0; u < 30; ++u) e.add(u, (u * 11 + 4) % 30, 0.5 * static_cast<double>(u)), e.add(u, u, 1.0);
  auto g = EdgeList::build(rt, 30, true, std::move(e));
  const std::string path = dir.path() + "/v1.tsg";
  if (rt.rank() == 0) fs::create_directory(path);
  barrier(rt.comm());
  {
    auto persisted = [&](const std::string& name) {
      StorageOptions o = StorageOptions::shared(name, path);
      o.persist = true;
      return o;
    };
    auto arcs = test::local_arcs(g);
    DistArray<std::uint64_t> src(rt, g.edge_ranges(), persisted("src")), dst(rt, g.edge_ranges(), persisted("dst"));
    DistArray<double> weight(rt, g.edge_ranges(), persisted("weight"));
    std::copy(arcs.src.begin(), arcs.src.end(), src.local().begin());
    std::copy(arcs.dst.begin(), arcs.dst.end(), dst.local().begin());
    std::copy(g.local_weight().begin(), g.local_weight().end(), weight.local().begin());
    barrier(rt.comm());
  }
  if (rt.rank() == 0) {
    std::string offsets;
    for (auto o : g.vertex_ranges().offsets()) offsets += (offsets.empty() ? "" : ", ") + std::to_string(o);
    std::ofstream(path + "/edgelist.json")
        << "{\n  \"format\": \"tessera.edge-list\",\n  \"version\": 1,\n  \"vertices\": 30,\n  \"edges\": "
        << g.arcs() << ",\n  \"directed\": true,\n  \"weighted\": true,\n  \"ranks\": " << rt.size()
        << ",\n  \"vertex_offsets\": [" << offsets
        << "],\n  \"arrays\": {\"src\": \"src.json\", \"dst\": \"dst.json\", \"weight\": \"weight.json\"}\n}\n";
  }
  barrier(rt.comm());
  auto back = load_binary(rt, path);
  EXPECT_EQ(back.id_width(), g.id_width());
  EXPECT_EQ(back.arcs(), g.arcs());
  EXPECT_EQ(back.self_loops(), 30u);
  EXPECT_EQ(test::gather_edges(back), test::gather_edges(g));
  EXPECT_EQ(test::gather_edges(read_graph(rt, path).graph), test::gather_edges(g));
  barrier(rt.comm());
}

// The symmetry check of a file that says "directed": false sees an arc
// without its reverse even when every vertex has as many arcs in as out (a
// directed cycle), and a weight that differs from its reverse's; a graph
// with a self loop and both directions of each edge passes.
TEST(Binary, SymmetryCheckSeesBalancedAndReweightedArcs) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto read_as_undirected = [&](LocalEdges e, const std::string& name, std::uint64_t n = 3) {
    auto g = EdgeList::build(rt, n, true, std::move(e));
    const std::string path = dir.path() + "/" + name + ".tsg";
    save_binary(g, path);
    barrier(rt.comm());
    if (rt.rank() == 0) {
      std::ifstream in(path + "/edgelist.json");
      std::string text((std::istreambuf_iterator<char>(in)), {});
      in.close();
      const std::string from = "\"directed\": true";
      const auto at = text.find(from);
      EXPECT_NE(at, std::string::npos) << text;
      if (at != std::string::npos) text.replace(at, from.size(), "\"directed\": false");
      std::ofstream(path + "/edgelist.json", std::ios::trunc) << text;
    }
    barrier(rt.comm());
    return read_error(rt, path);
  };
  LocalEdges cycle, reweighted, honest;
  if (rt.rank() == 0) {
    cycle.add(0, 1), cycle.add(1, 2), cycle.add(2, 0);
    reweighted.add(0, 1, 1.0), reweighted.add(1, 0, 2.0), reweighted.add(1, 2, 1.0), reweighted.add(2, 1, 1.0);
    honest.add(0, 1), honest.add(1, 0), honest.add(1, 1), honest.add(1, 2), honest.add(2, 1);
  }
  EXPECT_NE(read_as_undirected(std::move(cycle), "cycle").find("not symmetric"), std::string::npos);
  EXPECT_NE(read_as_undirected(std::move(reweighted), "reweighted").find("not symmetric"), std::string::npos);
  EXPECT_EQ(read_as_undirected(std::move(honest), "honest"), "");
  // A hub's row longer than the check's block of arcs (hashed on its own),
  // beside rows hashed a block at a time: an arc missing on either side is
  // caught.
  const std::uint64_t leaves = 9000;
  auto star = [&](std::uint64_t no_hub_arc_to, std::uint64_t no_arc_back_from) {
    LocalEdges e;
    if (rt.rank() == 0)
      for (std::uint64_t v = 1; v <= leaves; ++v) {
        if (v != no_hub_arc_to) e.add(0, v);
        if (v != no_arc_back_from) e.add(v, 0);
      }
    return e;
  };
  EXPECT_EQ(read_as_undirected(star(0, 0), "star", leaves + 1), "");
  EXPECT_NE(read_as_undirected(star(17, 0), "star-hub", leaves + 1).find("not symmetric"), std::string::npos);
  EXPECT_NE(read_as_undirected(star(0, 4321), "star-leaf", leaves + 1).find("not symmetric"), std::string::npos);
}

// Issue 8 items 5, 6, 9, 10, 12, 13: the binary format against lies,
// devices, symlinks and concurrent writers.
TEST(Binary, HostileMetadataAndFiles) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  LocalEdges e;  // directed: 0->1, 1->2 without reverses
  if (rt.rank() == 0) e.add(0, 1), e.add(1, 2), e.add(2, 3);
  auto g = EdgeList::build(rt, 4, true, std::move(e));
  std::string path = dir.path() + "/d.tsg";
  save_binary(g, path);
  auto edit = [&](const std::string& from, const std::string& to) {
    barrier(rt.comm());
    if (rt.rank() == 0) {
      std::ifstream in(path + "/edgelist.json");
      std::string text((std::istreambuf_iterator<char>(in)), {});
      in.close();
      auto at = text.find(from);
      if (at == std::string::npos) ADD_FAILURE() << "no '" << from << "'";
      else text.replace(at, from.size(), to);
      std::ofstream(path + "/edgelist.json", std::ios::trunc) << text;
    }
    barrier(rt.comm());
  };
  // A directed graph claiming to be undirected is caught.
  edit("\"directed\": true", "\"directed\": false");
  auto err = read_error(rt, path);
  EXPECT_NE(err.find(path + "/edgelist.json says \"directed\": false, but its arcs are not symmetric"),
            std::string::npos)
      << err;
  edit("\"directed\": false", "\"directed\": true");
  EXPECT_EQ(read_error(rt, path), "");
  // An honest undirected graph loads (also weighted).
  LocalEdges u;
  if (rt.rank() == 0) u.add(0, 1, 0.5), u.add(1, 2, 2.0);
  BuildOptions sym;
  sym.symmetrize = true;
  auto ug = EdgeList::build(rt, 3, false, std::move(u), sym);
  save_binary(ug, dir.path() + "/u.tsg");
  EXPECT_EQ(test::gather_edges(load_binary(rt, dir.path() + "/u.tsg")), test::gather_edges(ug));

  // "vertices": 2^62 is refused before any vertex array exists.
  edit("\"vertices\": 4", "\"vertices\": 4611686018427387904");
  err = read_error(rt, path);
  EXPECT_NE(err.find("\"vertices\": 4611686018427387904 needs"), std::string::npos) << err;
  edit("\"vertices\": 4611686018427387904", "\"vertices\": 4");

  // In-place loads map the segments read-only.
  {
    auto back = load_binary(rt, path);
    std::ifstream maps("/proc/self/maps");
    std::string line, seg = path + "/dst.r" + std::to_string(rt.rank()) + ".seg";
    bool found = false;
    while (std::getline(maps, line))
      if (line.find(seg) != std::string::npos) {
        found = true;
        EXPECT_EQ(line.substr(line.find(' ') + 1, 4), "r--s") << line;
      }
    EXPECT_TRUE(found || back.local_arcs() == 0);
    barrier(rt.comm());
  }

  // A FIFO or a device as metadata or segment fails at once instead of
  // blocking or reading forever. Each case swaps one file for the bad kind,
  // expects an error naming it, and puts the file back.
  auto expect_refused = [&](const std::string& file, bool fifo, const std::string& words) {
    const std::string f = path + "/" + file;
    barrier(rt.comm());
    if (rt.rank() == 0) {
      fs::rename(f, f + ".good");
      if (fifo) EXPECT_EQ(::mkfifo(f.c_str(), 0600), 0);
      else fs::create_symlink("/dev/zero", f);
    }
    barrier(rt.comm());
    std::string e = read_error(rt, path);
    EXPECT_NE(e.find(words), std::string::npos) << file << ": " << e;
    barrier(rt.comm());
    if (rt.rank() == 0) {
      fs::remove(f);
      fs::rename(f + ".good", f);
    }
  };
  expect_refused("edgelist.json", true, "edgelist.json is not a regular file");
  expect_refused("edgelist.json", false, "edgelist.json is not a regular file");
  expect_refused("offsets.json", false, "offsets.json is not a regular file");
  expect_refused("dst.json", false, "dst.json is not a regular file");
  expect_refused("dst.r0.seg", true, "dst.r0.seg");
  barrier(rt.comm());
  EXPECT_EQ(read_error(rt, path), "");
}

TEST(Writers, TemporariesNeverFollowSymlinks) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto g = generate(rt, GraphSpec::grid({3, 3}));
  const std::string victim = dir.path() + "/victim";
  if (rt.rank() == 0) {
    std::ofstream(victim) << "precious\n";
    // The names the writers used to take: a symlink there was followed.
    fs::create_symlink(victim, dir.path() + "/g.el.tmp-" + rt.job_id());
    fs::create_directory(dir.path() + "/b.tsg");
    fs::create_symlink(victim, dir.path() + "/b.tsg/edgelist.json.tmp");
  }
  barrier(rt.comm());
  write_graph(g, dir.path() + "/g.el");
  EXPECT_THROW(write_graph(g, dir.path() + "/b.tsg"), ConfigError);  // not empty: left alone
  barrier(rt.comm());
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "precious\n");
  // create_exclusive refuses an existing name and a symlink.
  if (rt.rank() == 0) {
    EXPECT_LT(create_exclusive(dir.path() + "/g.el.tmp-" + rt.job_id(), 0600), 0);
    EXPECT_LT(create_exclusive(victim, 0600), 0);
  }
  EXPECT_EQ(test::gather_edges(read_graph(rt, dir.path() + "/g.el").graph), test::gather_edges(g));
  barrier(rt.comm());
}

TEST(Writers, BinaryWriterIsAtomic) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto g = generate(rt, GraphSpec::grid({4, 4}));
  // A leftover temporary sibling (a killed writer) does not block a run,
  // and an empty output directory is filled.
  if (rt.rank() == 0) {
    fs::create_directory(dir.path() + "/g.tsg.tmp-1-0-0");
    std::ofstream(dir.path() + "/g.tsg.tmp-1-0-0/dst.r0.seg") << "partial";
    fs::create_directory(dir.path() + "/empty.tsg");
  }
  barrier(rt.comm());
  write_graph(g, dir.path() + "/g.tsg");
  write_graph(g, dir.path() + "/empty.tsg");
  EXPECT_EQ(test::gather_edges(read_graph(rt, dir.path() + "/g.tsg").graph), test::gather_edges(g));
  EXPECT_EQ(test::gather_edges(read_graph(rt, dir.path() + "/empty.tsg").graph), test::gather_edges(g));
  // Nothing but the graph files in it; no temporaries beside it.
  auto files = files_in(rt, dir.path() + "/g.tsg");
  for (auto& f : files) EXPECT_TRUE(f == "edgelist.json" || f.find(".seg") != std::string::npos ||
                                    f == "offsets.json" || f == "dst.json") << f;
  for (auto& f : files_in(rt, dir.path()))
    EXPECT_TRUE(f == "g.tsg" || f == "empty.tsg" || f == "g.tsg.tmp-1-0-0") << f;
  barrier(rt.comm());
  // Group access, for a graph a group shares.
  WriteOptions shared;
  shared.group_access = true;
  write_graph(g, dir.path() + "/group.tsg", shared);
  barrier(rt.comm());
  auto mode = [](const std::string& p) { return fs::status(p).permissions() & fs::perms::all; };
  using fs::perms;
  EXPECT_EQ(mode(dir.path() + "/group.tsg"), perms::owner_all | perms::group_all);
  EXPECT_EQ(mode(dir.path() + "/group.tsg/edgelist.json"),
            perms::owner_read | perms::owner_write | perms::group_read | perms::group_write);
  EXPECT_EQ(mode(dir.path() + "/group.tsg/dst.r0.seg"),
            perms::owner_read | perms::owner_write | perms::group_read | perms::group_write);
  EXPECT_EQ(mode(dir.path() + "/g.tsg/dst.r0.seg"), perms::owner_read | perms::owner_write);
  // A writer losing the race to another job fails and keeps the winner.
  auto winner = fs::last_write_time(dir.path() + "/g.tsg/edgelist.json");
  EXPECT_THROW(write_graph(g, dir.path() + "/g.tsg"), ConfigError);
  EXPECT_EQ(fs::last_write_time(dir.path() + "/g.tsg/edgelist.json"), winner);
  EXPECT_EQ(test::gather_edges(read_graph(rt, dir.path() + "/g.tsg").graph), test::gather_edges(g));
  barrier(rt.comm());
}

TEST(RealGraphs, WikiVoteAndOregon) {
  Runtime& rt = Runtime::current();
  if (!fs::exists(data_dir() + "/wiki-vote.el")) GTEST_SKIP() << "no real graphs in " << data_dir();
  ReadOptions o;
  o.relabel = true;
  auto wiki = read_graph(rt, data_dir() + "/wiki-vote.el", o);
  EXPECT_EQ(wiki.graph.vertices(), 7115u);
  EXPECT_EQ(wiki.graph.edges(), 103689u);
  EXPECT_TRUE(wiki.graph.directed());
  auto c = fastsv(wiki.graph);
  auto s = summarize(wiki.graph, c.labels);
  EXPECT_EQ(s.count, 24u);
  EXPECT_EQ(s.largest_size, 7066u);
  auto lp = label_propagation(wiki.graph);
  EXPECT_EQ(test::gather_all(lp.labels), test::gather_all(c.labels));
  auto sym = wiki.graph.symmetrized();
  EXPECT_EQ(test::gather_all(c.labels), test::union_find_labels(sym.vertices(), test::gather_edges(sym)));

  // The Oregon file ends with a stray "-1" line: a clear error naming it.
  const std::string oregon_path = data_dir() + "/oregon1_010331.el";
  EXPECT_NE(read_error(rt, oregon_path).find("oregon1_010331.el:44007: negative vertex id -1"), std::string::npos);
  // A copy without it (the data directory is read-only) is the real graph.
  test::ScratchDir dir(rt);
  std::string text;
  if (rt.rank() == 0) {
    std::ifstream in(oregon_path);
    text.assign(std::istreambuf_iterator<char>(in), {});
    text.erase(text.rfind("-1"));
  }
  auto fixed = write_file(rt, dir.path(), "oregon.el", text);
  auto oregon = read_graph(rt, fixed).graph;
  EXPECT_EQ(oregon.vertices(), 10670u);
  EXPECT_EQ(oregon.edges(), 44004u);
  EXPECT_EQ(summarize(oregon, fastsv(oregon).labels).count, 1u);
  ReadOptions u;
  u.undirected = true;
  auto undirected = read_graph(rt, fixed, u).graph;
  EXPECT_EQ(undirected.arcs(), 44004u);  // both directions were listed already
  EXPECT_EQ(undirected.edges(), 22002u);  // SNAP's count: no self loops
}
