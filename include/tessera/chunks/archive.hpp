// Serialization of chunks for migration (after Charm++'s PUP: one member
// function describes the fields for both directions).
//
// A chunk type either is trivially copyable (copied as bytes), or has
//   template <class Archive> void serialize(Archive& a) { a(n, values, name); }
// whose fields may be trivially copyable values, std::vector / std::string of
// them, nested types with their own serialize, or vectors of those.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/runtime/error.hpp"

namespace tessera::chunks {

class ArchiveWriter;
class ArchiveReader;

template <class T>
concept SelfSerializing = requires(T& t, ArchiveWriter& w, ArchiveReader& r) {
  t.serialize(w);
  t.serialize(r);
};
template <class T>
concept Serializable = SelfSerializing<T> || std::is_trivially_copyable_v<T>;

// Writes fields: appended to a byte buffer, or into memory sized before by
// a writer that only counts (so a checkpoint packs chunks straight into its
// file, with no buffer in between).
class ArchiveWriter {
 public:
  explicit ArchiveWriter(std::vector<std::byte>& out) : out_(&out) {}
  // Into `to`, which must hold what a counting writer counted for the same fields.
  explicit ArchiveWriter(std::byte* to) : to_(to) {}
  // Counts the bytes only.
  static ArchiveWriter counting() { return ArchiveWriter(static_cast<std::byte*>(nullptr)); }
  template <class... Ts>
  void operator()(Ts&... fields) {
    (write(fields), ...);
  }
  // Bytes written (or counted) by this writer.
  std::size_t written() const noexcept { return written_; }

 private:
  void raw(const void* data, std::size_t bytes) {
    written_ += bytes;
    if (out_) {
      auto at = out_->size();
      out_->resize(at + bytes);
      if (bytes) std::memcpy(out_->data() + at, data, bytes);
    } else if (to_) {
      if (bytes) std::memcpy(to_, data, bytes);
      to_ += bytes;
    }
  }
  template <class T>
  void write(T& value) {
    if constexpr (SelfSerializing<T>) {
      value.serialize(*this);
    } else if constexpr (std::is_same_v<T, std::string>) {
      std::uint64_t n = value.size();
      raw(&n, sizeof n);
      raw(value.data(), n);
    } else if constexpr (requires { typename T::value_type; value.data(); value.resize(0); }) {  // std::vector
      using E = typename T::value_type;
      std::uint64_t n = value.size();
      raw(&n, sizeof n);
      if constexpr (std::is_trivially_copyable_v<E> && !SelfSerializing<E>)
        raw(value.data(), n * sizeof(E));
      else
        for (auto& e : value) write(e);
    } else {
      static_assert(std::is_trivially_copyable_v<T>, "a chunk field must be trivially copyable, a vector, a string, "
                                                     "or have a serialize(Archive&) member");
      raw(&value, sizeof(T));
    }
  }
  std::vector<std::byte>* out_ = nullptr;
  std::byte* to_ = nullptr;
  std::size_t written_ = 0;
};

// Reads fields back in the order they were written; throws FormatError when
// the bytes run out (a serialize that differs between the two directions).
class ArchiveReader {
 public:
  ArchiveReader(const std::byte* data, std::size_t bytes) : at_(data), end_(data + bytes) {}
  template <class... Ts>
  void operator()(Ts&... fields) {
    (read(fields), ...);
  }
  bool finished() const noexcept { return at_ == end_; }

 private:
  void raw(void* data, std::size_t bytes) {
    if (static_cast<std::size_t>(end_ - at_) < bytes)
      throw FormatError("chunk archive: a chunk's serialize reads more bytes than it wrote");
    if (bytes) std::memcpy(data, at_, bytes);
    at_ += bytes;
  }
  template <class T>
  void read(T& value) {
    if constexpr (SelfSerializing<T>) {
      value.serialize(*this);
    } else if constexpr (std::is_same_v<T, std::string>) {
      std::uint64_t n = 0;
      raw(&n, sizeof n);
      check_length(n, 1);
      value.resize(n);
      raw(value.data(), n);
    } else if constexpr (requires { typename T::value_type; value.data(); value.resize(0); }) {
      using E = typename T::value_type;
      std::uint64_t n = 0;
      raw(&n, sizeof n);
      check_length(n, std::is_trivially_copyable_v<E> ? sizeof(E) : 1);
      value.resize(n);
      if constexpr (std::is_trivially_copyable_v<E> && !SelfSerializing<E>)
        raw(value.data(), n * sizeof(E));
      else
        for (auto& e : value) read(e);
    } else {
      raw(&value, sizeof(T));
    }
  }
  void check_length(std::uint64_t n, std::size_t element_bytes) const {
    if (n > static_cast<std::uint64_t>(end_ - at_) / element_bytes)
      throw FormatError("chunk archive: a vector length of " + std::to_string(n) + " exceeds the bytes left");
  }
  const std::byte* at_;
  const std::byte* end_;
};

// A chunk's bytes, appended to `out`.
template <Serializable C>
void pack_chunk(C& chunk, std::vector<std::byte>& out) {
  ArchiveWriter w(out);
  w(chunk);
}
// The bytes pack_chunk appends for `chunk`.
template <Serializable C>
std::size_t packed_bytes(C& chunk) {
  auto w = ArchiveWriter::counting();
  w(chunk);
  return w.written();
}
// A chunk's bytes, written at `to` (packed_bytes(chunk) of them).
template <Serializable C>
void pack_chunk_into(C& chunk, std::byte* to) {
  ArchiveWriter w(to);
  w(chunk);
}
// A chunk rebuilt from exactly `bytes` bytes.
template <Serializable C>
void unpack_chunk(C& chunk, const std::byte* data, std::size_t bytes) {
  ArchiveReader r(data, bytes);
  r(chunk);
  if (!r.finished()) throw FormatError("chunk archive: a chunk's serialize reads fewer bytes than it wrote");
}

}  // namespace tessera::chunks
