#include "tessera/bench/report.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/trace.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::bench {

double time_once(Runtime& rt, const std::function<void()>& run) {
  // Barrier to barrier: with fewer cores than ranks, ranks may not run at the
  // same time, and only the wall time of the whole step is honest.
  barrier(rt.comm());
  double t0 = MPI_Wtime();
  run();
  barrier(rt.comm());
  return all_reduce(rt.comm(), MPI_Wtime() - t0, MPI_MAX);
}

Result rate_result(std::string variant, std::string storage, Timing timing, double work, double scale,
                   std::string unit) {
  Result r;
  r.variant = std::move(variant);
  r.storage = std::move(storage);
  r.timing = timing;
  r.work = work;
  r.rate = work / timing.best / scale;
  r.unit = std::move(unit);
  return r;
}

namespace {
// One repetition of v, in seconds: rank 0 alone (the others wait for its
// time in one yielding collective), the time the variant measured itself
// (slowest rank), or the wall time from a barrier to a barrier.
// A variant's name in a trace: "VARIANT (STORAGE)", its preparation "prepare: ...".
const char* traced_name(const Variant& v, const char* prefix = "") {
  if (!trace::recording()) return nullptr;
  return trace::intern(prefix + v.variant + (v.storage.empty() ? "" : " (" + v.storage + ")"));
}

// This rank's time waiting (collectives, barriers, flushes) during one
// timed repetition, and the repetition's time here: the row's idle share.
struct RepetitionIdle {
  double idle = 0, wall = 0;
};

double time_repetition(Runtime& rt, const Variant& v, RepetitionIdle& idle) {
  trace::Span traced(trace::Category::phase, traced_name(v));
  idle = {};
  if (v.rank0_only) {
    double t = 0;
    if (rt.rank() == 0) {
      if (v.prepare) v.prepare();
      double t0 = MPI_Wtime();
      v.run();
      t = v.measured_seconds ? v.measured_seconds() : MPI_Wtime() - t0;
    }
    return broadcast(rt.comm(), t, 0);
  }
  if (v.prepare) {
    trace::Span preparing(trace::Category::phase, traced_name(v, "prepare: "));
    v.prepare();
  }
  // Barrier to barrier (see time_once); the closing barrier's wait is the
  // idle time an imbalance costs, so it counts.
  barrier(rt.comm());
  const double t0 = MPI_Wtime(), idle0 = trace::idle_seconds();
  v.run();
  if (!v.measured_seconds) barrier(rt.comm());
  idle = {trace::idle_seconds() - idle0, MPI_Wtime() - t0};
  return all_reduce(rt.comm(), v.measured_seconds ? v.measured_seconds() : idle.wall, MPI_MAX);
}

// The row's "idle" field: every rank's share of its last repetition spent
// waiting (none for a one-process baseline). Collective.
nlohmann::json idle_json(Runtime& rt, const RepetitionIdle& mine) {
  const std::vector<double> idle = all_gather(rt.comm(), mine.idle), wall = all_gather(rt.comm(), mine.wall);
  if (wall[0] <= 0) return nullptr;
  std::vector<double> share(idle.size());
  double sum = 0, max = 0;
  for (std::size_t r = 0; r < idle.size(); ++r) {
    share[r] = wall[r] > 0 ? idle[r] / wall[r] : 0;
    sum += share[r];
    max = std::max(max, share[r]);
  }
  return {{"share_mean", sum / static_cast<double>(share.size())}, {"share_max", max}, {"share_per_rank", share},
          {"seconds_per_rank", idle}};
}

}  // namespace

Timing timing_of(std::vector<double> samples) {
  Timing t;
  t.samples = samples;
  std::sort(samples.begin(), samples.end());
  t.best = samples.front();
  t.median = samples[samples.size() / 2];
  t.reps = static_cast<int>(samples.size());
  return t;
}

