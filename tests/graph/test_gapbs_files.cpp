// GAPBS's files and counts: GAPBS's own test graphs (tests/graph/data/gapbs,
// copied from GAPBS's test/graphs with its license) read with GAPBS's vertex
// and edge counts in every format GAPBS reads (.el .wel .gr .graph .mtx, the
// serialized .sg/.wsg its converter writes); the .sg of an .el has the .el's
// CSR; malformed DIMACS, METIS and serialized files refused with the file, the
// line or byte offset and the fault, leaving no Shared segment; a multigraph
// kept when asked. At 1-4 ranks.
//
// The expected counts are GAPBS's, printed by its converter (commit b5e3e19,
// built with its Makefile: `make converter bfs`), for each FILE of
// test/graphs:
//   ./converter -f test/graphs/FILE      -> "Graph has 14 nodes and 53 directed edges for degree: 3"
//   ./converter -f test/graphs/FILE -s   -> "Graph has 14 nodes and 53 undirected edges for degree: 3"
// (FILE = 4.el 4.wel 4.gr 4.graph 4w.graph 4.mtx 4w.mtx; GAPBS's
// test/reference/graph-FILE.out says the same). The serialized files came
// from the converter too (data/gapbs/README.md has each command):
//   ./bfs -f 4.sg -n0     -> "Graph has 14 nodes and 53 directed edges for degree: 3"
//   ./bfs -f 4u.sg -n0    -> "Graph has 14 nodes and 53 undirected edges for degree: 3"
//   ./converter -f 4u.graph      -> "Graph has 14 nodes and 106 directed edges for degree: 7"
//   ./converter -f 4u.graph -s   -> "Graph has 14 nodes and 53 undirected edges for degree: 3"
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "../test_util.hpp"
#include "graph_test_util.hpp"
#include "tessera/graph/io.hpp"

using namespace tessera;
using namespace tessera::graph;
using tessera::test::EdgeTuple;
namespace fs = std::filesystem;

using test::read_error;
using test::write_file;

