#include "tessera/runtime/comm_counters.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera {

namespace {

// One rank's sums, the same-node and other-node parts apart: what the table
// and the JSON's sums are made of.
struct Sums {
  TrafficCount sent[2], received[2];  // [0] same node, [1] other nodes
  std::uint64_t direct_reads = 0, direct_writes = 0, gets = 0, puts = 0, accumulates = 0;
};

Sums sums_of(const Runtime& rt) {
  const CommCounters& c = rt.comm_counters();
  Sums s;
  for (std::size_t p = 0; p < c.to().size(); ++p) {
    const int where = rt.is_colocal(static_cast<int>(p)) ? 0 : 1;
    for (auto [total, part] : {std::pair{&s.sent[where], &c.to()[p]}, {&s.received[where], &c.from()[p]}}) {
      total->records += part->records;
      total->batches += part->batches;
      total->bytes += part->bytes;
    }
  }
  s.direct_reads = c.direct_reads();
  s.direct_writes = c.direct_writes();
  s.gets = c.one_sided_gets();
  s.puts = c.one_sided_puts();
  s.accumulates = c.one_sided_accumulates();
  return s;
}

std::string count_json(const TrafficCount& t) {
  return "{\"records\":" + std::to_string(t.records) + ",\"batches\":" + std::to_string(t.batches) +
         ",\"bytes\":" + std::to_string(t.bytes) + "}";
}

std::string side_json(const TrafficCount& sent, const TrafficCount& received) {
  return "{\"records_sent\":" + std::to_string(sent.records) + ",\"batches_sent\":" + std::to_string(sent.batches) +
         ",\"bytes_sent\":" + std::to_string(sent.bytes) + ",\"records_received\":" +
         std::to_string(received.records) + ",\"batches_received\":" + std::to_string(received.batches) +
         ",\"bytes_received\":" + std::to_string(received.bytes) + "}";
}

std::string escaped(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

std::string human_bytes(std::uint64_t bytes) {
  char text[32];
  const double b = static_cast<double>(bytes);
  if (b < 1024) std::snprintf(text, sizeof(text), "%llu B", static_cast<unsigned long long>(bytes));
  else if (b < 1024.0 * 1024) std::snprintf(text, sizeof(text), "%.1f KiB", b / 1024);
  else if (b < 1024.0 * 1024 * 1024) std::snprintf(text, sizeof(text), "%.1f MiB", b / (1024.0 * 1024));
  else std::snprintf(text, sizeof(text), "%.2f GiB", b / (1024.0 * 1024 * 1024));
  return text;
}

}  // namespace

void CommCounters::clear() {
  const int ranks = static_cast<int>(to_.size());
  *this = CommCounters{};
  resize(ranks);
}

std::string comm_counters_json(const Runtime& rt) {
  const CommCounters& c = rt.comm_counters();
  const Sums s = sums_of(rt);
  std::string out = "{\"rank\":" + std::to_string(rt.rank()) + ",\"host\":" + escaped(rt.node().hostname) +
                    ",\"node\":" + std::to_string(rt.node().index) + ",\"to\":[";
  for (std::size_t p = 0; p < c.to().size(); ++p) out += (p ? "," : "") + count_json(c.to()[p]);
  out += "],\"from\":[";
  for (std::size_t p = 0; p < c.from().size(); ++p) out += (p ? "," : "") + count_json(c.from()[p]);
  out += "],\"same_node\":" + side_json(s.sent[0], s.received[0]);
  out += ",\"other_node\":" + side_json(s.sent[1], s.received[1]);
  out += ",\"direct\":{\"reads\":" + std::to_string(s.direct_reads) + ",\"writes\":" + std::to_string(s.direct_writes) +
         "}";
  out += ",\"one_sided\":{\"gets\":" + std::to_string(s.gets) + ",\"puts\":" + std::to_string(s.puts) +
         ",\"accumulates\":" + std::to_string(s.accumulates) + "}}";
  return out;
}

std::string gather_comm_counters_json(Runtime& rt) {
  const std::string mine = (rt.rank() == 0 ? "" : ",") + comm_counters_json(rt);
  const std::vector<char> all = gather_to_root<char>(rt.comm(), std::span<const char>(mine.data(), mine.size()));
  if (rt.rank() != 0) return "";
  return "[" + std::string(all.data(), all.size()) + "]";
}

std::string comm_counters_table(Runtime& rt) {
  struct Row {
    std::uint64_t v[17];
  } row{};
  const Sums s = sums_of(rt);
  std::size_t k = 0;
  for (int where = 0; where < 2; ++where)
    for (const TrafficCount* t : {&s.sent[where], &s.received[where]}) {
      row.v[k++] = t->records;
      row.v[k++] = t->batches;
      row.v[k++] = t->bytes;
    }
  row.v[k++] = s.direct_reads;
  row.v[k++] = s.direct_writes;
  row.v[k++] = s.gets;
  row.v[k++] = s.puts;
  row.v[k++] = s.accumulates;
  const std::vector<Row> rows = gather_to_root<Row>(rt.comm(), std::span<const Row>(&row, 1));
  if (rt.rank() != 0) return "";

  std::string out = "communication (aggregation engine; records, batches, bytes):\n";
  char line[512];
  std::snprintf(line, sizeof(line), "%6s  %-36s %-36s %-36s %-36s %-20s %s\n", "rank", "sent, same node",
                "received, same node", "sent, other nodes", "received, other nodes", "direct reads/writes",
                "one-sided get/put/acc");
  out += line;
  auto cell = [](const std::uint64_t* v) {
    char text[80];
    std::snprintf(text, sizeof(text), "%llu, %llu, %s", static_cast<unsigned long long>(v[0]),
                  static_cast<unsigned long long>(v[1]), human_bytes(v[2]).c_str());
    return std::string(text);
  };
  Row total{};
  auto print = [&](const std::string& who, const Row& r) {
    char direct[48], rma[64];
    std::snprintf(direct, sizeof(direct), "%llu/%llu", static_cast<unsigned long long>(r.v[12]),
                  static_cast<unsigned long long>(r.v[13]));
    std::snprintf(rma, sizeof(rma), "%llu/%llu/%llu", static_cast<unsigned long long>(r.v[14]),
                  static_cast<unsigned long long>(r.v[15]), static_cast<unsigned long long>(r.v[16]));
    // Columns: sent and received on this node, then between nodes.
    std::snprintf(line, sizeof(line), "%6s  %-36s %-36s %-36s %-36s %-20s %s\n", who.c_str(), cell(&r.v[0]).c_str(),
                  cell(&r.v[3]).c_str(), cell(&r.v[6]).c_str(), cell(&r.v[9]).c_str(), direct, rma);
    out += line;
  };
  for (std::size_t p = 0; p < rows.size(); ++p) {
    print(std::to_string(p), rows[p]);
    for (int i = 0; i < 17; ++i) total.v[i] += rows[p].v[i];
  }
  if (rows.size() > 1) print("total", total);
  return out;
}

bool comm_stats_requested() {
  const char* v = std::getenv(kCommStatsVariable);
  return v && *v && std::strcmp(v, "0") != 0;
}

}  // namespace tessera