std::string strprintf(const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string text(static_cast<std::size_t>(std::max(0, n)), '\0');
  std::vsnprintf(text.data(), text.size() + 1, format, again);
  va_end(again);
  return text;
}

Timing time_reps(Runtime& rt, int reps, const std::function<void()>& prepare, const std::function<void()>& run) {
  const Variant v{.prepare = prepare, .run = run};
  std::vector<double> samples;
  RepetitionIdle idle;
  for (int r = 0; r < std::max(1, reps); ++r) samples.push_back(time_repetition(rt, v, idle));
  return timing_of(std::move(samples));
}

std::vector<Result> run_variants(Runtime& rt, Report& report, const std::vector<Variant>& variants, double scale,
                                 const std::string& unit, RunOrder order) {
  std::vector<std::vector<double>> samples(variants.size());
  std::vector<RepetitionIdle> idle(variants.size());  // each variant's last repetition
  if (order == RunOrder::interleaved) {
    // Round r runs repetition r of every variant that has one, so a drift of
    // the machine's speed falls on every variant alike. Always in the same
    // order: reversing every other round would run the last variant twice in
    // a row, and a run right after itself finds its data warm (measured:
    // label propagation ran faster so).
    int rounds = 0;
    for (const auto& v : variants) rounds = std::max(rounds, std::max(1, v.reps));
    for (int r = 0; r < rounds; ++r)
      for (std::size_t k = 0; k < variants.size(); ++k)
        if (variants[k].skipped.empty() && r < std::max(1, variants[k].reps))
          samples[k].push_back(time_repetition(rt, variants[k], idle[k]));
  }
  std::vector<Result> rows;
  for (std::size_t k = 0; k < variants.size(); ++k) {
    const Variant& v = variants[k];
    if (!v.skipped.empty()) {
      Result r;
      r.group = v.group;
      r.variant = v.variant;
      r.storage = v.storage;
      r.unit = unit;
      r.skipped = v.skipped;
      r.check = "skipped";
      rows.push_back(r);
      report.add(std::move(r));
      continue;
    }
    if (order == RunOrder::one_after_another)
      for (int r = 0; r < std::max(1, v.reps); ++r) samples[k].push_back(time_repetition(rt, v, idle[k]));
    Result r = rate_result(v.variant, v.storage, timing_of(std::move(samples[k])), v.work, scale, unit);
    r.group = v.group;
    {
      trace::Span verifying(trace::Category::phase, traced_name(v, "verify: "));
      r.check = v.verify(r.verified);
    }
    if (v.details) r.extra = v.details();
    if (nlohmann::json i = idle_json(rt, idle[k]); !i.is_null()) r.extra["idle"] = std::move(i);
    rows.push_back(r);
    report.add(std::move(r));
  }
  return rows;
}

double median_paired_ratio(const Timing& a, const Timing& b) {
  std::vector<double> ratios;
  for (std::size_t r = 0; r < std::min(a.samples.size(), b.samples.size()); ++r) ratios.push_back(a.samples[r] / b.samples[r]);
  if (ratios.empty()) return a.best / b.best;
  std::sort(ratios.begin(), ratios.end());
  const std::size_t m = ratios.size() / 2;
  return ratios.size() % 2 ? ratios[m] : (ratios[m - 1] + ratios[m]) / 2;
}

void progress(Runtime& rt, const ReportFormat& format, const std::string& text) {
  if (rt.rank() == 0 && !format.quiet) std::fprintf(stderr, "%s\n", text.c_str());
}

Report::Report(Runtime& rt, std::string bench, nlohmann::json config, ReportFormat format)
    : rt_(rt), bench_(std::move(bench)), config_(std::move(config)), format_(format) {}

void Report::add(Result r) {
  // Grouped: after the last row of its group, so a benchmark may run the
  // baselines of every group first and still print each group together.
  auto after = std::find_if(rows_.rbegin(), rows_.rend(), [&](const Result& x) { return x.group == r.group; });
  rows_.insert(after == rows_.rend() ? rows_.end() : after.base(), std::move(r));
}

