// The trace recorder and the communication counters: a real job's file read
// back with a JSON parser (every rank present, events well formed and
// nested, waits where a rank waited), the bounded buffer keeping the newest
// events, and the counters against what an aggregated gather must send.
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tessera/array/dist_array.hpp"
#include "tessera/comm/aggregators.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/comm_counters.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/runtime.hpp"
#include "tessera/runtime/trace.hpp"
#include "tessera/runtime/wait.hpp"
#include "../test_util.hpp"

using namespace tessera;
using nlohmann::json;

namespace {

void sleep_ms(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1'000'000L};
  nanosleep(&ts, nullptr);
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

// The X events of one rank's main thread, in file order.
std::vector<json> complete_events(const json& doc, int pid, int tid = 0) {
  std::vector<json> out;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == pid && e["tid"] == tid) out.push_back(e);
  return out;
}

}  // namespace

TEST(Trace, OffRecordsNothingAndStopWithoutStartSaysSo) {
  auto& rt = Runtime::current();
  ASSERT_FALSE(trace::recording());
  ASSERT_FALSE(trace::active());
  {
    trace::Span s(trace::Category::phase, "nothing");
    s.arg("x", 1).arg("y", 2.5).arg("z", "text");
    EXPECT_FALSE(s.on());
  }
  try {
    trace::stop(rt);
    FAIL() << "stop() without start() returned";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no trace is being recorded"), std::string::npos) << e.what();
  }
}

// Rank 0 works 30 ms before a barrier: every other rank's barrier is a wait
// of about that long, inside its phase; phases nest; the clock section and
// the metadata name every rank.
TEST(Trace, AJobsFileHasEveryRankItsPhasesAndItsWaits) {
  auto& rt = Runtime::current();
  test::ScratchDir dir(rt);
  const std::string path = dir.path() + "/t.json";
  trace::Options o;
  o.path = path;
  o.command = "test \"quoted\" command";
  trace::start(rt, o);
  EXPECT_TRUE(trace::active());
  EXPECT_THROW(trace::start(rt, o), ConfigError);  // only collective errors: every rank throws alike
  {
    trace::Span outer(trace::Category::phase, "outer");
    {
      trace::Span inner(trace::Category::phase, trace::intern("inner " + std::to_string(rt.rank())));
      inner.arg("rank", rt.rank()).arg("share", 0.5).arg("what", "a \\ \"text\"");
      if (rt.rank() == 0) sleep_ms(30);
    }
    barrier(rt.comm());
    trace::RoundClock rounds("test round");
    for (int r = 1; r <= 3; ++r) rounds.done({{"round", r}});
    trace::instant(trace::Category::storage, "allocate", {{"bytes", 4096}}, "storage", "heap");
  }
  EXPECT_EQ(trace::stop(rt), path);
  EXPECT_FALSE(trace::active());
  EXPECT_FALSE(trace::recording());
  if (rt.rank() != 0) return;

  const json doc = read_json(path);
  const json& meta = doc["otherData"]["tessera"];
  EXPECT_EQ(meta["format"], 1);
  EXPECT_EQ(meta["command"], "test \"quoted\" command");
  EXPECT_EQ(meta["ranks"], rt.size());
  ASSERT_EQ(meta["hosts"].size(), static_cast<std::size_t>(rt.size()));
  EXPECT_EQ(meta["hosts"][0], rt.node().hostname);
  ASSERT_EQ(meta["comm_stats"].size(), static_cast<std::size_t>(rt.size()));
  for (int r = 0; r < rt.size(); ++r) {
    EXPECT_EQ(meta["dropped_events"][r], 0);
    EXPECT_LE(meta["start_us"][r].get<double>(), meta["end_us"][r].get<double>());
    EXPECT_EQ(meta["comm_stats"][r]["rank"], r);
  }
  EXPECT_DOUBLE_EQ(meta["clock"]["offset_us"][0].get<double>(), 0.0);
  EXPECT_GE(meta["clock"]["max_skew_us"].get<double>(), 0.0);

  std::set<int> named;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") {
      named.insert(e["pid"].get<int>());
      EXPECT_NE(e["args"]["name"].get<std::string>().find(rt.node().hostname), std::string::npos);
    }
  EXPECT_EQ(named.size(), static_cast<std::size_t>(rt.size()));

  for (int r = 0; r < rt.size(); ++r) {
    const auto events = complete_events(doc, r);
    const json* outer = nullptr;
    const json* inner = nullptr;
    const json* barrier_wait = nullptr;
    int rounds = 0;
    for (const auto& e : events) {
      ASSERT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("cat")) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      if (e["name"] == "outer") outer = &e;
      if (e["name"] == "inner " + std::to_string(r)) inner = &e;
      if (e["name"] == "barrier" && e["cat"] == "wait") barrier_wait = &e;
      if (e["name"] == "test round") {
        ++rounds;
        EXPECT_EQ(e["cat"], "round");
        EXPECT_EQ(e["args"]["round"], rounds);
      }
    }
    ASSERT_TRUE(outer && inner) << "rank " << r;
    EXPECT_EQ(rounds, 3);
    EXPECT_EQ(outer->at("cat"), "phase");
    EXPECT_EQ(inner->at("args")["rank"], r);
    EXPECT_EQ(inner->at("args")["what"], "a \\ \"text\"");
    const double o0 = outer->at("ts"), o1 = o0 + outer->at("dur").get<double>();
    const double i0 = inner->at("ts"), i1 = i0 + inner->at("dur").get<double>();
    EXPECT_LE(o0, i0) << "rank " << r;
    EXPECT_LE(i1, o1) << "rank " << r;
    if (r == 0) {
      EXPECT_GE(i1 - i0, 25'000.0);  // it slept 30 ms
    } else {
      ASSERT_TRUE(barrier_wait) << "rank " << r << " waited for rank 0 without a wait event";
      EXPECT_GE(barrier_wait->at("dur").get<double>(), 10'000.0);
      EXPECT_LE(o0, barrier_wait->at("ts").get<double>());
    }
  }
  bool allocation = false;
  for (const auto& e : doc["traceEvents"])
    allocation = allocation || (e["ph"] == "i" && e["name"] == "allocate" && e["args"]["bytes"] == 4096);
  EXPECT_TRUE(allocation);
}

