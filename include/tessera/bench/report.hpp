// What every benchmark shares: best-of-N timing across ranks, and a report
// printed by rank 0 as a human table plus one JSON line per result, each with
// its ratio to the baselines measured in the same run.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tessera/runtime/runtime.hpp"

namespace tessera::bench {

// Where a report goes: the human table on stdout (default), or with `json`
// only JSON lines on stdout; `quiet` drops the progress notes on stderr.
struct ReportFormat {
  bool json = false;
  bool quiet = false;
};

// A progress note on stderr (rank 0), unless quiet.
void progress(Runtime& rt, const ReportFormat& format, const std::string& text);

// printf into a string: the one-line texts of checks, notes and summaries.
std::string strprintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

struct Timing {
  double best = 0;    // seconds, slowest rank, fastest repetition
  double median = 0;
  int reps = 0;
  std::vector<double> samples{};  // every repetition's seconds, in run order
};

// Best, median and count of samples (seconds, in run order).
Timing timing_of(std::vector<double> samples);

// Wall time of run() from a barrier before to a barrier after (slowest rank).
double time_once(Runtime& rt, const std::function<void()>& run);

// Runs prepare() (untimed) then run() `reps` times; each timed run starts
// after a barrier and ends when the slowest rank finishes.
Timing time_reps(Runtime& rt, int reps, const std::function<void()>& prepare, const std::function<void()>& run);

struct Result {
  std::string group;    // rows compare with baselines of the same group ("triad"), or ""
  std::string variant;  // "aggregated", "fine-grained MPI_Get", ...
  std::string storage;  // "heap", "shared", "shared+direct", or "-"
  Timing timing;
  double work = 0;      // operations or bytes, in `unit` before the rate scale
  double rate = 0;      // work per second, scaled to unit
  std::string unit;     // "M reads/s", "GB/s", "GUPS"
  bool verified = false;
  std::string check;    // what the verification found, one line
  nlohmann::json extra = nlohmann::json::object();
  // Why this row did not run (a baseline needing what the transport lacks),
  // one line; "" for a row that ran. A skipped row has no rate, is not
  // verified, and does not fail the report.
  std::string skipped{};
};

// The row of `rows` with this variant and storage, or null.
inline const Result* find_result(const std::vector<Result>& rows, const std::string& variant, const std::string& storage) {
  for (const auto& r : rows)
    if (r.variant == variant && r.storage == storage) return &r;
  return nullptr;
}

// A row whose rate is work / best time, expressed in units of `scale` per
// second (1e6 for "M reads/s", 1e9 for "GUPS" or "GB/s").
Result rate_result(std::string variant, std::string storage, Timing timing, double work, double scale,
                   std::string unit);

// One variant of a benchmark as data: what it is, how to reset its input
// (untimed), what to time, and how to verify the result (collective; returns
// what the check found and sets ok). Written with designated initializers;
// every member has a default, so a variant names only what it uses.
struct Variant {
  std::string group{};   // rows compare with baselines of the same group ("triad"), or ""
  std::string variant{};
  std::string storage{};
  int reps = 1;        // timed repetitions (1 for the slow fine-grained baselines)
  double work = 0;     // operations of one repetition, whole job
  std::function<void()> prepare{};  // untimed, before each repetition; may be empty
  std::function<void()> run{};      // timed from a barrier before to a barrier after
  std::function<std::string(bool& ok)> verify{};  // once, after the last repetition
  // A one-process baseline (a plain loop, a serial union-find): run and timed
  // on rank 0 alone while the other ranks wait in one yielding collective, so
  // they take no core from it and no barrier latency enters its time.
  bool rank0_only = false;
  // When set, a repetition's time is what it measured itself (slowest rank),
  // e.g. seconds per CG iteration, instead of the wall time around run.
  std::function<double()> measured_seconds{};
  // Extra JSON fields of the row (rounds, iterations, memory); after verify.
  std::function<nlohmann::json()> details{};
  // When not "", the variant is not run: its row says this reason instead.
  // Must be the same on every rank.
  std::string skipped{};
};

class Report;
// How run_variants orders the repetitions: all of one variant, then the next
// (each variant's state stays warm), or in rounds, one repetition of every
// variant per round (a drift of the machine's speed falls on all alike; the
// comparisons the benchmark reports are then the median of paired ratios).
enum class RunOrder { one_after_another, interleaved };

// The one runner: times each variant best of its reps, verifies it, and adds
// its row (rate = work / best time / scale, in `unit`); a variant with a
// `skipped` reason gets a row that says so and nothing else. Rows print grouped by
// group, groups in order of first appearance.
// Returns the rows it added, in the order of `variants`.
std::vector<Result> run_variants(Runtime& rt, Report& report, const std::vector<Variant>& variants, double scale,
                                 const std::string& unit, RunOrder order = RunOrder::one_after_another);

// The median over repetitions r of a.samples[r] / b.samples[r]: a's time
// against b's in the same round (run_variants with RunOrder::interleaved).
double median_paired_ratio(const Timing& a, const Timing& b);

class Report {
 public:
  Report(Runtime& rt, std::string bench, nlohmann::json config, ReportFormat format = {});
  // Baselines are named by a prefix of "variant storage"; every row gets its
  // ratio to the first row of its group that each of them names.
  void set_baselines(std::vector<std::string> variants) { baselines_ = std::move(variants); }
  void add(Result r);
  // Merges fields into the extra of the row with row's group, variant and
  // storage: a figure that needs rows measured after it (its fraction of a
  // ceiling, say).
  void add_extra(const Result& row, const nlohmann::json& fields);
  // A derived figure (a ratio of two rows, say) printed after the table: as a
  // line of text, or under --json as one JSON line {"bench", "summary", ...}.
  void add_summary(std::string text, nlohmann::json values);
  // Prints the table or the JSON lines on rank 0; returns true if all verified.
  bool print() const;

 private:
  void print_table() const;
  void print_json() const;
  const Result* find(const std::string& prefix, const std::string& group) const;
  Runtime& rt_;
  std::string bench_;
  nlohmann::json config_;
  ReportFormat format_;
  std::vector<std::string> baselines_;
  std::vector<std::pair<std::string, nlohmann::json>> summaries_;
  std::vector<Result> rows_;
};

// A note about how many ranks and cores this run has, for the header.
std::string run_context(Runtime& rt);

}  // namespace tessera::bench
