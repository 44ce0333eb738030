// Checkpoint levels: one numbering for the options, the directories, the
// manifests and the supervisor's reports.
#pragma once
#include <string>

namespace tessera::resilience {

// A checkpoint level, numbered as docs/checkpoint.md, the manifests and the
// reports number them (the number is the value): buddy 1, node 2, disk 3.
// `unknown` only describes a checkpoint whose manifest cannot be read.
enum class Level : int { unknown = 0, buddy = 1, node = 2, disk = 3 };
constexpr int level_number(Level l) noexcept { return static_cast<int>(l); }
// The level whose directory holds `l`'s files: buddy copies live in the
// node level's directory beside the node files.
constexpr Level directory_level(Level l) noexcept { return l == Level::buddy ? Level::node : l; }

// A set of levels (what a Checkpoint writes): `Level::node | Level::disk`.
class Levels {
 public:
  constexpr Levels() noexcept = default;
  constexpr Levels(Level l) noexcept : bits_(bit(l)) {}  // NOLINT: a level is a set of one
  constexpr bool has(Level l) const noexcept { return (bits_ & bit(l)) != 0; }
  constexpr bool empty() const noexcept { return bits_ == 0; }
  friend constexpr Levels operator|(Levels a, Levels b) noexcept {
    Levels s;
    s.bits_ = a.bits_ | b.bits_;
    return s;
  }
  friend constexpr bool operator==(Levels, Levels) noexcept = default;

 private:
  static constexpr unsigned bit(Level l) noexcept { return l == Level::unknown ? 0u : 1u << level_number(l); }
  unsigned bits_ = 0;
};
constexpr Levels operator|(Level a, Level b) noexcept { return Levels(a) | Levels(b); }
constexpr bool has_level(Levels set, Level l) noexcept { return set.has(l); }
// "node,disk" -> the levels; ConfigError naming the bad part, prefixed
// with `what` (the option that gave the text, e.g. "--levels").
Levels parse_levels(const std::string& text, const std::string& what);

}  // namespace tessera::resilience
