#include "tessera/graph/id_map.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "tessera/comm/aggregators.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::graph {

IdMap::IdMap(Runtime& rt, Distribution ranges, std::uint64_t base, std::optional<DistArray<std::uint64_t>> ids)
    : rt_(&rt), ranges_(std::move(ranges)), base_(base), ids_(std::move(ids)) {}

IdMap IdMap::identity(Runtime& rt, const Distribution& ranges, std::uint64_t base) {
  return IdMap(rt, ranges, base, std::nullopt);
}

IdMap IdMap::relabelled(DistArray<std::uint64_t> file_ids_from_base, std::uint64_t base) {
  Runtime& rt = file_ids_from_base.runtime();
  Distribution ranges = file_ids_from_base.distribution();
  IdMap out(rt, std::move(ranges), base, std::move(file_ids_from_base));
  out.note_order();
  return out;
}

// Ascending when every rank's ids increase and each nonempty rank starts
// above the last id of the nonempty ranks before it.
void IdMap::note_order() {
  if (!ids_) {
    ascending_ = true;
    return;
  }
  auto local = ids_->local();
  int sorted = std::adjacent_find(local.begin(), local.end(), std::greater_equal<>()) == local.end();
  struct Ends {
    std::uint64_t first, last, nonempty;
  };
  Ends mine{local.empty() ? 0 : local.front(), local.empty() ? 0 : local.back(), !local.empty()};
  auto all = all_gather(rt_->comm(), mine);
  sorted = all_reduce(rt_->comm(), sorted, MPI_MIN);
  bool have_last = false;
  std::uint64_t last = 0;
  for (const auto& e : all) {
    if (!e.nonempty) continue;
    if (have_last && e.first <= last) sorted = 0;
    last = e.last;
    have_last = true;
  }
  ascending_ = sorted != 0;
}

std::vector<std::uint64_t> IdMap::local_file_ids() const {
  const int me = rt_->rank();
  std::vector<std::uint64_t> out(ranges_.count(me));
  if (ids_) {
    auto local = ids_->local();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = local[i] + base_;
  } else {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = ranges_.begin(me) + i + base_;
  }
  return out;
}

void IdMap::translate(std::span<std::uint64_t> values) const {
  // Checked on every rank together: a bad value on one rank must not leave
  // the others waiting in the exchange below.
  agree(rt_->comm(), [&] {
    for (auto v : values)
      if (v != kNoIndex && v >= vertices())
        throw RangeError("vertex " + std::to_string(v) + " is outside the graph's " + std::to_string(vertices()) +
                         " vertices");
  });
  std::vector<std::uint8_t> present(values.size());
  for (std::size_t k = 0; k < values.size(); ++k) present[k] = values[k] != kNoIndex;
  if (ids_) {
    SrcAggregator<std::uint64_t> read(*ids_);
    for (std::size_t k = 0; k < values.size(); ++k)
      if (present[k]) read.get(values[k], values[k]);
  }
  for (std::size_t k = 0; k < values.size(); ++k)
    if (present[k]) values[k] += base_;
}

std::uint64_t IdMap::file_id(std::uint64_t internal) const {
  translate(std::span<std::uint64_t>(&internal, 1));
  return internal;
}

std::vector<std::uint64_t> IdMap::find(std::span<const std::uint64_t> file_ids) const {
  if (file_ids.empty()) return {};  // the same list on every rank: none enters the reduction
  const std::uint64_t first = ranges_.begin(rt_->rank());
  std::vector<std::uint64_t> found(file_ids.size(), kNoIndex);
  if (ids_) {
    auto local = ids_->local();
    // Sorted (id, local index) pairs when the ids do not increase by themselves.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> sorted;
    if (!ascending_) {
      sorted.reserve(local.size());
      for (std::size_t i = 0; i < local.size(); ++i) sorted.emplace_back(local[i], i);
      std::sort(sorted.begin(), sorted.end());
    }
    for (std::size_t k = 0; k < file_ids.size(); ++k) {
      if (file_ids[k] < base_) continue;
      const std::uint64_t id = file_ids[k] - base_;
      if (ascending_) {
        auto it = std::lower_bound(local.begin(), local.end(), id);
        if (it != local.end() && *it == id) found[k] = first + static_cast<std::uint64_t>(it - local.begin());
      } else {
        auto it = std::lower_bound(sorted.begin(), sorted.end(), std::make_pair(id, std::uint64_t{0}));
        if (it != sorted.end() && it->first == id) found[k] = first + it->second;
      }
    }
  } else {
    const std::uint64_t end = ranges_.end(rt_->rank());
    for (std::size_t k = 0; k < file_ids.size(); ++k)
      if (file_ids[k] >= base_ && file_ids[k] - base_ >= first && file_ids[k] - base_ < end)
        found[k] = file_ids[k] - base_;
  }
  // Each vertex lives on one rank; the others offer kNoIndex.
  all_reduce(rt_->comm(), found.data(), static_cast<int>(found.size()), MPI_MIN);
  return found;
}

std::uint64_t IdMap::find(std::uint64_t file_id) const {
  return find(std::span<const std::uint64_t>(&file_id, 1)).front();
}

IdMap IdMap::compose(const DistArray<std::uint64_t>& old_of_new) const {
  DistArray<std::uint64_t> ids(*rt_, old_of_new.distribution());
  auto old = old_of_new.local();
  agree(rt_->comm(), [&] {
    for (auto v : old)
      if (v >= vertices())
        throw RangeError("the subgraph's vertex map names vertex " + std::to_string(v) + ", outside the graph's " +
                         std::to_string(vertices()) + " vertices");
  });
  auto out = ids.local();
  if (ids_) {
    SrcAggregator<std::uint64_t> read(*ids_);
    for (std::size_t i = 0; i < old.size(); ++i) read.get(old[i], out[i]);
  } else {
    std::copy(old.begin(), old.end(), out.begin());
  }
  IdMap composed(*rt_, old_of_new.distribution(), base_, std::move(ids));
  composed.note_order();
  return composed;
}

IdMap IdMap::redistributed(const Distribution& ranges) const {
  if (ranges.size() != vertices())
    throw MismatchError("an id map of " + std::to_string(vertices()) + " vertices cannot move to vertex ranges of " +
                        std::to_string(ranges.size()));
  if (!ids_) return identity(*rt_, ranges, base_);
  DistArray<std::uint64_t> ids(*rt_, ranges);
  auto out = ids.local();
  const std::uint64_t first = ranges.begin(rt_->rank());
  {
    SrcAggregator<std::uint64_t> read(*ids_);
    for (std::size_t i = 0; i < out.size(); ++i) read.get(first + i, out[i]);
  }
  IdMap moved(*rt_, ranges, base_, std::move(ids));
  moved.ascending_ = ascending_;  // same ids in the same vertex order
  return moved;
}

}  // namespace tessera::graph
