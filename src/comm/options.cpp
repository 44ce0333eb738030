#include "tessera/comm/options.hpp"

#include <cstdlib>

#include "tessera/runtime/error.hpp"

namespace tessera {

std::size_t parse_byte_size(const std::string& text, const std::string& what) {
  std::size_t pos = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  std::string suffix = pos ? text.substr(pos) : "";
  unsigned long long scale = 1;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") scale = 1ull << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB") scale = 1ull << 20;
  else if (!suffix.empty()) pos = 0;
  if (pos == 0 || value == 0 || value > (1ull << 30) / scale)
    throw ConfigError(what + " must be a byte count between 1 and 1G such as 65536, 64K or 1M; got '" + text + "'");
  return static_cast<std::size_t>(value * scale);
}

AggregationOptions AggregationOptions::resolved() const {
  AggregationOptions o = *this;
  if (o.buffer_bytes == 0) {
    const char* env = std::getenv("TESSERA_AGG_BUFFER_BYTES");
    o.buffer_bytes = env && *env ? parse_byte_size(env, "TESSERA_AGG_BUFFER_BYTES") : kDefaultAggBufferBytes;
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
  return o;
}

std::size_t AggregationOptions::send_memory_bytes(int ranks) const {
  auto r = resolved();
  return static_cast<std::size_t>(ranks) * r.buffer_bytes * static_cast<std::size_t>(1 + r.max_in_flight);
}

std::string AggregationOptions::describe(int ranks) const {
  auto r = resolved();
  return std::to_string(r.buffer_bytes) + " B/destination, " + std::to_string(r.max_in_flight) +
         " in flight, send memory " + std::to_string(ranks) + " x " + std::to_string(r.buffer_bytes) + " x " +
         std::to_string(1 + r.max_in_flight) + " = " + std::to_string(send_memory_bytes(ranks)) +
         " B per aggregator per rank, same-node direct " + (r.same_node_direct ? "on" : "off");
}

}  // namespace tessera
