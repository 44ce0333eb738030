#include "tessera/storage/element_type.hpp"

#include <cctype>

#include "tessera/runtime/error.hpp"

namespace tessera {

std::size_t implied_element_size(const std::string& name) {
  static const struct {
    const char* name;
    std::size_t size;
  } known[] = {{"int8", 1},  {"uint8", 1},  {"int16", 2}, {"uint16", 2},  {"int32", 4},
               {"uint32", 4}, {"int64", 8}, {"uint64", 8}, {"float32", 4}, {"float64", 8}};
  for (const auto& k : known)
    if (name == k.name) return k.size;
  if (name.size() > 5 && name.compare(0, 5, "bytes") == 0) {
    std::size_t n = 0;
    for (std::size_t i = 5; i < name.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(name[i])) || n > (1u << 20)) return 0;
      n = n * 10 + static_cast<std::size_t>(name[i] - '0');
    }
    return n;
  }
  return 0;
}

void validate_element_name(const std::string& name) {
  bool ok = !name.empty() && name.size() < 32;
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok) throw ConfigError("invalid element type name '" + name + "': use 1-31 characters of [A-Za-z0-9_]");
}

}  // namespace tessera
