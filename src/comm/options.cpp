#include "tessera/comm/options.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/memory.hpp"

namespace tessera {

std::size_t parse_byte_size(const std::string& text, const std::string& what) {
  return static_cast<std::size_t>(parse_bytes(text, what, std::uint64_t{1} << 30));
}

const char* routing_name(AggregationRouting r) {
  switch (r) {
    case AggregationRouting::direct: return "direct";
    case AggregationRouting::grid: return "grid";
    case AggregationRouting::node_first: return "node-first";
    default: return "unset";
  }
}

// ---- grid routing -------------------------------------------------------

GridRoute GridRoute::of(int ranks) {
  GridRoute g;
  g.columns = std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(std::max(ranks, 1))))));
  while (g.columns * g.columns < ranks) ++g.columns;  // guard sqrt rounding
  while ((g.columns - 1) * (g.columns - 1) >= ranks && g.columns > 1) --g.columns;
  g.rows = (std::max(ranks, 1) + g.columns - 1) / g.columns;
  return g;
}

int GridRoute::next_hop(int ranks, int s, int d) const noexcept {
  if (row(s) == row(d) || column(s) == column(d)) return d;
  int along_row = row(s) * columns + column(d);
  if (along_row < ranks) return along_row;
  return row(d) * columns + column(s);  // s is in the short last row: column first
}

int GridRoute::buffers_of(int ranks, int rank) const {
  // One buffer per row member (first hops, kind "forward") and per column
  // member (kind "final": own records and forwarded ones). Two cases need a
  // second buffer to the same rank, both only when the last row is short:
  // a last-row rank also sends column-first (kind "forward") to its column
  // members; a rank above the last row in a column the last row has is the
  // column-first intermediate and forwards (kind "final") to the row members
  // in columns the last row lacks.
  int last_row_length = ranks - (rows - 1) * columns;
  int r = row(rank), c = column(rank);
  int row_members = r == rows - 1 ? last_row_length : columns;
  int column_members = c < last_row_length ? rows : rows - 1;
  int buffers = (row_members - 1) + (column_members - 1);
  bool short_last_row = rows > 1 && last_row_length < columns;
  if (short_last_row && r == rows - 1) buffers += column_members - 1;
  if (short_last_row && r < rows - 1 && c < last_row_length) buffers += columns - last_row_length;
  return buffers;
}

int GridRoute::max_buffers(int ranks) const {
  int worst = 0;
  // Ranks differ only by: last row or not, column below the last row's length or not.
  for (int rank : {0, columns - 1, (rows - 1) * columns})
    if (rank >= 0 && rank < ranks) worst = std::max(worst, buffers_of(ranks, rank));
  return worst;
}

int GridRoute::forward_buffers_of(int ranks, int rank) const {
  // Every row member is reached by forward batches; a rank of a short last
  // row also sends column first (forward batches) to its column members.
  int last_row_length = ranks - (rows - 1) * columns;
  int r = row(rank), c = column(rank);
  int row_members = r == rows - 1 ? last_row_length : columns;
  int column_members = c < last_row_length ? rows : rows - 1;
  bool short_last_row = rows > 1 && last_row_length < columns;
  return (row_members - 1) + (short_last_row && r == rows - 1 ? column_members - 1 : 0);
}

int GridRoute::batches_of(int ranks, int rank, int per_buffer) const {
  return buffers_of(ranks, rank) * per_buffer + forward_buffers_of(ranks, rank);
}

int GridRoute::max_batches(int ranks, int per_buffer) const {
  int worst = 0;
  for (int rank : {0, columns - 1, (rows - 1) * columns})
    if (rank >= 0 && rank < ranks) worst = std::max(worst, batches_of(ranks, rank, per_buffer));
  return worst;
}

// ---- options ------------------------------------------------------------

