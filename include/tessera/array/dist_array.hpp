// DistArray<T>: a distributed array of trivially copyable T, one part per
// rank, in Heap, Shared or Co-locale storage (the default is the runtime's:
// Heap, or Co-locale when its co-locale segments are on). Local work goes through the std::span view;
// remote access goes through the aggregators in comm/.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <type_traits>

#include "tessera/array/map.hpp"
#include "tessera/storage/mapping.hpp"
#include "tessera/storage/storage.hpp"

namespace tessera {

template <class T>
class DistArray {
  static_assert(std::is_trivially_copyable_v<T>, "DistArray holds trivially copyable types only");

 public:
  using value_type = T;

  // Collective: every rank passes the same arguments. Elements start zeroed.
  // Destruction is per rank and not collective: each rank unmaps and (unless
  // persistent) removes its own segment, rank 0 also the metadata. Synchronise
  // first if other ranks or outside processes may still be attaching.
  DistArray(Runtime& rt, std::uint64_t n, const StorageOptions& storage = {})
      : DistArray(rt, Distribution::block(n, rt.size()), storage) {}
  DistArray(Runtime& rt, Distribution dist, const StorageOptions& storage = {})
      : DistArray(Map(rt, std::move(dist)), storage) {}
  explicit DistArray(Map map, const StorageOptions& storage = {}) : map_(std::move(map)) {
    const Distribution& d = map_.distribution();
    storage_ = make_storage(map_.runtime(), ArrayLayout{element_type_of<T>(), d.size(), d.kind(), d.offsets()}, storage);
    auto bytes = storage_->local();
    local_ = {reinterpret_cast<T*>(bytes.data()), bytes.size() / sizeof(T)};
  }

  DistArray(DistArray&&) noexcept = default;
  DistArray& operator=(DistArray&&) noexcept = default;

  Runtime& runtime() const noexcept { return map_.runtime(); }
  const Map& map() const noexcept { return map_; }
  const Distribution& distribution() const noexcept { return map_.distribution(); }
  std::uint64_t size() const noexcept { return map_.size(); }

  std::span<T> local() noexcept { return local_; }
  std::span<const T> local() const noexcept { return local_; }
  std::uint64_t local_begin() const noexcept { return map_.local_begin(); }
  std::uint64_t local_end() const noexcept { return map_.local_end(); }

  int owner(std::uint64_t i) const noexcept { return map_.owner(i); }
  bool is_local(std::uint64_t i) const noexcept { return map_.is_local(i); }

  // Checked access to a locally owned element by global index.
  T& at(std::uint64_t i) { return local_[checked_local_offset(i)]; }
  const T& at(std::uint64_t i) const { return local_[checked_local_offset(i)]; }

  // Collective: the array becomes `smaller` (the same number of ranks, no
  // rank's part longer than now), each rank keeping the prefix of its part;
  // the rest of its memory (or Shared segment) is given back. For arrays
  // filled to an upper bound, then compacted in place.
  void shrink(Distribution smaller) {
    storage_->shrink(map_.runtime(), ArrayLayout{element_type_of<T>(), smaller.size(), smaller.kind(), smaller.offsets()});
    map_ = Map(map_.runtime(), std::move(smaller));
    auto bytes = storage_->local();
    local_ = {reinterpret_cast<T*>(bytes.data()), bytes.size() / sizeof(T)};
  }

  bool shrinkable() const noexcept { return storage_->shrinkable(); }
  // Before the first touch of a Heap part: transparent huge pages under it
  // (tessera::prefer_huge_pages in storage/mapping.hpp). Other kinds: nothing.
  void prefer_huge_pages() noexcept {
    if (storage_kind() == StorageKind::heap) tessera::prefer_huge_pages(std::as_writable_bytes(local_));
  }

  const Storage& storage() const noexcept { return *storage_; }
  StorageKind storage_kind() const noexcept { return storage_->kind(); }
  std::string metadata_path() const { return storage_->metadata_path(); }
  // Elements of co-located rank `r`, mapped here (Shared or Co-locale storage), else null.
  T* colocal_data(int r) const noexcept { return reinterpret_cast<T*>(storage_->colocal_data(r)); }

 private:
  std::size_t checked_local_offset(std::uint64_t i) const {
    map_.distribution().check(i);
    if (!is_local(i))
      throw RangeError("global index " + std::to_string(i) + " is owned by rank " + std::to_string(owner(i)) +
                       ", not by rank " + std::to_string(map_.rank()) + " (local range [" +
                       std::to_string(local_begin()) + ", " + std::to_string(local_end()) + "))");
    return static_cast<std::size_t>(i - local_begin());
  }

  Map map_;
  std::unique_ptr<Storage> storage_;
  std::span<T> local_;
};

}  // namespace tessera
