// PageRank: L. Page, S. Brin, R. Motwani and T. Winograd, "The PageRank
// Citation Ranking: Bringing Order to the Web", Stanford InfoLab 1999; with
// the rules of GAPBS's `pr` (S. Beamer, K. Asanović and D. Patterson, "The
// GAP Benchmark Suite", arXiv:1508.03619): damping 0.85, stop when an
// iteration changes the scores by less than 1e-4 in L1, pull over in-arcs,
// Gauss-Seidel within a sweep, dangling vertices' scores passed to nobody.
//
// Distributed: each rank owns a range of vertices and their in-arcs (a
// directed graph's transpose on the same ranges). An iteration reads the
// contributions x[u] / deg(u) of the in-neighbours other ranks own (its
// ghosts, sorted and distinct) with one all-to-all planned once, then
// sweeps its rows. The L1 change is summed in fixed point, so the stopping iteration
// (and, by Jacobi, every bit of the scores) is the same at every rank count.
//
// Its verifier (check_pagerank) sits below it.
#include "tessera/graph/pagerank.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <type_traits>

#include "tessera/comm/aggregators.hpp"
#include "tessera/comm/request_reply.hpp"
#include "tessera/runtime/cancellation.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera::graph {

PageRankMethod parse_pagerank_method(const std::string& name) {
  if (name == "gauss-seidel") return PageRankMethod::gauss_seidel;
  if (name == "jacobi") return PageRankMethod::jacobi;
  throw ConfigError("the PageRank method must be gauss-seidel or jacobi, not '" + name + "'");
}

const char* pagerank_method_name(PageRankMethod method) {
  return method == PageRankMethod::jacobi ? "jacobi" : "gauss-seidel";
}