namespace {

std::string gapbs_file(const std::string& name) { return std::string(TESSERA_SOURCE_DIR) + "/tests/graph/data/gapbs/" + name; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// GAPBS's 256 lines of 4.el: 36 self loops, 167 repeats of an arc already
// given, 53 arcs left (GAPBS's "53 directed edges").
constexpr std::uint64_t kLines = 256, kLoops = 36, kRepeats = 167, kArcs = 53, kVertices = 14;

}  // namespace

TEST(GapbsFiles, CountsAsGapbsCountsThem) {
  Runtime& rt = Runtime::current();
  const auto el = read_graph(rt, gapbs_file("4.el")).graph;
  const auto want = test::gather_edges(el);
  for (std::string name : {"4.el", "4.wel", "4.gr", "4.graph", "4w.graph", "4.mtx", "4w.mtx", "4.sg", "4.wsg"}) {
    SCOPED_TRACE(name);
    auto g = read_graph(rt, gapbs_file(name)).graph;
    EXPECT_EQ(g.vertices(), kVertices);
    EXPECT_EQ(g.edges(), kArcs);  // GAPBS: "53 directed edges"
    EXPECT_EQ(g.arcs(), kArcs);
    EXPECT_TRUE(g.directed());
    EXPECT_EQ(g.self_loops(), 0u);
    const bool weighted = name == "4.wel" || name == "4.gr" || name == "4w.graph" || name == "4w.mtx" || name == "4.wsg";
    EXPECT_EQ(g.weighted(), weighted);
    // Every file is the same 53 arcs (the weighted ones with their weights).
    auto arcs = test::gather_edges(g);
    for (auto& a : arcs) std::get<2>(a) = 1.0;
    EXPECT_EQ(arcs, want);
    // The lines that made it so: GAPBS's .graph and .sg files hold the 53 arcs only.
    const bool listed = name != "4.graph" && name != "4w.graph" && name != "4.sg" && name != "4.wsg";
    EXPECT_EQ(g.cleaning().self_loops, listed ? kLoops : 0u);
    EXPECT_EQ(g.cleaning().duplicates, listed ? kRepeats : 0u);
    EXPECT_FALSE(g.cleaning().kept);
    // GAPBS -s: "53 undirected edges".
    ReadOptions u;
    u.undirected = true;
    auto gu = read_graph(rt, gapbs_file(name), u).graph;
    EXPECT_FALSE(gu.directed());
    EXPECT_EQ(gu.vertices(), kVertices);
    EXPECT_EQ(gu.edges(), kArcs);
    EXPECT_EQ(gu.arcs(), 2 * kArcs);
  }
  // The undirected files: GAPBS's converter -s wrote 4u.sg and 4u.wsg; 4u.graph
  // lists each of those 53 edges at both ends.
  const auto undirected = [&] {
    ReadOptions u;
    u.undirected = true;
    return test::gather_edges(read_graph(rt, gapbs_file("4.el"), u).graph);
  }();
  for (std::string name : {"4u.sg", "4u.wsg", "4u.graph"}) {
    SCOPED_TRACE(name);
    auto g = read_graph(rt, gapbs_file(name)).graph;
    EXPECT_FALSE(g.directed());
    EXPECT_EQ(g.vertices(), kVertices);
    EXPECT_EQ(g.edges(), kArcs);  // GAPBS: "53 undirected edges"
    EXPECT_EQ(g.arcs(), 2 * kArcs);
    auto arcs = test::gather_edges(g);
    for (auto& a : arcs) std::get<2>(a) = 1.0;
    EXPECT_EQ(arcs, undirected);
  }
}

// A .sg (.wsg) GAPBS's converter wrote from an .el (.wel) is that file's CSR:
// the same arcs, weights and row offsets.
TEST(GapbsFiles, SerializedIsTheEdgeListsCsr) {
  Runtime& rt = Runtime::current();
  for (auto [text, serialized] : {std::pair{"4.el", "4.sg"}, std::pair{"4.wel", "4.wsg"}}) {
    SCOPED_TRACE(serialized);
    auto a = read_graph(rt, gapbs_file(text)).graph, b = read_graph(rt, gapbs_file(serialized)).graph;
    // The same rows: each vertex's sorted arcs, and so its degree.
    EXPECT_EQ(a.vertices(), b.vertices());
    EXPECT_EQ(test::gather_edges(a), test::gather_edges(b));
    EXPECT_EQ(test::gather_all(a.out_degrees()), test::gather_all(b.out_degrees()));
    EXPECT_EQ(a.arc_hash(), b.arc_hash());
  }
  for (auto [text, serialized] : {std::pair{"4.el", "4u.sg"}, std::pair{"4.wel", "4u.wsg"}}) {
    SCOPED_TRACE(serialized);
    ReadOptions u;
    u.undirected = true;
    auto a = read_graph(rt, gapbs_file(text), u).graph, b = read_graph(rt, gapbs_file(serialized)).graph;
    EXPECT_EQ(test::gather_edges(a), test::gather_edges(b));
    EXPECT_EQ(test::gather_all(a.out_degrees()), test::gather_all(b.out_degrees()));
    EXPECT_EQ(a.arc_hash(), b.arc_hash());
  }
  // --pattern leaves a .wsg's weights unread.
  ReadOptions pattern;
  pattern.pattern = true;
  auto unweighted = read_graph(rt, gapbs_file("4.wsg"), pattern).graph;
  EXPECT_FALSE(unweighted.weighted());
  EXPECT_EQ(test::gather_edges(unweighted), test::gather_edges(read_graph(rt, gapbs_file("4.sg")).graph));
}

TEST(GapbsFiles, MultigraphKeptWhenAsked) {
  Runtime& rt = Runtime::current();
  ReadOptions multi;
  multi.multigraph = true;
  for (std::string name : {"4.el", "4.wel", "4.gr", "4.mtx"}) {
    SCOPED_TRACE(name);
    auto g = read_graph(rt, gapbs_file(name), multi).graph;
    EXPECT_EQ(g.vertices(), kVertices);
    EXPECT_EQ(g.arcs(), kLines);  // every line an arc
    EXPECT_EQ(g.self_loops(), kLoops);
    EXPECT_EQ(g.cleaning().self_loops, kLoops);
    EXPECT_EQ(g.cleaning().duplicates, kRepeats);
    EXPECT_TRUE(g.cleaning().kept);
  }
  // Undirected, each line an edge: 256 edges, a self loop stored once.
  ReadOptions both = multi;
  both.undirected = true;
  auto gu = read_graph(rt, gapbs_file("4.el"), both).graph;
  EXPECT_FALSE(gu.directed());
  EXPECT_EQ(gu.edges(), kLines);
  EXPECT_EQ(gu.arcs(), 2 * (kLines - kLoops) + kLoops);
  // A simple read of the same lines as undirected: GAPBS's 53 (-s).
  ReadOptions simple;
  simple.undirected = true;
  EXPECT_EQ(read_graph(rt, gapbs_file("4.el"), simple).graph.edges(), kArcs);
  // Weights of repeated arcs: the smallest stays (as GAPBS keeps it).
  test::ScratchDir dir(rt);
  auto dup = write_file(rt, dir.path(), "dup.gr", "p sp 3 4\na 1 2 5\na 1 2 2\na 1 2 3\na 2 2 1\n");
  auto g = read_graph(rt, dup).graph;
  EXPECT_EQ(test::gather_edges(g), (std::vector<EdgeTuple>{{0, 1, 2.0}}));
  EXPECT_EQ(g.cleaning().duplicates, 2u);
  EXPECT_EQ(g.cleaning().self_loops, 1u);
  auto kept = read_graph(rt, dup, multi).graph;
  EXPECT_EQ(test::gather_edges(kept), (std::vector<EdgeTuple>{{0, 1, 2.0}, {0, 1, 3.0}, {0, 1, 5.0}, {1, 1, 1.0}}));
}

// Every malformed file is refused on every rank with the file, the line (or
// byte offset) and what is wrong; a read into Shared storage leaves nothing.
TEST(GapbsFiles, MalformedFilesNameTheFault) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt), shm(rt);
  ReadOptions shared;
  shared.storage = StorageOptions::shared("refused", shm.path());
  auto expect_refused = [&](const std::string& name, const std::string& bytes, const std::string& want) {
    SCOPED_TRACE(name);
    auto path = write_file(rt, dir.path(), name, bytes);
    const auto err = read_error(rt, path, shared);
    EXPECT_NE(err.find(name), std::string::npos) << err;
    EXPECT_NE(err.find(want), std::string::npos) << "got '" << err << "', want '" << want << "'";
    barrier(rt.comm());
    EXPECT_TRUE(fs::is_empty(shm.path())) << "a refused read left files in " << shm.path();
    barrier(rt.comm());
  };
  // Many lines, so a bad one sits in the last rank's byte range.
  std::string arcs;
  for (int i = 1; i < 200; ++i) arcs += "a " + std::to_string(i) + " " + std::to_string(i + 1) + " 1\n";

  // DIMACS .gr
  expect_refused("count.gr", "c a comment\np sp 200 200\n" + arcs, "count.gr:2: the problem line promises 200 arcs but the file has 199");
  expect_refused("range.gr", "p sp 200 200\n" + arcs + "a 201 1 1\n", "range.gr:201: vertex id 201 is out of range (the header says 200 vertices)");
  expect_refused("zero.gr", "p sp 3 1\na 0 1 1\n", "zero.gr:2: vertex id 0 is below the first id 1");
  expect_refused("none.gr", "p sp 0 1\na 1 1 1\n", "none.gr:2: vertex id 1 is out of range (the header says 0 vertices)");
  expect_refused("noproblem.gr", "c only\na 1 2 3\n", "noproblem.gr:2: expected the problem line 'p sp VERTICES ARCS'");
  expect_refused("maxflow.gr", "p max 3 1\na 1 2 3\n", "DIMACS problem 'max' is not supported");
  expect_refused("twice.gr", "p sp 3 2\na 1 2 3\np sp 3 1\n", "twice.gr:3: a second problem line");
  expect_refused("junk.gr", "p sp 3 2\na 1 2 3\ne 1 2\n", "junk.gr:3: expected an arc line 'a u v w'");
  expect_refused("short.gr", "p sp 3 1\na 1 2\n", "short.gr:2: expected 3 fields, found 2");
  expect_refused("missing.gr", "c nothing\n", "the DIMACS problem line 'p sp VERTICES ARCS' is missing");

  // METIS .graph
  std::string ring;  // 200 vertices in a ring, each edge at both ends
  for (int v = 1; v <= 200; ++v) ring += std::to_string(v == 1 ? 200 : v - 1) + " " + std::to_string(v == 200 ? 1 : v + 1) + "\n";
  expect_refused("edges.graph", "% ring\n200 199\n" + ring,
                 "edges.graph:2: the header says 199 edges, which its vertex lines list 398 times");
  expect_refused("vertices.graph", "201 200\n" + ring, "vertices.graph:1: the header says 201 vertices but the file has 200 vertex lines");
  expect_refused("past.graph", "2 1\n2\n1\n2\n", "past.graph:4: a vertex line past the header's 2 vertices");
  expect_refused("range.graph", "3 2\n2 4\n1\n1\n", "range.graph:2: neighbour 4 is out of range (the header says 3 vertices)");
  expect_refused("zero.graph", "3 1\n0\n\n\n", "zero.graph:2: neighbour 0: METIS ids start at 1");
  expect_refused("oneend.graph", "3 2\n2 3\n3\n1\n", "each edge is listed at both ends, but some is listed at one end only");
  expect_refused("weight.graph", "2 1 1\n2 5\n1\n", "weight.graph:3: neighbour 1 has no weight");
  expect_refused("fmt.graph", "2 1 2\n2\n1\n", "METIS fmt '2' is not 0, 1, 10, 11");
  expect_refused("sizes.graph", "2 1 101\n1 2 5\n1 1 5\n", "vertex sizes are not supported");
  expect_refused("noheader.graph", "% nothing\n", "the METIS header line");

  // GAPBS serialized .sg / .wsg
  const std::string sg = slurp(gapbs_file("4.sg")), wsg = slurp(gapbs_file("4.wsg")), usg = slurp(gapbs_file("4u.sg"));
  ASSERT_EQ(sg.size(), 17u + 8 * 15 + 4 * 53 + 8 * 15 + 4 * 53);
  expect_refused("cut.sg", sg.substr(0, 300), "cut.sg: truncated at byte offset 300, inside its neighbours");
  expect_refused("header.sg", sg.substr(0, 10), "header.sg: truncated at byte offset 10, inside the 17-byte GAPBS header");
  expect_refused("long.sg", sg + "xyz", "long.sg: 3 bytes past byte offset 681, where the graph its header describes "
                                       "(directed, 53 arcs, 14 vertices) ends");
  expect_refused("named.sg", wsg, "(the length of a GAPBS .wsg file: a .wsg named .sg?)");
  expect_refused("named.wsg", sg, "(the length of a GAPBS .sg file: an .sg named .wsg?)");
  auto patched = [](std::string bytes, std::size_t at, const void* value, std::size_t size) {
    std::memcpy(bytes.data() + at, value, size);
    return bytes;
  };
  const char two = 2;
  expect_refused("flag.sg", patched(sg, 0, &two, 1), "flag.sg: byte offset 0: the directed flag is 2");
  const std::int64_t negative = -5, fewer = 52;
  expect_refused("negative.sg", patched(sg, 1, &negative, 8), "negative.sg: byte offset 1: the arc count -5 is negative");
  expect_refused("count.sg", patched(sg, 1, &fewer, 8), "count.sg:");  // a length its header does not give
  const std::int64_t backwards = 1;  // vertex 3's row offset below vertex 2's
  expect_refused("offsets.sg", patched(sg, 17 + 8 * 3, &backwards, 8),
                 "offsets.sg: byte offset 41: the row offset of vertex 3 is 1, less than the previous row's");
  const std::int32_t outside = 14;
  const std::size_t first_neighbour = 17 + 8 * 15;
  expect_refused("neighbour.sg", patched(sg, first_neighbour + 4 * 7, &outside, 4),
                 "neighbour.sg: byte offset " + std::to_string(first_neighbour + 4 * 7) + ": neighbour 14 of vertex");
  // A directed file's in-arcs must be its out-arcs reversed.
  const std::size_t in_neighbours = 17 + 2 * 8 * 15 + 4 * 53;
  std::int32_t first_in = 0;
  std::memcpy(&first_in, sg.data() + in_neighbours, 4);
  const std::int32_t other = first_in == 0 ? 1 : 0;
  expect_refused("inverse.sg", patched(sg, in_neighbours, &other, 4), "inverse.sg: its in-arcs (from byte offset");
  // An undirected file's arcs must be symmetric.
  std::int32_t first_out = 0;
  std::memcpy(&first_out, usg.data() + first_neighbour, 4);
  const std::int32_t moved = first_out == 12 ? 13 : 12;
  expect_refused("asym.sg", patched(usg, first_neighbour, &moved, 4), "asym.sg: its header says undirected");
  const std::int64_t huge = std::int64_t{1} << 40;
  expect_refused("vertices.sg", patched(sg, 9, &huge, 8), "vertices.sg: byte offset 9");
  expect_refused("gz.wsg", std::string("\x1f\x8b\x08\x00", 4) + std::string(40, 'x'), "compressed input is not supported");
  // Options that cannot apply to a serialized graph are named.
  ReadOptions symmetric;
  symmetric.symmetric = true;
  EXPECT_NE(read_error(rt, gapbs_file("4u.sg"), symmetric).find("records its direction"), std::string::npos);
  ReadOptions relabel;
  relabel.relabel = true;
  EXPECT_NE(read_error(rt, gapbs_file("4.sg"), relabel).find("--relabel and --base apply to text files"), std::string::npos);
  ReadOptions base0;
  base0.base = 0;
  EXPECT_NE(read_error(rt, gapbs_file("4.gr"), base0).find("DIMACS ids are 1-based"), std::string::npos);
  EXPECT_NE(read_error(rt, gapbs_file("4.graph"), base0).find("METIS ids are 1-based"), std::string::npos);
}

