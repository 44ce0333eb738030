// CheckpointReader: reads a committed checkpoint on any rank count.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "format.hpp"
#include "tessera/resilience/checkpoint.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/storage/durable_file.hpp"
#include "tessera/storage/mapping.hpp"

namespace tessera::resilience {

using store::data_file_name;

std::vector<std::string> CheckpointReader::names() const {
  std::set<std::string> s;
  for (const auto& p : pieces_) s.insert(p.name);
  return {s.begin(), s.end()};
}

std::vector<const CheckpointReader::Piece*> CheckpointReader::pieces_of(const std::string& name) const {
  std::vector<const Piece*> out;
  for (const auto& p : pieces_)
    if (p.name == name) out.push_back(&p);
  if (out.empty()) {
    std::string have;
    for (const auto& n : names()) have += (have.empty() ? "" : ", ") + n;
    throw RangeError("checkpoint " + info_.path + " has no '" + name + "' (it has: " + have + ")");
  }
  return out;
}

std::uint64_t CheckpointReader::length(const std::string& name) const { return pieces_of(name)[0]->length; }

void CheckpointReader::check_length(const std::string& name, std::uint64_t length) const {
  if (this->length(name) != length)
    throw MismatchError("checkpoint " + info_.path + ": '" + name + "' has " + std::to_string(this->length(name)) +
                        " elements, the array to fill " + std::to_string(length));
}

std::string CheckpointReader::data_path(int rank) const { return info_.path + "/" + data_file_name(rank); }

void CheckpointReader::read_range(const std::string& name, const ElementType& type, std::uint64_t begin,
                                  std::uint64_t count, std::span<std::byte> out) const {
  auto ps = pieces_of(name);
  const Piece& first = *ps[0];
  if (first.kind != "array")
    throw MismatchError("checkpoint " + info_.path + ": '" + name + "' is a chunk array, not an array");
  if (first.type != type.name || first.element_size != type.size)
    throw MismatchError("checkpoint " + info_.path + ": '" + name + "' holds " + first.type + " (" +
                        std::to_string(first.element_size) + " bytes), not " + type.name + " (" +
                        std::to_string(type.size) + " bytes)");
  if (begin > first.length || count > first.length - begin)
    throw RangeError("checkpoint " + info_.path + ": elements [" + std::to_string(begin) + ", " +
                     std::to_string(begin + count) + ") of '" + name + "', which has " + std::to_string(first.length));
  const std::uint64_t end = begin + count, es = first.element_size;
  for (const Piece* p : ps) {
    std::uint64_t lo = std::max(begin, p->begin), hi = std::min(end, p->begin + p->count);
    if (lo >= hi) continue;
    std::string path = data_path(p->rank);
    FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) throw SystemError("cannot open checkpoint data " + path, errno);
    struct stat st {};
    const std::uint64_t from = p->offset + (lo - p->begin) * es, n = (hi - lo) * es;
    if (::fstat(fd.get(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) < from + n)
      throw FormatError("checkpoint data " + path + " is truncated: it must hold " + std::to_string(from + n) + " bytes");
    // Copied from a mapping: the page cache's pages are read in place (a
    // read() would copy them page by page through the kernel).
    Mapping map = Mapping::file(fd.get(), static_cast<std::size_t>(st.st_size), false, path);
    std::memcpy(out.data() + (lo - begin) * es, map.data() + from, n);
  }
}

std::vector<std::pair<std::uint64_t, std::vector<std::byte>>> CheckpointReader::chunk_bytes(
    const std::string& name, const std::string& type, std::uint64_t size) const {
  auto ps = pieces_of(name);
  if (ps[0]->kind != "chunks")
    throw MismatchError("checkpoint " + info_.path + ": '" + name + "' is an array, not a chunk array");
  if (ps[0]->type != type || ps[0]->element_size != size)
    throw MismatchError("checkpoint " + info_.path + ": '" + name + "' holds chunks of type " + ps[0]->type + " (" +
                        std::to_string(ps[0]->element_size) + " bytes), not " + type + " (" + std::to_string(size) +
                        " bytes)");
  auto placement = chunks::block_placement(static_cast<std::size_t>(ps[0]->length), rt_->size());
  auto lo = static_cast<std::uint64_t>(std::find(placement.begin(), placement.end(), rt_->rank()) - placement.begin());
  auto hi = lo + chunks::chunks_per_rank(placement, rt_->size())[static_cast<std::size_t>(rt_->rank())];
  std::vector<std::pair<std::uint64_t, std::vector<std::byte>>> out;
  for (const Piece* p : ps) {
    if (p->count == 0) continue;
    std::string path = data_path(p->rank);
    FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) throw SystemError("cannot open checkpoint data " + path, errno);
    std::vector<std::uint64_t> index(p->count * 3);
    read_exactly(fd.get(), p->offset, std::as_writable_bytes(std::span<std::uint64_t>(index)), path);
    for (std::uint64_t k = 0; k < p->count; ++k) {
      std::uint64_t id = index[3 * k], off = index[3 * k + 1], n = index[3 * k + 2];
      if (id < lo || id >= hi) continue;
      if (off > p->bytes || n > p->bytes - off) throw FormatError("checkpoint " + path + ": a damaged chunk index");
      std::vector<std::byte> bytes(n);
      read_exactly(fd.get(), p->offset + off, bytes, path);
      out.emplace_back(id, std::move(bytes));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t k = 0; k < out.size(); ++k)
    if (out[k].first != lo + k)
      throw FormatError("checkpoint " + info_.path + ": chunk array '" + name + "' lacks chunk " + std::to_string(lo + k) +
                        " or holds one twice");
  if (out.size() != hi - lo)
    throw FormatError("checkpoint " + info_.path + ": chunk array '" + name + "' lacks chunks " +
                      std::to_string(lo + out.size()) + ".." + std::to_string(hi - 1));
  return out;
}


}  // namespace tessera::resilience
