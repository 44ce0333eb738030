// DistArray<T>: a distributed array of trivially copyable T, one part per
// rank, in Heap or Shared storage. Local work goes through the std::span view;
// remote access goes through the aggregators in comm/.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <type_traits>

#include "tessera/array/distribution.hpp"
#include "tessera/runtime/runtime.hpp"
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
      : rt_(&rt), dist_(std::move(dist)) {
    if (dist_.ranks() != rt.size())
      throw MismatchError("distribution is for " + std::to_string(dist_.ranks()) + " ranks but the job has " +
                          std::to_string(rt.size()));
    storage_ = make_storage(rt, ArrayLayout{element_type_of<T>(), dist_.size(), dist_.kind(), dist_.offsets()}, storage);
    auto bytes = storage_->local();
    local_ = {reinterpret_cast<T*>(bytes.data()), bytes.size() / sizeof(T)};
  }

  DistArray(DistArray&&) noexcept = default;
  DistArray& operator=(DistArray&&) noexcept = default;

  Runtime& runtime() const noexcept { return *rt_; }
  const Distribution& distribution() const noexcept { return dist_; }
  std::uint64_t size() const noexcept { return dist_.size(); }

  std::span<T> local() noexcept { return local_; }
  std::span<const T> local() const noexcept { return local_; }
  std::uint64_t local_begin() const noexcept { return dist_.begin(rt_->rank()); }
  std::uint64_t local_end() const noexcept { return dist_.end(rt_->rank()); }

  int owner(std::uint64_t i) const noexcept { return dist_.owner(i); }
  bool is_local(std::uint64_t i) const noexcept { return i >= local_begin() && i < local_end(); }

  // Checked access to a locally owned element by global index.
  T& at(std::uint64_t i) { return local_[checked_local_offset(i)]; }
  const T& at(std::uint64_t i) const { return local_[checked_local_offset(i)]; }

  const Storage& storage() const noexcept { return *storage_; }
  StorageKind storage_kind() const noexcept { return storage_->kind(); }
  std::string metadata_path() const { return storage_->metadata_path(); }
  // Elements of co-located rank `r`, mapped here (Shared storage only), else null.
  T* colocal_data(int r) const noexcept { return reinterpret_cast<T*>(storage_->colocal_data(r)); }

 private:
  std::size_t checked_local_offset(std::uint64_t i) const {
    dist_.check(i);
    if (!is_local(i))
      throw RangeError("global index " + std::to_string(i) + " is owned by rank " + std::to_string(owner(i)) +
                       ", not by rank " + std::to_string(rt_->rank()) + " (local range [" +
                       std::to_string(local_begin()) + ", " + std::to_string(local_end()) + "))");
    return static_cast<std::size_t>(i - local_begin());
  }

  Runtime* rt_;
  Distribution dist_;
  std::unique_ptr<Storage> storage_;
  std::span<T> local_;
};

}  // namespace tessera
