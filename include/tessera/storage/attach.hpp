// Attaching to a shared array from any process, inside or outside the MPI job
// that made it: read the metadata, check every segment against it, then map.
// Nothing is copied; writes through a read-write attachment are seen by the
// creator and by every other attachment.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/runtime/error.hpp"
#include "tessera/storage/element_type.hpp"
#include "tessera/storage/mapping.hpp"
#include "tessera/storage/metadata.hpp"

namespace tessera {

enum class Access { read_only, read_write };

class AttachedArray {
 public:
  struct Segment {
    int rank = 0;
    std::uint64_t begin = 0;  // first global index
    std::uint64_t count = 0;  // elements
    std::byte* data = nullptr;
  };

  // Throws FormatError / MismatchError / SystemError naming the metadata or
  // segment file at fault; maps nothing unless every check passes.
  static AttachedArray open(const std::string& metadata_path, Access access);
  // The same, with the whole array at consecutive addresses (contiguous_data()):
  // each segment's elements mapped in place after the previous one's, so a
  // process outside the job sees one array, still without a copy. Needs
  // every segment but the last to hold whole pages (the creator chose
  // aligned ranges: Runtime::set_range_alignment); MismatchError naming the
  // first segment that does not.
  static AttachedArray open_contiguous(const std::string& metadata_path, Access access);
  // The first element of the whole array; null unless opened contiguous.
  std::byte* contiguous_data() const noexcept { return contiguous_; }

  const SharedArrayMetadata& metadata() const noexcept { return meta_; }
  const ElementType& element() const noexcept { return meta_.element; }
  std::uint64_t length() const noexcept { return meta_.length; }
  std::size_t segment_count() const noexcept { return segments_.size(); }
  const Segment& segment(std::size_t i) const { return segments_.at(i); }
  bool writable() const noexcept { return access_ == Access::read_write; }

  // Typed view of one segment; throws MismatchError when T is not the stored type.
  template <class T>
  std::span<T> segment_span(std::size_t i) const {
    check_type(element_type_of<T>());
    const auto& s = segment(i);
    return {reinterpret_cast<T*>(s.data), static_cast<std::size_t>(s.count)};
  }
  // Throws MismatchError naming both types when `expected` differs.
  void check_type(const ElementType& expected) const;

 private:
  std::string path_;
  SharedArrayMetadata meta_;
  Access access_ = Access::read_only;
  std::vector<Mapping> mappings_;
  std::vector<Segment> segments_;
  std::byte* contiguous_ = nullptr;

  static AttachedArray open_checked(const std::string& metadata_path, Access access, bool contiguous);
};

}  // namespace tessera