namespace {

using Clock = std::chrono::steady_clock;

template <class G>
void check_options(const G& g, const PageRankOptions& o) {
  if (!(o.damping >= 0 && o.damping < 1))
    throw ConfigError("the PageRank damping must be in [0, 1), not " + std::to_string(o.damping));
  if (!(o.tolerance >= 0)) throw ConfigError("the PageRank tolerance must be >= 0, not " + std::to_string(o.tolerance));
  if (o.max_iterations < 1)
    throw ConfigError("the PageRank iteration cap must be at least 1, not " + std::to_string(o.max_iterations));
  for (auto v : o.personalization)
    if (v >= g.vertices())
      throw RangeError("personalization vertex " + std::to_string(v) + " is outside the graph's vertex ids 0.." +
                       std::to_string(g.vertices() - 1) + (g.vertices() == 0 ? " (the graph is empty)" : ""));
}

// (1 - d) p for this rank's vertices: the teleport term.
template <class G>
std::vector<double> teleport(const G& g, const PageRankOptions& o) {
  const std::uint64_t base = g.local_vertex_begin(), end = g.local_vertex_end();
  if (o.personalization.empty())
    return std::vector<double>(g.local_vertices(), (1 - o.damping) / static_cast<double>(g.vertices()));
  std::vector<std::uint64_t> set = o.personalization;
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  std::vector<double> t(g.local_vertices(), 0.0);
  for (auto v : set)
    if (v >= base && v < end) t[v - base] = (1 - o.damping) / static_cast<double>(set.size());
  return t;
}

// An L1 change (at most 2: two score vectors of sum at most 1) in fixed
// point, 2^-62 a unit: integer sums do not depend on their order. A
// vertex's change, capped just below 2, fits a signed 64-bit integer: one
// conversion instruction per vertex, not the unsigned one's test and fixup.
constexpr double kFixedScale = 0x1p62;
inline std::uint64_t fixed(double x) {
  return static_cast<std::uint64_t>(static_cast<std::int64_t>(std::min(x, 0x1.fffffffffffffp0) * kFixedScale));
}

std::string shown(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", x);
  return buf;
}

const EdgeList& in_arcs_of(const EdgeList& g, const EdgeList* given, std::optional<EdgeList>& holder) {
  if (!g.directed()) return g;  // both directions stored: in-arcs are out-arcs
  if (!given) return holder.emplace(g.transposed({}, true));
  agree(g.runtime().comm(), [&] {
    if (given->vertices() != g.vertices() || !(given->vertex_ranges() == g.vertex_ranges()) ||
        given->arcs() != g.arcs())
      throw MismatchError("the in-arcs given to PageRank are not the graph's transpose on its vertex ranges "
                          "(EdgeList::transposed(storage, true))");
  });
  return *given;
}

// The in-neighbours other ranks own (the ghosts), numbered in id order:
// one pass over the in-arcs marks them in a bitmap of every vertex id, a
// running count per 64 ids then gives each its slot in one word load and a
// popcount. No branch per arc (local or not is as likely as a coin toss at
// two ranks), n / 4 bytes while the columns are made. Id: the graph's
// vertex id type.
class GhostNumbering {
 public:
  template <class Id>
  GhostNumbering(std::span<const Id> column, std::uint64_t base, std::size_t n_local, std::uint64_t vertices)
      : base_(base), n_local_(n_local), words_((vertices + 63) / 64) {
    for (const std::uint64_t u : column) mark(u);
    number();
  }
  // The same over a packed graph's rows, decoded once.
  GhostNumbering(const PackedRows& rows, std::uint64_t base, std::uint64_t vertices)
      : base_(base), n_local_(rows.size()), words_((vertices + 63) / 64) {
    for (std::size_t i = 0; i < rows.size(); ++i) rows.for_each(i, [&](std::uint64_t u) { mark(u); });
    number();
  }
  std::uint64_t count() const noexcept { return count_; }
  std::vector<std::uint64_t> ids() const {
    std::vector<std::uint64_t> out;
    out.reserve(count_);
    for (std::size_t w = 0; w < words_.size(); ++w)
      for (std::uint64_t b = words_[w].bits; b; b &= b - 1)
        out.push_back(w * 64 + static_cast<std::uint64_t>(std::countr_zero(b)));
    return out;
  }
  // Where vertex u's contribution sits: a local u at u - base, a ghost at n_local + its slot.
  std::uint64_t place(std::uint64_t u) const noexcept {
    const std::uint64_t local = u - base_;
    const Word& w = words_[u >> 6];
    const std::uint64_t ghost =
        n_local_ + w.before + static_cast<std::uint64_t>(std::popcount(w.bits & ((1ull << (u & 63)) - 1)));
    const std::uint64_t is_local = -static_cast<std::uint64_t>(local < n_local_);  // all ones or zero
    return (local & is_local) | (ghost & ~is_local);
  }
  template <class Id, class Index>
  void columns(std::span<const Id> column, Index* col) const {
    for (std::size_t k = 0; k < column.size(); ++k) col[k] = static_cast<Index>(place(column[k]));
  }
  std::size_t memory_bytes() const noexcept { return words_.capacity() * sizeof(Word); }

 private:
  void mark(std::uint64_t u) noexcept {
    const std::uint64_t remote = u - base_ >= n_local_;  // wraps below base
    words_[u >> 6].bits |= remote << (u & 63);
  }
  void number() noexcept {
    for (auto& w : words_) w.before = count_, count_ += static_cast<std::uint64_t>(std::popcount(w.bits));
  }

  struct Word {
    std::uint64_t bits = 0, before = 0;
  };
  std::uint64_t base_;
  std::size_t n_local_;
  std::vector<Word> words_;
  std::uint64_t count_ = 0;
};

}  // namespace

struct PageRankIndex::Data {
  std::uint64_t vertices = 0, arcs = 0;   // of the graph it was made for
  Distribution ranges;
  std::vector<std::uint64_t> row;         // in-arc row offsets of this rank's vertices
  // The columns as places: 4 bytes wide when they fit (col32), else col64.
  std::unique_ptr<std::uint32_t[]> col32;
  std::unique_ptr<std::uint64_t[]> col64;
  std::uint64_t ghosts = 0;               // places after the local ones
  comm::RequestPlan<std::uint64_t> plan;  // the ghost ids, asked of their owners
  std::vector<std::uint32_t> asked32;     // local offsets of what other ranks asked of this one
  std::vector<std::uint64_t> asked64;
  std::uint64_t memory_bytes = 0;
  bool rows_are_out_arcs = false;         // an undirected graph's: a row's length is the out-degree
  // One rank, undirected: the graph's own offsets and columns already are
  // the rows and places, read from the graph at each run (nothing copied).
  bool reads_graph = false;
};