AggregationOptions AggregationOptions::resolved() const {
  AggregationOptions o = *this;
  if (o.buffer_bytes == 0) {
    const char* env = std::getenv("TESSERA_AGG_BUFFER_BYTES");
    if (env && std::string(env) == "auto")
      o.buffer_bytes = kAutoBufferBytes;
    else if (env && *env)
      try {
        o.buffer_bytes = parse_byte_size(env, "TESSERA_AGG_BUFFER_BYTES");
      } catch (const ConfigError& e) {
        throw ConfigError(std::string(e.what()) + " (or auto: sized from the rank count and TESSERA_AGG_MEMORY_BUDGET)");
      }
    else
      o.buffer_bytes = kDefaultAggBufferBytes;
  }
  if (o.max_in_flight == 0) {
    const char* env = std::getenv("TESSERA_AGG_IN_FLIGHT");
    o.max_in_flight = kDefaultAggInFlight;
    if (env && *env) {
      char* end = nullptr;
      long v = std::strtol(env, &end, 10);
      if (*end != '\0' || v < 1 || v > 64)
        throw ConfigError(std::string("TESSERA_AGG_IN_FLIGHT must be an integer from 1 to 64; got '") + env + "'");
      o.max_in_flight = static_cast<int>(v);
    }
  }
  if (o.max_in_flight < 1) throw ConfigError("max_in_flight must be at least 1");
  if (o.same_node_direct < 0) {
    const char* env = std::getenv("TESSERA_AGG_SAME_NODE");
    std::string v = env ? env : "1";
    if (v != "0" && v != "1") throw ConfigError("TESSERA_AGG_SAME_NODE must be 0 or 1; got '" + v + "'");
    o.same_node_direct = v == "1";
  }
  if (o.same_node_rings < 0) {
    const char* env = std::getenv("TESSERA_AGG_RINGS");
    std::string v = env && *env ? env : "1";
    if (v != "0" && v != "1") throw ConfigError("TESSERA_AGG_RINGS must be 0 or 1; got '" + v + "'");
    o.same_node_rings = v == "1";
  }
  if (o.routing == AggregationRouting::unset) {
    const char* env = std::getenv("TESSERA_AGG_ROUTING");
    std::string v = env && *env ? env : "direct";
    if (v == "direct")
      o.routing = AggregationRouting::direct;
    else if (v == "grid")
      o.routing = AggregationRouting::grid;
    else if (v == "node-first")
      o.routing = AggregationRouting::node_first;
    else
      throw ConfigError("TESSERA_AGG_ROUTING must be direct, grid or node-first; got '" + v + "'");
  }
  if (o.memory_budget == 0) {
    const char* env = std::getenv("TESSERA_AGG_MEMORY_BUDGET");
    o.memory_budget = env && *env ? parse_byte_size(env, "TESSERA_AGG_MEMORY_BUDGET") : kDefaultAggMemoryBudget;
  }
  return o;
}

std::size_t AggregationOptions::destinations(int ranks) const {
  auto r = resolved();
  if (r.routing == AggregationRouting::grid) return static_cast<std::size_t>(GridRoute::of(ranks).max_buffers(ranks));
  return static_cast<std::size_t>(ranks);
}

std::size_t AggregationOptions::buffer_bytes_for(int ranks, std::size_t record_bytes, std::size_t reply_bytes) const {
  auto r = resolved();
  if (r.buffer_bytes != kAutoBufferBytes) return r.buffer_bytes;
  // Every request batch may have its reply held at once (a reply buffer, or
  // the reply ring slot beside its request ring slot).
  const std::size_t record = std::max<std::size_t>(record_bytes, 1);
  const std::size_t share = static_cast<std::size_t>(
      static_cast<double>(r.memory_budget) * static_cast<double>(record) / static_cast<double>(record + reply_bytes));
  return agg_autotune::pick(r.send_batches(ranks), share);
}

std::size_t AggregationOptions::send_batches(int ranks) const {
  auto r = resolved();
  if (r.routing == AggregationRouting::grid)
    return static_cast<std::size_t>(GridRoute::of(ranks).max_batches(ranks, 1 + r.max_in_flight));
  return r.destinations(ranks) * static_cast<std::size_t>(1 + r.max_in_flight);
}

std::size_t AggregationOptions::send_memory_bytes(int ranks) const {
  return send_batches(ranks) * buffer_bytes_for(ranks);
}

