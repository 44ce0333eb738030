// Names for element types, recorded in shared-array metadata so that another
// process (or language) can check what it attaches to.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace tessera {

struct ElementType {
  std::string name;       // "float64", "int64", … or "bytes24" for opaque structs
  std::size_t size = 0;   // bytes per element
  bool operator==(const ElementType&) const = default;
};

// Specialise to give a user struct a stable name; the default for a struct is
// "bytes<sizeof>", which checks only the size.
template <class T>
struct ElementName {
  static std::string name() { return "bytes" + std::to_string(sizeof(T)); }
};
#define TESSERA_ELEMENT_NAME(T, NAME) \
  template <>                         \
  struct ElementName<T> {             \
    static std::string name() { return NAME; } \
  };
TESSERA_ELEMENT_NAME(std::int8_t, "int8")
TESSERA_ELEMENT_NAME(std::uint8_t, "uint8")
TESSERA_ELEMENT_NAME(std::int16_t, "int16")
TESSERA_ELEMENT_NAME(std::uint16_t, "uint16")
TESSERA_ELEMENT_NAME(std::int32_t, "int32")
TESSERA_ELEMENT_NAME(std::uint32_t, "uint32")
TESSERA_ELEMENT_NAME(std::int64_t, "int64")
TESSERA_ELEMENT_NAME(std::uint64_t, "uint64")
TESSERA_ELEMENT_NAME(float, "float32")
TESSERA_ELEMENT_NAME(double, "float64")
#undef TESSERA_ELEMENT_NAME

template <class T>
ElementType element_type_of() {
  static_assert(std::is_trivially_copyable_v<T>, "Tessera arrays hold trivially copyable types only");
  return ElementType{ElementName<T>::name(), sizeof(T)};
}

// The element size a known name implies: int8..uint64, float32/64, bytesN;
// 0 for other (user-defined) names, which only the size can check.
std::size_t implied_element_size(const std::string& name);

// Rejects names that are empty, too long, or not [A-Za-z0-9_]; throws ConfigError.
void validate_element_name(const std::string& name);

}  // namespace tessera