namespace {

// What one run of the kernel works on, whatever its number types.
struct Sweep {
  Runtime& rt;
  const PageRankOptions& o;
  const PageRankIndex::Data& index;
  const std::uint64_t* row;                  // the in-arc rows' offsets (the index's or the graph's)
  std::size_t n_local;
  const std::vector<double>& tele;           // (1 - d) p; empty when p is uniform
  double uniform_tele;                       // (1 - d) / n, when p is uniform
  const std::vector<double>& out_degree;     // empty when the index's rows are the out-arcs
  std::span<double> x;                       // the scores, started
  Clock::time_point t0;
  // Where the contributions sit. By default local vertex i at c[i] and the
  // ghosts after them, in the index's slots. With ghost_ids, vertex u at
  // c[u] (c is as long as the graph: rows read it by vertex id, no place
  // to look up) and the replies land at their ids.
  const std::vector<std::uint64_t>* ghost_ids = nullptr;
  std::uint64_t vertices = 0;
  std::uint64_t base = 0;
};

// The sum of c[j] over the columns j in [first, last), in the row's order
// (so the bits do not depend on the rank count), one chain of additions.
// Measured against four lanes unrolled by eight (GAPBS kron-20): the plain
// loop is 15% faster. Most rows are short, and each extra loop per row
// (groups, remainder) is one more mispredicted exit; the gathers' misses
// overlap across rows either way.
template <class Index, class Value>
inline double gather_sum(const Value* c, const Index* first, const Index* last) {
  double sum = 0;
  for (; first != last; ++first) sum += static_cast<double>(c[*first]);
  return sum;
}

// What a vertex sends along each out-arc: its score over its out-degree
// (GAPBS's division), nothing from a dangling vertex.
template <class Value>
inline Value contribution(double score, double degree) {
  return degree > 0 ? static_cast<Value>(score / degree) : Value{0};
}

// Every local row, in order: f(i, sum of its columns' c, its length). Each
// row's end is the next row's start: one offset read per row.
template <class Index>
struct AllRows {
  std::size_t n_local;
  const std::uint64_t* row;
  const Index* cl;
  template <class Value, class F>
  void operator()(const Value* c, F&& f) const {
    if (n_local == 0) return;
    const Index* first = cl + row[0];
    for (std::size_t i = 0; i < n_local; ++i) {
      const Index* last = cl + row[i + 1];
      f(i, gather_sum(c, first, last), static_cast<double>(last - first));
      first = last;
    }
  }
};

// The rows with in-arcs only. A row without any has the score of its
// teleport from the first sweep on (and so the same contribution), and a
// change of 0: later sweeps skip it, with the same bits as visiting it.
// GAPBS's kron-20 has 38% such rows: the kernel took 5% less time (medians
// of 9 interleaved runs, 0.339 against 0.356 s).
template <class Index>
struct BusyRows {
  const std::vector<std::uint32_t>& busy;
  const std::uint64_t* row;
  const Index* cl;
  template <class Value, class F>
  void operator()(const Value* c, F&& f) const {
    for (std::uint32_t i : busy)
      f(std::size_t{i}, gather_sum(c, cl + row[i], cl + row[i + 1]), static_cast<double>(row[i + 1] - row[i]));
  }
};

// A packed graph's rows, decoded in place: each neighbour's contribution
// read at its id (c is as long as the graph). `order`: the rows to visit,
// in order (null: all, in id order).
struct PackedSums {
  const PackedRows& rows;
  const std::vector<std::uint32_t>* order;
  template <class Value, class F>
  void operator()(const Value* c, F&& f) const {
    auto one = [&](std::size_t i) {
      double sum = 0;
      const std::uint64_t length = rows.for_each(i, [&](std::uint64_t u) { sum += static_cast<double>(c[u]); });
      f(i, sum, static_cast<double>(length));
    };
    if (order)
      for (std::uint32_t i : *order) one(i);
    else
      for (std::size_t i = 0; i < rows.size(); ++i) one(i);
  }
};

// One sweep over `rows`; the L1 change in fixed point. Gauss-Seidel
// writes each new score and contribution at once (later rows read it);
// Jacobi writes the scores to `next` only. Uniform: every vertex's
// teleport is `tele0` (no stream of it per vertex).
// `degree`: each vertex's out-degree; null when the rows are out-arcs too
// (an undirected graph), then the degree is the row's length, already read:
// one stream less per vertex.
template <bool GaussSeidel, bool Uniform, class Rows, class Value>
std::uint64_t sweep_rows(const Rows& rows, const Value* c, Value* cv, double* x, double* next, const double* tele,
                         double tele0, const double* degree, double d) {
  std::uint64_t change = 0;
  rows(c, [&](std::size_t i, double sum, double length) {
    const double score = (Uniform ? tele0 : tele[i]) + d * sum;
    change += fixed(std::fabs(score - x[i]));
    if constexpr (GaussSeidel) {
      x[i] = score;
      cv[i] = contribution<Value>(score, degree ? degree[i] : length);
    } else {
      next[i] = score;
    }
  });
  return change;
}

// Rows with in-arcs, listed when rows without are at least 1/8 of them
// (below that the list's second offset read a row costs more than it
// saves) and every local row fits 32 bits; else empty.
std::vector<std::uint32_t> busy_rows(std::size_t n_local, const std::uint64_t* row) {
  std::vector<std::uint32_t> busy;
  if (n_local == 0 || n_local > std::numeric_limits<std::uint32_t>::max()) return busy;
  std::size_t empty = 0;
  for (std::size_t i = 0; i < n_local; ++i) empty += row[i + 1] == row[i];
  if (empty < n_local / 8) return busy;
  busy.reserve(n_local - empty);
  for (std::size_t i = 0; i < n_local; ++i)
    if (row[i + 1] != row[i]) busy.push_back(static_cast<std::uint32_t>(i));
  return busy;
}

// The iterations: a plain gather per row over the index's columns, with
// Value-wide contributions (float when the tolerance allows: half the bytes
// of the randomly read array). Sums and scores stay double; an in-arc row is
// summed in its stored order at every rank count, so Jacobi gives the same
// bits at every rank count.
// Sums: a functor making the row source, given the busy rows (null: all).
template <class Index, class Value, class Sums>
void iterate(const Sweep& s, const Sums& sums_over, std::span<const Index> asked, PageRank& out) {
  const std::size_t n_local = s.n_local;
  const double d = s.o.damping;
  const bool distributed = s.rt.size() > 1;
  const bool by_id = s.ghost_ids != nullptr;
  std::vector<Value> c(by_id ? s.vertices : n_local + s.index.ghosts);
  std::vector<Value> ghost_values(by_id ? s.index.ghosts : 0);
  Value* const cv = c.data() + (by_id ? s.base : 0);  // this rank's own contributions
  const std::uint64_t* row = s.row;
  const double* degree = s.out_degree.empty() ? nullptr : s.out_degree.data();
  auto degree_of = [&](std::size_t i) { return degree ? degree[i] : static_cast<double>(row[i + 1] - row[i]); };
  for (std::size_t i = 0; i < n_local; ++i) cv[i] = contribution<Value>(s.x[i], degree_of(i));
  std::vector<Value> answers(asked.size());
  std::vector<double> next(s.o.method == PageRankMethod::jacobi ? n_local : 0);
  const std::vector<std::uint32_t> busy = busy_rows(n_local, row);
  out.single_precision = std::is_same_v<Value, float>;
  out.extra_bytes = all_reduce<std::uint64_t>(
      s.rt.comm(),
      s.index.memory_bytes + (c.size() + answers.size() + ghost_values.size()) * sizeof(Value) +
          (next.size() + s.tele.size() + s.out_degree.size()) * sizeof(double) + busy.size() * sizeof(std::uint32_t),
      MPI_MAX);

  double* x = s.x.data();
  const double* tele = s.tele.data();
  // Uniform teleport (no personalization): one value for every row.
  const bool uniform = s.o.personalization.empty();
  const double tele0 = s.uniform_tele;
  const bool gauss_seidel = s.o.method == PageRankMethod::gauss_seidel;
  for (;;) {
    trace::Span traced(trace::Category::round, "PageRank sweep");
    traced.arg("iteration", out.iterations + 1);
    if (distributed) {
      for (std::size_t k = 0; k < asked.size(); ++k) answers[k] = cv[asked[k]];
      if (by_id) {
        s.index.plan.reply<Value>(answers, std::span<Value>(ghost_values));
        const std::uint64_t* ids = s.ghost_ids->data();
        for (std::size_t k = 0; k < ghost_values.size(); ++k) c[ids[k]] = ghost_values[k];
      } else {
        s.index.plan.reply<Value>(answers, std::span<Value>(c).subspan(n_local));
      }
    }
    auto sweep = [&]<bool GaussSeidel>(double* to) {
      auto over = [&](const auto& rows) {
        return uniform ? sweep_rows<GaussSeidel, true>(rows, c.data(), cv, x, to, tele, tele0, degree, d)
                       : sweep_rows<GaussSeidel, false>(rows, c.data(), cv, x, to, tele, tele0, degree, d);
      };
      return sums_over(out.iterations > 0 && !busy.empty() ? &busy : nullptr, over);
    };
    std::uint64_t change = gauss_seidel ? sweep.template operator()<true>(x) : sweep.template operator()<false>(next.data());
    if (!gauss_seidel)
      for (std::size_t i = 0; i < n_local; ++i) x[i] = next[i], cv[i] = contribution<Value>(next[i], degree_of(i));
    change = all_reduce(s.rt.comm(), change, MPI_SUM);
    out.change = static_cast<double>(change) / kFixedScale;
    ++out.iterations;
    out.converged = out.change < s.o.tolerance;
    if (s.o.on_iteration)
      s.o.on_iteration(out.iterations, out.change, std::chrono::duration<double>(Clock::now() - s.t0).count());
    cancellation_point(s.rt.comm());
    if (out.converged || out.iterations >= s.o.max_iterations) break;
  }
}

}  // namespace

