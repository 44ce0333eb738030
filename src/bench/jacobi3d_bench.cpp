// tessera bench jacobi3d: Poisson3D by Jacobi on over-decomposed chunks
// (jacobi3d.cpp) against the plain sequential loop in the same run; with
// --imbalance, the imbalanced and balanced cases under every load balancer.
// Verifier (jacobi::check): the iterate must match the theory (error rho^k
// |u*|, residual lambda rho^k |u*|) and the plain loop's iterate bit for bit.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "jacobi3d.hpp"
#include "tessera/bench/benchmarks.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/chunks/chunk_array.hpp"
#include "tessera/runtime/splitmix64.hpp"

namespace tessera::bench {
using namespace tessera::chunks;

namespace jacobi {

std::string check(const Problem& p, const Outcome& o, const Outcome* reference) {
  // The theory, computed here independently of the run: u* peaks at the grid
  // point nearest the centre; error rho^k |u*|, residual lambda rho^k |u*|.
  const double pi = 3.14159265358979323846, h = 1.0 / (p.n + 1), rho = std::cos(pi * h);
  double peak = 0;
  for (int g = 0; g < p.n; ++g) peak = std::max(peak, std::sin(pi * (g + 1) * h));
  peak = peak * peak * peak;
  const double error = std::pow(rho, p.iterations) * peak, residual = 6 * (1 - rho) / (h * h) * error;
  bool same = !reference || reference->checksum == o.checksum;
  bool ok = o.deviation <= 1e-9 * (1 + peak) && std::abs(o.error - error) <= 1e-9 * (1 + peak) &&
            std::abs(o.residual - residual) <= 1e-6 * (1 + residual) && same;
  char text[300];
  std::snprintf(text, sizeof text, "%s: error %.6e (theory %.6e), residual %.6e (theory %.6e)%s after %d iterations",
                ok ? "ok" : "WRONG", o.error, error, o.residual, residual,
                reference ? (same ? ", bit-identical to the plain loop" : ", DIFFERS from the plain loop") : "",
                p.iterations);
  return text;
}

Variant plain_variant(Runtime& rt, const Problem& p, Outcome& plain, std::string group) {
  return Variant{.group = std::move(group), .variant = "plain sequential loop", .storage = "-", .reps = 1,
                 .work = std::pow(static_cast<double>(p.n), 3), .run = [&plain, p] { plain = run_plain(p); },
                 .verify = [&rt, &plain, p](bool& ok) {
                   std::string text = broadcast(rt.comm(), rt.rank() == 0 ? check(p, plain) : "", 0);
                   ok = text.rfind("ok", 0) == 0;
                   plain.checksum = broadcast(rt.comm(), plain.checksum, 0);
                   return text;
                 },
                 .rank0_only = true, .measured_seconds = [&plain] { return plain.seconds_per_iteration; }};
}

std::int64_t face_neighbour(const ChunkGrid& grid, std::uint64_t id, int axis, int direction) {
  auto ix = grid.index(static_cast<int>(id));
  const std::array<int, 3> dims{grid.di, grid.dj, grid.dk};
  ix[static_cast<std::size_t>(axis)] += direction;
  if (ix[static_cast<std::size_t>(axis)] < 0 || ix[static_cast<std::size_t>(axis)] >= dims[static_cast<std::size_t>(axis)]) return -1;
  return grid.id(ix[0], ix[1], ix[2]);
}

CommGraph stencil_graph(const Problem& p, const ChunkGrid& grid) {
  // A face across axis a holds the cells of the other two axes (even split,
  // as the blocks are cut).
  const std::array<std::uint64_t, 3> side{static_cast<std::uint64_t>(p.n / grid.di), static_cast<std::uint64_t>(p.n / grid.dj),
                                          static_cast<std::uint64_t>(p.n / grid.dk)};
  return stencil7_graph(grid, {side[1] * side[2] * sizeof(double), side[0] * side[2] * sizeof(double),
                               side[0] * side[1] * sizeof(double)});
}

}  // namespace jacobi

namespace {
std::string grid_name(const ChunkGrid& g) { return g.describe(); }

// Where each rank may run, gathered on every rank.
std::vector<RankCores> rank_cores(Runtime& rt) {
  RankCores mine{rt.node().index, 0};
  for (int c : rt.topology().bound_cores) mine.cores |= std::uint64_t{1} << (c & 63);
  return all_gather(rt.comm(), mine);
}
std::string describe_binding(const std::vector<RankCores>& ranks) {
  std::string text;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    std::vector<int> cores;
    for (int c = 0; c < 64; ++c)
      if (ranks[r].cores >> c & 1) cores.push_back(c);
    text += (r ? ", " : "") + std::string("rank ") + std::to_string(r) + " on core" + (cores.size() > 1 ? "s " : " ") +
            format_index_list(cores);
  }
  return text;
}
// The bounds of the imbalanced run from its measured chunk loads: without
// balancing (the initial placement) and with a perfect one (every rank the
// average load, no chunk split).
std::pair<double, double> balance_bounds(const jacobi::Outcome& none, const std::vector<RankCores>& ranks) {
  const int p = static_cast<int>(ranks.size());
  auto loads = rank_loads(none.chunk_loads, none.placement_before, p);
  double total = 0, heaviest = 0;
  for (double l : none.chunk_loads) total += l, heaviest = std::max(heaviest, l);
  std::vector<double> even(static_cast<std::size_t>(p), total / p);
  return {time_share_bound(loads, ranks), std::max(time_share_bound(even, ranks), heaviest)};
}
nlohmann::json report_json(const std::vector<BalanceReport>& reports) {
  auto all = nlohmann::json::array();
  for (auto& r : reports)
    all.push_back({{"max_over_avg_before", r.average_load > 0 ? r.max_load_before / r.average_load : 0},
                   {"max_over_avg_after", r.average_load > 0 ? r.max_load_after / r.average_load : 0},
                   {"chunks_moved", r.chunks_moved}, {"bytes_moved", r.bytes_moved},
                   {"hop_bytes_before", r.hop_bytes_before}, {"hop_bytes_after", r.hop_bytes_after},
                   {"decide_seconds", r.decide_seconds}, {"migrate_seconds", r.migrate_seconds}});
  return all;
}
}  // namespace