// A METIS file with vertex weights (fmt 10, ncon 2) skips them; comments and
// a line per vertex, with blank lines past the last.
TEST(GapbsFiles, MetisVertexWeightsAndComments) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto path = write_file(rt, dir.path(), "vw.graph", "% c\n3 2 11 2\n% between\n7 8 2 1.5 3 2\n7 8 1 1.5\n7 8 1 2\n\n\n");
  auto g = read_graph(rt, path).graph;
  EXPECT_FALSE(g.directed());
  EXPECT_EQ(g.edges(), 2u);
  EXPECT_EQ(test::gather_edges(g), (std::vector<EdgeTuple>{{0, 1, 1.5}, {0, 2, 2.0}, {1, 0, 1.5}, {2, 0, 2.0}}));
  auto lacking = write_file(rt, dir.path(), "lacking.graph", "2 1 10 2\n7\n7 8 1\n");
  EXPECT_NE(read_error(rt, lacking).find("lacking.graph:2: vertex 1's line lacks its 2 vertex weights"),
            std::string::npos)
      << read_error(rt, lacking);
}

// Tessera's writers give GAPBS the same files: the .sg/.wsg of a graph read
// from GAPBS's text files are byte for byte what GAPBS's converter wrote;
// .gr and .graph read back as the same graph.
TEST(GapbsFiles, WritesWhatGapbsReads) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  ReadOptions u;
  u.undirected = true;
  const std::vector<std::tuple<std::string, ReadOptions, std::string>> cases = {
      {"4.el", {}, "4.sg"}, {"4.wel", {}, "4.wsg"}, {"4.el", u, "4u.sg"}, {"4.wel", u, "4u.wsg"}};
  for (const auto& [text, options, serialized] : cases) {
    SCOPED_TRACE(serialized);
    auto g = read_graph(rt, gapbs_file(text), options).graph;
    const std::string out = dir.path() + "/" + serialized;
    write_graph(g, out);
    barrier(rt.comm());
    EXPECT_EQ(slurp(out), slurp(gapbs_file(serialized)));
  }
  for (std::string name : {"4.wel", "4u.wsg", "4u.graph"}) {
    auto g = read_graph(rt, gapbs_file(name)).graph;
    for (std::string ext : {".gr", ".graph"}) {
      SCOPED_TRACE(name + " as " + ext);
      const std::string out = dir.path() + "/back-" + name + ext;
      write_graph(g, out);
      auto back = read_graph(rt, out).graph;
      EXPECT_EQ(back.vertices(), g.vertices());
      EXPECT_EQ(test::gather_edges(back), test::gather_edges(g));
      // DIMACS has no undirected graphs: their arcs come back directed.
      EXPECT_EQ(back.directed(), g.directed() || ext == ".gr");
    }
  }
  // What GAPBS's formats cannot hold is refused before anything is written.
  auto w = read_graph(rt, gapbs_file("4.wel")).graph;
  EXPECT_THROW(write_graph(w, dir.path() + "/w.sg"), ConfigError);  // .sg drops weights: .wsg
  EXPECT_THROW(write_graph(read_graph(rt, gapbs_file("4.el")).graph, dir.path() + "/u.wsg"), ConfigError);
  LocalEdges half;
  if (rt.rank() == 0) half.add(0, 1, 0.5), half.add(1, 0, 2.0);
  EXPECT_THROW(write_graph(EdgeList::build(rt, 2, true, std::move(half)), dir.path() + "/half.wsg"), ConfigError);
  ReadOptions loops;
  loops.multigraph = true;
  loops.undirected = true;
  EXPECT_THROW(write_graph(read_graph(rt, gapbs_file("4.el"), loops).graph, dir.path() + "/loops.graph"), ConfigError);
  barrier(rt.comm());
  for (auto name : {"w.sg", "u.wsg", "half.wsg", "loops.graph"}) EXPECT_FALSE(fs::exists(dir.path() + "/" + name)) << name;
}