// A run that outgrows its buffer keeps the newest events and counts the rest.
TEST(Trace, AFullBufferKeepsTheNewestAndCountsTheDropped) {
  auto& rt = Runtime::current();
  test::ScratchDir dir(rt);
  trace::Options o;
  o.path = dir.path() + "/small.json";
  o.buffer_bytes = 100 * sizeof(trace::Event);
  trace::start(rt, o);
  for (int k = 0; k < 1000; ++k) trace::Span(trace::Category::round, "step").arg("k", k);
  trace::stop(rt);
  if (rt.rank() != 0) return;
  const json doc = read_json(o.path);
  for (int r = 0; r < rt.size(); ++r) {
    // Counter samples of the start and the phases take room too: at least
    // 900 dropped, and the last step kept.
    EXPECT_GE(doc["otherData"]["tessera"]["dropped_events"][r].get<std::int64_t>(), 900);
    int newest = -1, kept = 0;
    for (const auto& e : complete_events(doc, r))
      if (e["name"] == "step") newest = std::max(newest, e["args"]["k"].get<int>()), ++kept;
    EXPECT_EQ(newest, 999) << "rank " << r;
    EXPECT_LE(kept, 100);
    EXPECT_GE(kept, 90);
  }
}

// Each rank reads known indices through a SrcAggregator: the counters must
// show exactly the records each owner was asked for, the engine's own
// bytes, and the trace one send event per batch, each arrow ending at a
// receive.
TEST(Trace, CommCountersEqualWhatAGatherImpliesAndTheEnginesOwn) {
  auto& rt = Runtime::current();
  const std::uint64_t n = 10'000;
  DistArray<std::uint64_t> table(rt, n);
  for (std::uint64_t i = 0; i < table.local().size(); ++i) table.local()[i] = table.local_begin() + i;
  test::SplitMix64 random(7 + static_cast<std::uint64_t>(rt.rank()));
  std::vector<std::uint64_t> indices(5000);
  for (auto& i : indices) i = random.below(n);
  std::vector<std::uint64_t> asked(static_cast<std::size_t>(rt.size()), 0);
  for (auto i : indices) ++asked[static_cast<std::size_t>(table.owner(i))];

  test::ScratchDir dir(rt);
  trace::Options o;
  o.path = dir.path() + "/gather.json";
  rt.comm_counters().clear();
  trace::start(rt, o);
  std::vector<std::uint64_t> got(indices.size());
  std::uint64_t engine_bytes = 0, engine_batches = 0, engine_received = 0;
  {
    AggregationOptions options;
    options.buffer_bytes = 512;  // many batches
    SrcAggregator<std::uint64_t> agg(table, options.with_same_node_direct(0));
    for (std::size_t k = 0; k < indices.size(); ++k) agg.get(indices[k], got[k]);
    agg.flush();
    engine_bytes = agg.exchange().stats().bytes_sent;
    engine_batches = agg.exchange().stats().batches_sent;
    engine_received = agg.exchange().stats().batches_received;
  }
  trace::stop(rt);
  for (std::size_t k = 0; k < indices.size(); ++k) ASSERT_EQ(got[k], indices[k]);

  const CommCounters& c = rt.comm_counters();
  std::uint64_t bytes = 0, request_batches = 0;  // every batch sent: requests and replies
  for (int p = 0; p < rt.size(); ++p) {
    const auto pu = static_cast<std::size_t>(p);
    // Requests out, replies back: each index owned by another rank is one
    // record each way; this rank's own go through its self lane.
    if (p == rt.rank()) {
      EXPECT_EQ(c.to()[pu].records, 0u);
      continue;
    }
    bytes += c.to()[pu].bytes;
    request_batches += c.to()[pu].batches;
  }
  // What this rank sent: its requests, and the replies to every other rank's requests.
  std::vector<std::uint64_t> asked_of_me(static_cast<std::size_t>(rt.size()));
  for (int p = 0; p < rt.size(); ++p) {
    std::vector<std::uint64_t> row = all_gather(rt.comm(), asked[static_cast<std::size_t>(p)]);
    if (p == rt.rank()) asked_of_me = row;  // row[q]: what q asked of me
  }
  for (int q = 0; q < rt.size(); ++q) {
    if (q == rt.rank()) continue;
    const auto qu = static_cast<std::size_t>(q);
    EXPECT_EQ(c.to()[qu].records, asked[qu] + asked_of_me[qu]) << "to rank " << q;
    EXPECT_EQ(c.from()[qu].records, asked_of_me[qu] + asked[qu]) << "from rank " << q;
  }
  EXPECT_EQ(bytes, engine_bytes);
  // The engine counts request batches sent and received; every request
  // batch received is answered by one reply batch.
  EXPECT_EQ(request_batches, engine_batches + engine_received);
  EXPECT_EQ(c.direct_reads(), 0u);

  if (rt.rank() != 0) return;
  const json doc = read_json(o.path);
  std::map<std::uint64_t, int> flows;  // id -> +1 start, +2 end
  std::map<std::pair<int, int>, std::uint64_t> sent_batches;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "s") flows[e["id"].get<std::uint64_t>()] += 1;
    if (e["ph"] == "f") flows[e["id"].get<std::uint64_t>()] += 2;
    if (e["ph"] == "X" && e["name"] == "send batch") ++sent_batches[{e["pid"].get<int>(), e["args"]["dst"].get<int>()}];
  }
  for (const auto& [id, both] : flows) EXPECT_EQ(both, 3) << "flow " << id << " lacks an end";
  const json& stats = doc["otherData"]["tessera"]["comm_stats"];
  for (int r = 0; r < rt.size(); ++r)
    for (int p = 0; p < rt.size(); ++p)
      EXPECT_EQ(sent_batches[std::pair(r, p)], stats[r]["to"][p]["batches"].get<std::uint64_t>()) << r << " -> " << p;
}

TEST(Trace, TheBufferVariableIsChecked) {
  setenv(trace::kTraceBufferVariable, "lots", 1);
  try {
    (void)trace::options_from_environment();
    ADD_FAILURE() << "TESSERA_TRACE_BUFFER_MB=lots accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("TESSERA_TRACE_BUFFER_MB=lots"), std::string::npos) << e.what();
  }
  setenv(trace::kTraceBufferVariable, "8", 1);
  EXPECT_EQ(trace::options_from_environment().buffer_bytes, std::size_t{8} << 20);
  unsetenv(trace::kTraceBufferVariable);
}

// A launched analysis job records beside the job's file, never over it.
TEST(Trace, ALaunchedJobsFileIsBesideTheJobs) {
  EXPECT_EQ(trace::companion_path("/tmp/t.json", "analysis"), "/tmp/t.analysis.json");
  EXPECT_EQ(trace::companion_path("run/trace", "analysis"), "run/trace.analysis");
  EXPECT_EQ(trace::companion_path("a.b/trace", "analysis"), "a.b/trace.analysis");
  EXPECT_EQ(trace::companion_path("/tmp/.hidden", "analysis"), "/tmp/.hidden.analysis");
}