PageRankIndex::PageRankIndex(const EdgeList& g, const EdgeList* given_in_arcs) : data_(std::make_unique<Data>()) {
  std::optional<EdgeList> holder;
  const EdgeList& in = in_arcs_of(g, given_in_arcs, holder);
  Runtime& rt = g.runtime();
  Data& d = *data_;
  d.vertices = g.vertices();
  d.arcs = g.arcs();
  d.ranges = g.vertex_ranges();
  d.rows_are_out_arcs = !g.directed();
  const std::uint64_t base = g.local_vertex_begin();
  const std::size_t n_local = g.local_vertices();
  if (rt.size() == 1 && !g.directed()) {
    d.reads_graph = true;  // memory_bytes stays 0
    return;
  }
  auto offsets = in.row_offsets();
  d.row.assign(offsets.begin(), offsets.end());
  const std::size_t arcs = in.local_arcs();
  // At one rank nothing is remote: no scan of the arcs for ghosts.
  std::optional<GhostNumbering> ghosts;
  if (rt.size() > 1) in.with_dst([&](auto column) { ghosts.emplace(column, base, n_local, g.vertices()); });
  d.ghosts = ghosts ? ghosts->count() : 0;
  // 4-byte places when every rank's fit (whatever the graph's id width:
  // places count this rank's vertices and ghosts, not the graph's).
  const bool narrow = all_reduce<std::uint64_t>(rt.comm(), n_local + d.ghosts, MPI_MAX) <=
                      std::numeric_limits<std::uint32_t>::max();
  auto fill = [&](auto* col) {
    using Index = std::remove_pointer_t<decltype(col)>;
    in.with_dst([&](auto column) {
      if (ghosts) ghosts->columns(column, col);
      else  // every in-neighbour local: a plain narrowing copy
        for (std::size_t k = 0; k < column.size(); ++k) col[k] = static_cast<Index>(column[k] - base);
    });
  };
  if (narrow) fill((d.col32 = std::make_unique_for_overwrite<std::uint32_t[]>(arcs)).get());
  else fill((d.col64 = std::make_unique_for_overwrite<std::uint64_t[]>(arcs)).get());
  std::uint64_t asked = 0;
  if (ghosts) {
    // Sorted ids are grouped by owner: the values land in place, at c[n_local + slot].
    const std::vector<std::uint64_t> ids = ghosts->ids();
    const Distribution& ranges = d.ranges;
    d.plan = comm::RequestPlan<std::uint64_t>(rt.comm(), std::span<const std::uint64_t>(ids),
                                              [&](std::uint64_t v) { return ranges.owner(v); });
    const std::vector<std::uint64_t> received = d.plan.take_received();
    asked = received.size();
    for (auto v : received) {
      if (narrow) d.asked32.push_back(static_cast<std::uint32_t>(v - base));
      else d.asked64.push_back(v - base);
    }
  }
  d.memory_bytes = d.row.size() * sizeof(std::uint64_t) + arcs * (narrow ? 4 : 8) +
                   asked * (narrow ? 4 : 8) + d.plan.pattern().memory_bytes() +
                   (ghosts ? ghosts->memory_bytes() : 0);  // the bitmap, while the columns are made
}

