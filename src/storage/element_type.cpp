#include "tessera/storage/element_type.hpp"

#include <cctype>

#include "tessera/runtime/error.hpp"

namespace tessera {

void validate_element_name(const std::string& name) {
  bool ok = !name.empty() && name.size() < 32;
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok) throw ConfigError("invalid element type name '" + name + "': use 1-31 characters of [A-Za-z0-9_]");
}

}  // namespace tessera
