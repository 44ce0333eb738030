#include "tessera/bench/report.hpp"

#include <algorithm>
#include <cstdio>

#include "tessera/runtime/collective.hpp"
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

Timing time_reps(Runtime& rt, int reps, const std::function<void()>& prepare, const std::function<void()>& run) {
  std::vector<double> times;
  for (int r = 0; r < std::max(1, reps); ++r) {
    if (prepare) prepare();
    times.push_back(time_once(rt, run));
  }
  std::sort(times.begin(), times.end());
  return {times.front(), times[times.size() / 2], static_cast<int>(times.size())};
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
// Rank 0 runs and times the repetitions alone; the others wait for the timing.
Timing time_on_rank0(Runtime& rt, const Variant& v) {
  Timing timing;
  if (rt.rank() == 0) {
    std::vector<double> times;
    for (int r = 0; r < std::max(1, v.reps); ++r) {
      if (v.prepare) v.prepare();
      double t0 = MPI_Wtime();
      v.run();
      times.push_back(v.measured_seconds ? v.measured_seconds() : MPI_Wtime() - t0);
    }
    std::sort(times.begin(), times.end());
    timing = {times.front(), times[times.size() / 2], static_cast<int>(times.size())};
  }
  return broadcast(rt.comm(), timing, 0);
}

// Each repetition reports its own time (the slowest rank's).
Timing time_measured(Runtime& rt, const Variant& v) {
  std::vector<double> times;
  for (int r = 0; r < std::max(1, v.reps); ++r) {
    if (v.prepare) v.prepare();
    barrier(rt.comm());
    v.run();
    times.push_back(all_reduce(rt.comm(), v.measured_seconds(), MPI_MAX));
  }
  std::sort(times.begin(), times.end());
  return {times.front(), times[times.size() / 2], static_cast<int>(times.size())};
}
}  // namespace

std::vector<Result> run_variants(Runtime& rt, Report& report, const std::vector<Variant>& variants, double scale,
                                 const std::string& unit) {
  std::vector<Result> rows;
  for (const auto& v : variants) {
    Timing timing = v.rank0_only         ? time_on_rank0(rt, v)
                    : v.measured_seconds ? time_measured(rt, v)
                                         : time_reps(rt, v.reps, v.prepare, v.run);
    Result r = rate_result(v.variant, v.storage, timing, v.work, scale, unit);
    r.group = v.group;
    r.check = v.verify(r.verified);
    if (v.details) r.extra = v.details();
    rows.push_back(r);
    report.add(std::move(r));
  }
  return rows;
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

void Report::add_summary(std::string text, nlohmann::json values) {
  summaries_.emplace_back(std::move(text), std::move(values));
}

const Result* Report::find(const std::string& prefix, const std::string& group) const {
  for (const auto& r : rows_)
    if (r.group == group && (r.variant + " " + r.storage).rfind(prefix, 0) == 0) return &r;
  return nullptr;
}

std::string run_context(Runtime& rt) {
  const auto& t = rt.topology();
  return std::to_string(rt.size()) + " ranks on " + std::to_string(rt.node().count) + " node(s), " +
         std::to_string(t.cores) + " cores per node" + (rt.node().size > t.cores ? " (oversubscribed)" : "");
}

bool Report::print() const {
  bool ok = std::all_of(rows_.begin(), rows_.end(), [](const Result& r) { return r.verified; });
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
      if (const Result* base = find(b, r.group); base && base->rate > 0) ratios[b] = r.rate / base->rate;
    nlohmann::json j{{"bench", bench_},          {"group", r.group}, {"variant", r.variant},         {"storage", r.storage},
                     {"ranks", rt_.size()},      {"seconds", r.timing.best},     {"median_seconds", r.timing.median},
                     {"reps", r.timing.reps},    {"work", r.work},               {"rate", r.rate},
                     {"unit", r.unit},           {"verified", r.verified},       {"check", r.check},
                     {"ratios", ratios},         {"config", config_},            {"extra", r.extra}};
    std::printf("%s\n", j.dump().c_str());
  }
  for (const auto& [text, values] : summaries_) {
    nlohmann::json j{{"bench", bench_}, {"summary", text}, {"ranks", rt_.size()}};
    j.update(values);
    std::printf("%s\n", j.dump().c_str());
  }
}

}  // namespace tessera::bench