PageRankIndex::PageRankIndex(PageRankIndex&&) noexcept = default;
PageRankIndex& PageRankIndex::operator=(PageRankIndex&&) noexcept = default;
PageRankIndex::~PageRankIndex() = default;

PageRank pagerank(const EdgeList& g, const PageRankOptions& o, const EdgeList* given_in_arcs,
                  const PageRankIndex* index) {
  agree(g.runtime().comm(), [&] {
    check_options(g, o);
    if (index && (index->data().vertices != g.vertices() || index->data().arcs != g.arcs() ||
                  !(index->data().ranges == g.vertex_ranges()) || index->data().rows_are_out_arcs == g.directed()))
      throw MismatchError("the PageRank index was made for another graph (" +
                          std::to_string(index->data().vertices) + " vertices, " +
                          std::to_string(index->data().arcs) + " arcs; this one has " +
                          std::to_string(g.vertices()) + " and " + std::to_string(g.arcs()) + ")");
  });
  const auto t0 = Clock::now();
  Runtime& rt = g.runtime();
  const std::size_t n_local = g.local_vertices();
  const double d = o.damping;

  // A uniform teleport is one value, not a stream of n equal ones.
  const bool uniform = o.personalization.empty();
  const std::vector<double> tele = uniform ? std::vector<double>() : teleport(g, o);
  const double uniform_tele = (1 - d) / static_cast<double>(g.vertices());
  PageRank out{DistArray<double>(g.vertex_map()), 0, 0, false, 0, 0, false};
  auto x = out.scores.local();
  // GAPBS starts from 1/n; the personalized scores from p.
  for (std::size_t i = 0; i < n_local; ++i) x[i] = uniform ? 1.0 / static_cast<double>(g.vertices()) : tele[i] / (1 - d);
  std::optional<PageRankIndex> made;
  if (!index) made.emplace(g, given_in_arcs);
  const PageRankIndex::Data& ix = (index ? *index : *made).data();
  // A directed graph's out-degrees are not its in-arc rows' lengths.
  std::vector<double> out_degree;
  if (!ix.rows_are_out_arcs) {
    auto out_offsets = g.row_offsets();
    out_degree.resize(n_local);
    for (std::size_t i = 0; i < n_local; ++i) out_degree[i] = static_cast<double>(out_offsets[i + 1] - out_offsets[i]);
  }
  const Sweep sweep{rt, o, ix, ix.reads_graph ? g.row_offsets().data() : ix.row.data(), n_local, tele, uniform_tele,
                    out_degree, x, t0};
  // The precision from the tolerance: the same on every rank.
  auto run = [&]<class Index>(const Index* columns, std::span<const Index> asked) {
    const std::uint64_t* row = sweep.row;
    auto sums = [&](const std::vector<std::uint32_t>* busy, auto&& over) {
      return busy ? over(BusyRows<Index>{*busy, row, columns}) : over(AllRows<Index>{n_local, row, columns});
    };
    if (o.tolerance >= kPageRankSinglePrecisionTolerance) iterate<Index, float>(sweep, sums, asked, out);
    else iterate<Index, double>(sweep, sums, asked, out);
  };
  if (ix.reads_graph) g.with_dst([&](auto dst) { run(dst.data(), decltype(dst)()); });
  else if (ix.col32) run(ix.col32.get(), std::span<const std::uint32_t>(ix.asked32));
  else run(ix.col64.get(), std::span<const std::uint64_t>(ix.asked64));
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

PageRank pagerank(const PackedGraph& g, const PageRankOptions& o, const PackedGraph* given_in_arcs) {
  agree(g.runtime().comm(), [&] {
    check_options(g, o);
    if (g.directed() && !given_in_arcs)
      throw ConfigError("PageRank on a directed packed graph pulls over in-arcs: pass its transpose packed on the "
                        "same vertex ranges");
    if (given_in_arcs && (given_in_arcs->vertices() != g.vertices() ||
                          !(given_in_arcs->vertex_ranges() == g.vertex_ranges()) || given_in_arcs->arcs() != g.arcs()))
      throw MismatchError("the in-arcs given to PageRank are not the packed graph's transpose on its vertex ranges");
  });
  const auto t0 = Clock::now();
  Runtime& rt = g.runtime();
  const PackedGraph& in = g.directed() ? *given_in_arcs : g;
  const std::size_t n_local = g.local_vertices();
  const std::uint64_t base = g.local_vertex_begin();
  const bool uniform = o.personalization.empty();
  const std::vector<double> tele = uniform ? std::vector<double>() : teleport(g, o);
  PageRank out{DistArray<double>(g.vertex_map()), 0, 0, false, 0, 0, false};
  auto x = out.scores.local();
  for (std::size_t i = 0; i < n_local; ++i) x[i] = uniform ? 1.0 / static_cast<double>(g.vertices()) : tele[i] / (1 - o.damping);
  PageRankIndex::Data ix;
  ix.vertices = g.vertices();
  ix.arcs = g.arcs();
  ix.ranges = g.vertex_ranges();
  const PackedRows rows = in.rows();
  std::vector<std::uint64_t> asked, ghost_ids;
  if (rt.size() > 1) {
    {
      const GhostNumbering ghosts(rows, base, g.vertices());
      ghost_ids = ghosts.ids();
    }
    ix.ghosts = ghost_ids.size();
    const Distribution& ranges = ix.ranges;
    ix.plan = comm::RequestPlan<std::uint64_t>(rt.comm(), std::span<const std::uint64_t>(ghost_ids),
                                               [&](std::uint64_t v) { return ranges.owner(v); });
    for (auto v : ix.plan.take_received()) asked.push_back(v - base);
    ix.memory_bytes = (asked.size() + ghost_ids.size()) * sizeof(std::uint64_t) + ix.plan.pattern().memory_bytes();
  }
  // The out-degrees: a sweep's rows are in-arcs, decoded, so a row's length
  // is counted as it is read, but the first contributions need them.
  std::vector<double> out_degree(n_local);
  const PackedRows out_rows = g.rows();
  for (std::size_t i = 0; i < n_local; ++i) out_degree[i] = static_cast<double>(out_rows.degree(i));
  // Gauss-Seidel sweeps the rows in the order of their ids before the
  // numbering by degree: in degree order it needs about a third more
  // sweeps on Kronecker graphs (hubs first read their neighbours' old
  // scores). The rows with in-arcs only, after the first sweep.
  std::vector<std::uint32_t> order, busy_order;
  if (const DistArray<std::uint64_t>* old = g.original_ids(); old && o.method == PageRankMethod::gauss_seidel) {
    auto ids = old->local();
    order.resize(n_local);
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return ids[a] < ids[b]; });
  }
  const std::vector<std::uint32_t>* all = order.empty() ? nullptr : &order;
  Sweep sweep{rt, o, ix, in.offsets().local().data(), n_local, tele, (1 - o.damping) / static_cast<double>(g.vertices()),
              out_degree, x, t0};
  if (rt.size() > 1) sweep.ghost_ids = &ghost_ids, sweep.vertices = g.vertices(), sweep.base = base;
  auto sums = [&](const std::vector<std::uint32_t>* busy, auto&& over) {
    if (!busy) return over(PackedSums{rows, all});
    if (busy_order.empty()) {  // the busy rows, in the sweep's order
      if (all) {
        for (auto i : order)
          if (rows.degree(i)) busy_order.push_back(i);
      } else {
        busy_order = *busy;
      }
    }
    return over(PackedSums{rows, &busy_order});
  };
  if (o.tolerance >= kPageRankSinglePrecisionTolerance)
    iterate<std::uint64_t, float>(sweep, sums, std::span<const std::uint64_t>(asked), out);
  else
    iterate<std::uint64_t, double>(sweep, sums, std::span<const std::uint64_t>(asked), out);
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