namespace {
std::vector<ChunkGrid> jacobi_grids(const Jacobi3dOptions& o) {
  std::vector<ChunkGrid> grids;
  if (!o.chunks.empty())
    grids.push_back(ChunkGrid::parse(o.chunks));
  else if (o.imbalance)
    grids.push_back(ChunkGrid{4, 4, 4});  // 16 chunks per rank at 4 ranks, 48^3 cells each at the default size
  else
    grids = {ChunkGrid{1, 1, 1}, ChunkGrid{2, 2, 2}, ChunkGrid{4, 4, 4}};
  for (auto& g : grids)
    for (int d : {g.di, g.dj, g.dk})
      if (d > o.n) throw ConfigError("--chunks " + grid_name(g) + ": more chunks than grid points along an axis (--n " + std::to_string(o.n) + ")");
  return grids;
}

// One chunked case: its samples over the repetitions and its last outcome.
struct Case {
  ChunkGrid grid;
  Strategy strategy;
  bool imbalanced;
  std::vector<double> times{}, whole{};
  double cpu_best = 1e300;
  std::vector<double> paired{}, paired_cpu{};  // this run / the plain loop's run just before it
  jacobi::Outcome last{};
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct JacobiRun {
  Runtime& rt;
  const Jacobi3dOptions& o;
  jacobi::Problem problem;
  MappingKind mapping;
  std::shared_ptr<const NetworkTopology> topology;
  HopDistance hops;
  double cells;
  jacobi::Outcome plain{};
  double plain_best = 0, plain_cpu_best = 0;
  std::vector<Case> cases{};

  std::string label(const Case& c) const {
    return (o.imbalance ? std::string(c.imbalanced ? "imbalanced " : "balanced ") : std::string()) + grid_name(c.grid) +
           " lb=" + to_string(c.strategy);
  }

  // The plain loop runs again before every chunked repetition (on rank 0,
  // untimed there): the overhead ratio compares bests sampled in the same
  // stretch of time, so a noisy neighbour on a shared machine hits both.
  // Returns that sample (wall, CPU seconds per iteration) on every rank.
  std::array<double, 2> sample_plain() {
    std::array<double, 2> sample{0, 0};
    if (o.imbalance) return sample;
    if (rt.rank() == 0) {
      auto out = jacobi::run_plain(problem);
      sample = {out.seconds_per_iteration, out.cpu_seconds_per_iteration};
      plain_best = std::min(plain_best, sample[0]);
      plain_cpu_best = std::min(plain_cpu_best, sample[1]);
    }
    broadcast(rt.comm(), sample.data(), 2, 0);
    return sample;
  }

  void make_cases(const std::vector<ChunkGrid>& grids, Strategy lb) {
    if (o.imbalance) {
      for (bool imbalanced : {true, false})
        for (Strategy s : {Strategy::none, Strategy::greedy, Strategy::refine, Strategy::comm})
          cases.push_back({grids[0], s, imbalanced});
    } else {
      for (auto& g : grids) {
        cases.push_back({g, Strategy::none, false});
        if (lb != Strategy::none) cases.push_back({g, lb, false});
      }
    }
  }

  // Repetition rep of case c, its samples recorded.
  void run_case(Case& c, int rep) {
    progress(rt, o.format, "rep " + std::to_string(rep + 1) + ": " + label(c) + " ...");
    auto plain_now = sample_plain();
    jacobi::Problem p = problem;
    p.imbalance = c.imbalanced;
    c.last = jacobi::run_chunked(rt, p, c.grid, map_chunks(mapping, c.grid, *topology),
                                 jacobi::Balancing{.strategy = c.strategy, .hops = hops,
                                                   .print_measurements = o.show_measurements && rep == 0 && !o.format.quiet});
    // The imbalanced runs compare the iterations after the balancing step
    // (what balancing changes); the step itself is reported beside them.
    c.times.push_back(o.imbalance ? c.last.steady_seconds_per_iteration : c.last.seconds_per_iteration);
    c.whole.push_back(c.last.seconds_per_iteration);
    c.cpu_best = std::min(c.cpu_best, c.last.cpu_seconds_per_iteration);
    if (plain_now[0] > 0) {
      c.paired.push_back(c.last.seconds_per_iteration / plain_now[0]);
      c.paired_cpu.push_back(c.last.cpu_seconds_per_iteration / plain_now[1]);
    }
    for (auto& r : c.last.balancing) progress(rt, o.format, "  " + r.to_string());
  }
};

// Projections' evidence: how long the ranks waited, before the balancing
// step and after it (the last repetition); adds the JSON, returns the text.
std::string idle_evidence(const jacobi::Outcome& last, nlohmann::json& values) {
  std::string idle_text;
  for (auto [key, shares] : {std::pair{"idle_share_before_balancing", &last.idle_share_before},
                             {"idle_share_after_balancing", &last.idle_share_after}}) {
    if (shares->empty()) continue;
    double mean = 0, max = 0;
    for (double x : *shares) mean += x, max = std::max(max, x);
    mean /= static_cast<double>(shares->size());
    values[key] = {{"mean", mean}, {"max", max}, {"per_rank", *shares}};
    idle_text += strprintf("%sidle %.1f%% (most idle rank %.1f%%)%s", idle_text.empty() ? "; " : ", ", 100 * mean,
                           100 * max, shares == &last.idle_share_before ? " before balancing" : " after");
  }
  return idle_text;
}

// Case c's row (best of its repetitions, verified against the plain loop)
// and its summary line.
void report_case(Report& report, const JacobiRun& x, const Case& c) {
  Result r = rate_result("lb=" + to_string(c.strategy), grid_name(c.grid) + " " + x.o.mapping, timing_of(c.times),
                         x.cells, 1e6, "M cells/s");
  r.group = x.o.imbalance ? (c.imbalanced ? "imbalanced" : "balanced") : "";
  jacobi::Problem p = x.problem;
  p.imbalance = c.imbalanced;
  r.check = jacobi::check(p, c.last, &x.plain);
  r.verified = r.check.rfind("ok", 0) == 0;
  nlohmann::json values{{"lb", to_string(c.strategy)}, {"case", c.imbalanced ? "imbalanced" : "balanced"},
                        {"chunks", grid_name(c.grid)}, {"seconds_per_iteration", r.timing.best},
                        {"verified", r.verified}, {"balancing", report_json(c.last.balancing)}};
  if (x.o.imbalance) values["whole_run_seconds_per_iteration"] = *std::min_element(c.whole.begin(), c.whole.end());
  const std::string idle_text = idle_evidence(c.last, values);
  r.extra = values;
  report.add(r);
  report.add_summary(x.label(c) + ": " + std::to_string(r.timing.best) + " s/iteration" + idle_text, values);
}

// What balancing can gain here, from the chunk loads measured in the
// imbalanced lb=none run and where the ranks may run, and what each balancer gained.
void imbalance_summaries(Report& report, Runtime& rt, const JacobiRun& x) {
  const auto& cases = x.cases;
  const auto ranks = rank_cores(rt);
  auto [bound_none, bound_lb] = balance_bounds(cases[0].last, ranks);
  const double ideal = 1 - bound_lb / bound_none;
  report.add_summary("binding: " + describe_binding(ranks) + "; compute bound per iteration from the measured chunk loads: " +
                         std::to_string(bound_none * 1e3) + " ms without balancing, " + std::to_string(bound_lb * 1e3) +
                         " ms balanced: at most " + std::to_string(ideal * 100) + "% faster",
                     {{"bound_none_seconds", bound_none}, {"bound_balanced_seconds", bound_lb}, {"bound_faster_than_none", ideal}});
  auto best_whole = [](const Case& c) { return *std::min_element(c.whole.begin(), c.whole.end()); };
  for (std::size_t base : {std::size_t{0}, std::size_t{4}})
    for (std::size_t k = base + 1; k < base + 4; ++k) {
      double gain = 1 - timing_of(cases[k].times).best / timing_of(cases[base].times).best;
      std::string text = x.label(cases[k]) + ": " + std::to_string(gain * 100) + "% faster than lb=none after the balancing step";
      nlohmann::json values{{"compare", x.label(cases[k])}, {"faster_than_none", gain}};
      if (base == 0) {
        const double whole = 1 - best_whole(cases[k]) / best_whole(cases[base]);
        text += " (bound " + std::to_string(ideal * 100) + "%: " + std::to_string(ideal > 0 ? gain / ideal * 100 : 0) +
                "% of it); whole run with the step " + std::to_string(whole * 100) + "%";
        values["bound_faster_than_none"] = ideal;
        values["whole_run_faster_than_none"] = whole;
      }
      report.add_summary(text, values);
    }
}

// Wall time is what counts; CPU time (the main thread's) is the same
// comparison blind to the other jobs that share this machine's cores. Best
// against best, and the median of paired ratios (each chunked run against
// the plain run just before it: robust to slow stretches).
void overhead_summaries(Report& report, Runtime& rt, JacobiRun& x) {
  x.plain_best = broadcast(rt.comm(), x.plain_best, 0);
  x.plain_cpu_best = broadcast(rt.comm(), x.plain_cpu_best, 0);
  for (auto& c : x.cases) {
    const double best = timing_of(c.times).best;
    report.add_summary("overhead " + x.label(c) + " vs plain loop: best/best " + std::to_string(best / x.plain_best) +
                           "x wall, " + std::to_string(c.cpu_best / x.plain_cpu_best) + "x CPU; median paired " +
                           std::to_string(median(c.paired)) + "x wall, " + std::to_string(median(c.paired_cpu)) + "x CPU",
                       {{"overhead_of", x.label(c)}, {"overhead", best / x.plain_best},
                        {"cpu_overhead", c.cpu_best / x.plain_cpu_best}, {"paired_overhead", median(c.paired)},
                        {"paired_cpu_overhead", median(c.paired_cpu)}});
  }
}
}  // namespace

bool run_jacobi3d(Runtime& rt, const Jacobi3dOptions& o) {
  auto lb = parse_strategy(o.lb, "--lb");
  const std::vector<ChunkGrid> grids = jacobi_grids(o);
  const MappingKind mapping = parse_mapping(o.mapping);  // a bad --mapping fails before any work
  // The machine's hop distance: the comm strategy's objective.
  std::shared_ptr<const NetworkTopology> topology = make_topology("machine", rt);
  const HopDistance hops = [topology](int a, int b) { return static_cast<double>(topology->hops(a, b)); };
  JacobiRun x{rt, o, jacobi::Problem{o.n, o.iterations, false}, mapping, topology, hops,
              std::pow(static_cast<double>(o.n), 3)};
  Report report(rt, "jacobi3d", {{"n", o.n}, {"iterations", o.iterations}, {"mapping", o.mapping}, {"imbalance", o.imbalance}},
                o.format);
  report.set_baselines({o.imbalance ? "lb=none" : "plain"});
  // The plain loop: the baseline row (and the reference iterate) on rank 0;
  // more samples of it in sample_plain.
  x.plain_best = run_variants(rt, report, {plain_variant(rt, x.problem, x.plain, o.imbalance ? "reference" : "")}, 1e6,
                              "M cells/s").front().timing.best;
  x.plain_cpu_best = x.plain.cpu_seconds_per_iteration;
  // The chunked runs, repetitions interleaved (rep 1 of every case, then rep
  // 2, ...) so that a noisy stretch on a shared machine hits every case alike.
  x.make_cases(grids, lb);
  for (int rep = 0; rep < std::max(1, o.reps); ++rep)
    for (auto& c : x.cases) x.run_case(c, rep);
  for (auto& c : x.cases) report_case(report, x, c);
  if (o.imbalance)
    imbalance_summaries(report, rt, x);
  else
    overhead_summaries(report, rt, x);
  return report.print();
}

}  // namespace tessera::bench
