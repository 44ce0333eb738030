// The supervisor's public helpers: host lists (mpirun's --host and
// hostfile syntaxes) and the attempt report for people (supervisor.hpp).
#include <algorithm>
#include <fstream>
#include <sstream>

#include "monitor.hpp"
#include "tessera/resilience/supervisor.hpp"
#include "tessera/runtime/child_process.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::resilience {

using supervisor::fixed;

namespace {

// A slot count as both host syntaxes write it: 1 to 6 digits, at least 1.
bool positive_count(const std::string& text) {
  return !text.empty() && text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos &&
         std::stoi(text) >= 1;
}

// A host named twice gets the sum of its slots, in the order first named.
void add_host(std::vector<HostSlots>& hosts, const HostSlots& h) {
  for (auto& e : hosts)
    if (e.host == h.host) {
      e.slots += h.slots;
      return;
    }
  hosts.push_back(h);
}

}  // namespace

std::vector<HostSlots> parse_host_list(const std::string& text) {
  std::vector<HostSlots> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    HostSlots h;
    auto colon = item.rfind(':');
    h.host = item.substr(0, colon);
    if (colon != std::string::npos) {
      std::string n = item.substr(colon + 1);
      if (!positive_count(n))
        throw ConfigError("run: --host '" + item + "': the slot count after ':' must be a positive number");
      h.slots = std::stoi(n);
    }
    if (h.host.empty()) throw ConfigError("run: --host '" + item + "': no host name");
    add_host(out, h);
  }
  if (out.empty()) throw ConfigError("run: --host '" + text + "' names no host");
  return out;
}

std::vector<HostSlots> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("run: cannot read the hostfile " + path);
  std::vector<HostSlots> out;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    line = line.substr(0, line.find('#'));
    auto words = split_words(line);
    if (words.empty()) continue;
    HostSlots h{words[0], 1};
    for (std::size_t i = 1; i < words.size(); ++i) {
      const std::string& w = words[i];
      auto eq = w.find('=');
      std::string key = w.substr(0, eq), value = eq == std::string::npos ? "" : w.substr(eq + 1);
      if (key == "slots" || key == "max_slots" || key == "max-slots") {
        if (!positive_count(value))
          throw ConfigError(path + ":" + std::to_string(number) + ": '" + w + "': expected a positive count");
        if (key == "slots") h.slots = std::stoi(value);
      } else {
        throw ConfigError(path + ":" + std::to_string(number) + ": unknown field '" + w +
                          "' (expected HOST [slots=N] [max_slots=N])");
      }
    }
    add_host(out, h);
  }
  if (out.empty()) throw ConfigError("run: the hostfile " + path + " names no host");
  return out;
}

std::string format_host_list(const std::vector<HostSlots>& hosts) {
  std::string s;
  for (const auto& h : hosts) s += (s.empty() ? "" : ",") + h.host + ":" + std::to_string(h.slots);
  return s;
}


std::string describe(const AttemptReport& a) {
  std::string s = "attempt " + std::to_string(a.attempt);
  if (!a.hosts.empty()) s += " on " + std::to_string(a.ranks) + " ranks (" + a.hosts + ")";
  s += ": ";
  if (a.resumed_step >= 0)
    s += "resumed from step " + std::to_string(a.resumed_step) + " (level " + std::to_string(level_number(a.resumed_level)) + ", " +
         a.resumed_from + ")" + (a.resume_seconds >= 0 ? " in " + fixed(a.resume_seconds) + " s" : "") + "; ";
  else if (a.attempt > 1)
    s += "not resumed from a checkpoint; ";
  s += a.outcome;
  if (!a.lost_host.empty()) s += ": " + a.lost_host + " (" + a.lost_how + ")" + (a.rank >= 0 ? ";" : "");
  if (a.rank >= 0) s += (a.lost_host.empty() ? ": rank " : " rank ") + std::to_string(a.rank);
  if (!a.how.empty()) s += " " + a.how;
  if (a.last_step >= 0 && a.outcome != "finished") s += ", its last completed step " + std::to_string(a.last_step);
  if (a.detection_seconds >= 0)
    s += "; detected in " + std::string(a.detection_is_bound ? "at most " : "") + fixed(a.detection_seconds) + " s" +
         (a.detection_is_bound ? " (since its last heartbeat)" : "");
  if (a.outcome != "finished") {
    s += ", exit code " + std::to_string(a.exit_code) + ", cleaned up in " + fixed(a.cleanup_seconds) + " s";
    if (a.segments_removed) s += " (" + std::to_string(a.segments_removed) + " dead segment file(s) removed)";
  }
  s += "; " + fixed(a.seconds, 2) + " s in all";
  return s;
}

}  // namespace tessera::resilience