namespace {
template <class G>
std::string check_pagerank_of(const G& g, const DistArray<double>& x, const PageRankOptions& o, double tolerance) {
  if (!(x.distribution() == g.vertex_ranges()))
    throw MismatchError("the scores are not distributed like the graph's vertices (" + std::to_string(x.size()) +
                        " scores, " + std::to_string(g.vertices()) + " vertices)");
  agree(g.runtime().comm(), [&] { check_options(g, o); });
  Runtime& rt = g.runtime();
  auto s = x.local();
  const std::uint64_t base = g.local_vertex_begin();
  std::string problem;
  for (std::size_t i = 0; i < s.size() && problem.empty(); ++i)
    if (!std::isfinite(s[i]) || s[i] < 0)
      problem = "vertex " + std::to_string(base + i) + " has score " + shown(s[i]) +
                " (scores are finite and non-negative)";
  if (problem = first_problem(rt.comm(), problem); !problem.empty()) return problem;

  DistArray<double> incoming(g.vertex_map());
  {
    UpdateAggregator<double, ops::Add> add(incoming, o.aggregation);
    with_rows(g, [&](const auto& rows) {
      for (std::size_t i = 0; i < rows.size(); ++i)
        if (const std::uint64_t degree = rows.degree(i)) {
          const double share = s[i] / static_cast<double>(degree);
          rows.for_each(i, [&](std::uint64_t v) { add.update(v, share); });
        }
    });
  }
  const std::vector<double> tele = teleport(g, o);
  auto in = incoming.local();
  double residual = 0;
  for (std::size_t i = 0; i < s.size(); ++i) residual += std::fabs(tele[i] + o.damping * in[i] - s[i]);
  residual = all_reduce(rt.comm(), residual, MPI_SUM);
  if (residual < tolerance) return "";
  return "one PageRank iteration from these scores changes them by " + shown(residual) +
         " in L1, not below the tolerance " + shown(tolerance) + " (not a fixed point)";
}
}  // namespace

std::string check_pagerank(const EdgeList& g, const DistArray<double>& x, const PageRankOptions& o,
                           double tolerance) {
  return check_pagerank_of(g, x, o, tolerance);
}
std::string check_pagerank(const PackedGraph& g, const DistArray<double>& x, const PageRankOptions& o,
                           double tolerance) {
  return check_pagerank_of(g, x, o, tolerance);
}

}  // namespace tessera::graph