std::size_t AggregationOptions::buffer_memory_bytes(int ranks) const {
  // Receive side (RecordExchange): up to 8 request buffers, with grid routing
  // up to 8 more for batches that are forwarded.
  auto r = resolved();
  std::size_t slots = static_cast<std::size_t>(std::min(std::max(ranks - 1, 0), 8));
  if (r.routing != AggregationRouting::direct) slots *= 2;
  return send_memory_bytes(ranks) + slots * r.buffer_bytes_for(ranks);
}

std::string AggregationOptions::describe(int ranks) const {
  auto r = resolved();
  std::size_t bytes = r.buffer_bytes_for(ranks);
  std::string size = r.buffer_bytes == kAutoBufferBytes ? "auto " + std::to_string(bytes) : std::to_string(bytes);
  const bool grid = r.routing == AggregationRouting::grid;
  std::string batches = grid ? std::to_string(r.send_batches(ranks)) + " batches (" +
                                   std::to_string(r.destinations(ranks)) + " buffers x " +
                                   std::to_string(1 + r.max_in_flight) + ", forward ones +1)"
                             : std::to_string(r.destinations(ranks)) + " x " + std::to_string(1 + r.max_in_flight);
  std::string text = size + " B/destination, " + std::to_string(r.max_in_flight) + " in flight, send memory " +
                     batches + " x " + std::to_string(bytes) + " = " + std::to_string(send_memory_bytes(ranks)) +
                     " B per aggregator per rank, same-node direct " + (r.same_node_direct ? "on" : "off") +
                     ", same-node rings " + (r.same_node_rings && r.routing == AggregationRouting::direct ? "on" : "off");
  if (r.routing == AggregationRouting::grid) text += ", grid routing";
  if (r.routing == AggregationRouting::node_first) text += ", node-first routing";
  return text;
}

// ---- auto buffer size ---------------------------------------------------