void Report::add_extra(const Result& row, const nlohmann::json& fields) {
  for (auto& r : rows_)
    if (r.group == row.group && r.variant == row.variant && r.storage == row.storage) r.extra.update(fields);
}

void Report::add_summary(std::string text, nlohmann::json values) {
  summaries_.emplace_back(std::move(text), std::move(values));
}

const Result* Report::find(const std::string& prefix, const std::string& group) const {
  for (const auto& r : rows_)
    if (r.skipped.empty() && r.group == group && (r.variant + " " + r.storage).rfind(prefix, 0) == 0) return &r;
  return nullptr;
}

std::string run_context(Runtime& rt) {
  const auto& t = rt.topology();
  return std::to_string(rt.size()) + " ranks on " + std::to_string(rt.node().count) + " node(s), " +
         std::to_string(t.cores) + " cores per node" + (rt.node().size > t.cores ? " (oversubscribed)" : "");
}

bool Report::print() const {
  bool ok = std::all_of(rows_.begin(), rows_.end(), [](const Result& r) { return r.verified || !r.skipped.empty(); });
  if (rt_.rank() != 0) return ok;
  if (format_.json)
    print_json();
  else
    print_table();
  std::fflush(stdout);
  return ok;
}

void Report::print_table() const {
  std::printf("\n== %s == %s\n", bench_.c_str(), run_context(rt_).c_str());
  std::printf("%-8s %-30s %-16s %10s %12s %-10s", "", "variant", "storage", "best s", "rate", "unit");
  for (const auto& b : baselines_) std::printf(" %14s", ("x " + b.substr(0, 12)).c_str());
  std::printf("  verified\n");
  for (const auto& r : rows_) {
    if (!r.skipped.empty()) {
      std::printf("%-8s %-30s %-16s skipped: %s\n", r.group.c_str(), r.variant.c_str(), r.storage.c_str(),
                  r.skipped.c_str());
      continue;
    }
    std::printf("%-8s %-30s %-16s %10.4f %12.4g %-10s", r.group.c_str(), r.variant.c_str(), r.storage.c_str(), r.timing.best, r.rate,
                r.unit.c_str());
    for (const auto& b : baselines_) {
      const Result* base = find(b, r.group);
      if (base && base->rate > 0)
        std::printf(" %14.2f", r.rate / base->rate);
      else
        std::printf(" %14s", "-");
    }
    std::printf("  %s\n", r.verified ? "yes" : ("NO: " + r.check).c_str());
  }
  for (const auto& [text, values] : summaries_) std::printf("%s\n", text.c_str());
}

void Report::print_json() const {
  for (const auto& r : rows_) {
    nlohmann::json ratios = nlohmann::json::object();
    for (const auto& b : baselines_)
      if (const Result* base = find(b, r.group); r.skipped.empty() && base && base->rate > 0) ratios[b] = r.rate / base->rate;
    nlohmann::json j{{"bench", bench_},          {"group", r.group}, {"variant", r.variant},         {"storage", r.storage},
                     {"ranks", rt_.size()},      {"seconds", r.timing.best},     {"median_seconds", r.timing.median},
                     {"reps", r.timing.reps},    {"work", r.work},               {"rate", r.rate},
                     {"unit", r.unit},           {"verified", r.verified},       {"check", r.check},
                     {"ratios", ratios},         {"config", config_},            {"extra", r.extra}};
    if (!r.skipped.empty()) j["skipped"] = r.skipped;
    std::printf("%s\n", j.dump().c_str());
  }
  for (const auto& [text, values] : summaries_) {
    nlohmann::json j{{"bench", bench_}, {"summary", text}, {"ranks", rt_.size()}};
    j.update(values);
    std::printf("%s\n", j.dump().c_str());
  }
}

}  // namespace tessera::bench