namespace agg_autotune {
namespace {
std::size_t g_tuned = kDefaultAggBufferBytes;

std::size_t floor_pow2(std::size_t v) { return v == 0 ? 0 : std::bit_floor(v); }
}  // namespace

std::size_t pick(std::size_t batches, std::size_t budget) {
  std::size_t share = budget / std::max<std::size_t>(batches, 1);
  std::size_t cap = std::clamp(floor_pow2(share), kAutoMinBufferBytes, kAutoMaxBufferBytes);
  return std::min(g_tuned, cap);
}

std::size_t tuned() { return g_tuned; }
void set_tuned(std::size_t bytes) { g_tuned = std::clamp(floor_pow2(bytes), kAutoMinBufferBytes, kAutoMaxBufferBytes); }

std::size_t suggest(std::size_t bytes, std::uint64_t batches, double seconds_per_batch) {
  // A batch costs one message: microseconds of MPI work on both sides, far
  // more when ranks share cores and a wait costs a context switch. Buffers
  // that fill in less than kFastFill spend a noticeable share of the time on
  // that: grow them towards kTargetFill (at most 8x per round). Buffers that
  // take longer than kSlowFill only add latency (a get waits for its batch)
  // and memory: halve them. Too few batches to judge: keep the size.
  constexpr double kFastFill = 1e-3, kTargetFill = 2e-3, kSlowFill = 50e-3;
  if (batches < 4 || seconds_per_batch <= 0) return bytes;
  if (seconds_per_batch < kFastFill) {
    double factor = std::min(8.0, kTargetFill / seconds_per_batch);
    return std::min(std::bit_ceil(static_cast<std::size_t>(static_cast<double>(bytes) * factor)), kAutoMaxBufferBytes);
  }
  if (seconds_per_batch > kSlowFill) return std::max(bytes / 2, kAutoMinBufferBytes);
  return bytes;
}

namespace {
// The hill climb's memory: the rates measured at each power-of-two size and
// the size it has settled on. A size's score is the mean of its undisturbed
// rounds: a round far slower than the best one at the same size saw another
// process take the core and says nothing about the size.
constexpr int kMinLog2 = std::countr_zero(kAutoMinBufferBytes), kMaxLog2 = std::countr_zero(kAutoMaxBufferBytes);
constexpr int kClimbSizes = kMaxLog2 - kMinLog2 + 1;
constexpr int kKeptSamples = 16;  // per size, the latest
// Rounds slower than this fraction of the best round at their size were
// disturbed and are left out of its score.
constexpr double kDisturbed = 0.7;
// A neighbour is measured again (up to kConfirmSamples times) while one
// round cannot tell: its score within kCloseBand below the settled size's to
// kClimbMargin above it, or so low that its rounds were probably disturbed.
constexpr double kCloseBand = 0.1;
constexpr int kConfirmSamples = 3;
// Once the settled size has this many rounds its neighbours have had their
// chance: no more exploring, the choice stays.
constexpr int kSettledRounds = 2 * kConfirmSamples;

struct SizeRates {
  double rate[kKeptSamples] = {};
  int samples = 0;  // ever measured
  void add(double r) { rate[samples++ % kKeptSamples] = r; }
  double score() const {
    int n = std::min(samples, kKeptSamples);
    if (n == 0) return 0;
    double best = *std::max_element(rate, rate + n), sum = 0;
    int kept = 0;
    for (int k = 0; k < n; ++k)
      if (rate[k] >= kDisturbed * best) {
        sum += rate[k];
        ++kept;
      }
    return sum / kept;
  }
};
SizeRates g_rates[kClimbSizes];
int g_settled = -1;

int size_index(std::size_t bytes) {
  return std::countr_zero(std::clamp(floor_pow2(bytes), kAutoMinBufferBytes, kAutoMaxBufferBytes)) - kMinLog2;
}
std::size_t size_of(int index) { return std::size_t{1} << (index + kMinLog2); }
}  // namespace

std::size_t climb(std::size_t bytes, std::uint64_t batches, double seconds_per_batch, double records_per_second) {
  const int at = size_index(bytes);
  g_rates[at].add(records_per_second);
  // Another size replaces the settled one only when it is clearly faster:
  // noise alone must not walk the choice away from the best size. The
  // settled size's own rounds move its score too, so its neighbours compete
  // again after each of them.
  if (g_settled < 0) g_settled = at;
  const bool exploring = g_rates[g_settled].samples < kSettledRounds;
  for (int candidate : {at, g_settled - 1, g_settled + 1})
    if (candidate >= 0 && candidate < kClimbSizes && g_rates[candidate].samples > 0 && (exploring || candidate == at) &&
        g_rates[candidate].score() > g_rates[g_settled].score() * (1 + kClimbMargin))
      g_settled = candidate;
  // A neighbour of the settled size is measured if it never was, or again
  // while its rounds are inconclusive; the settled size is re-measured first
  // whenever it has fewer rounds than the neighbour it is compared with.
  const double settled_score = g_rates[g_settled].score();
  auto needs_measuring = [&](int n) {
    if (n < 0 || n >= kClimbSizes || g_rates[g_settled].samples >= kSettledRounds) return false;
    const SizeRates& r = g_rates[n];
    if (r.samples == 0) return true;
    double ratio = r.score() / settled_score;
    bool inconclusive = ratio < kDisturbed || (ratio >= 1 - kCloseBand && ratio <= 1 + kClimbMargin);
    return inconclusive && r.samples < kConfirmSamples;
  };
  // The one just measured first, then the way the fill time points
  // (fast-filling buffers: larger first).
  const bool larger_first = suggest(bytes, batches, seconds_per_batch) >= bytes;
  for (int next : {at, g_settled + (larger_first ? 1 : -1), g_settled + (larger_first ? -1 : 1)})
    if (std::abs(next - g_settled) == 1 && needs_measuring(next)) {
      bool settled_first = g_rates[next].samples > 0 && g_rates[g_settled].samples <= g_rates[next].samples;
      return size_of(settled_first ? g_settled : next);
    }
  return size_of(g_settled);
}

void reset() {
  g_tuned = kDefaultAggBufferBytes;
  std::fill(std::begin(g_rates), std::end(g_rates), SizeRates{});
  g_settled = -1;
}
}  // namespace agg_autotune

}  // namespace tessera
