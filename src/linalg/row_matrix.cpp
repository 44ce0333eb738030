#include "tessera/linalg/row_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "tessera/runtime/collective.hpp"

namespace tessera::linalg {

std::size_t RowMatrix::max_row_length() const {
  std::size_t longest = 0;
  for (std::uint64_t i = 0; i < local_rows(); ++i) longest = std::max(longest, row_length(i));
  return longest;
}

double RowMatrix::norm_inf() const {
  std::vector<std::uint64_t> columns(max_row_length());
  std::vector<double> values(columns.size());
  double largest = 0;
  for (std::uint64_t i = 0; i < local_rows(); ++i) {
    const std::size_t n = copy_row(i, columns, values);
    double sum = 0;
    for (std::size_t k = 0; k < n; ++k) sum += std::abs(values[k]);
    largest = std::max(largest, sum);
  }
  return all_reduce(row_map().comm(), largest, MPI_MAX);
}

void check_row_buffers(std::size_t length, std::span<std::uint64_t> columns, std::span<double> values) {
  if (columns.size() < length || values.size() < length)
    throw RangeError("a row of " + std::to_string(length) + " entries does not fit buffers of " +
                     std::to_string(columns.size()) + " columns and " + std::to_string(values.size()) + " values");
}

Import::Import(const Map& rows, const GhostSet& ghosts)
    // Sorted ids are grouped by owner: the values land in place, no permutation kept.
    : plan_(rows.comm(), ghosts.ids(), [&](std::uint64_t id) { return rows.owner(id); }) {
  const std::vector<std::uint64_t> requested = plan_.take_received();
  const std::uint64_t base = rows.local_begin();
  send_index_.resize(requested.size());
  for (std::size_t k = 0; k < requested.size(); ++k) {
    if (requested[k] < base || requested[k] >= rows.local_end())
      throw RangeError("rank asked for index " + std::to_string(requested[k]) + " it does not own");
    send_index_[k] = static_cast<std::uint32_t>(requested[k] - base);
  }
  send_buffer_.resize(send_index_.size());
}

void Import::gather(std::span<const double> owned, std::span<double> ghost_values) const {
  for (std::size_t k = 0; k < send_index_.size(); ++k) send_buffer_[k] = owned[send_index_[k]];
  plan_.reply<double>(send_buffer_, ghost_values);
}

void Import::scatter_add(std::span<const double> ghost_contributions, std::span<double> owned) const {
  plan_.send<double>(ghost_contributions, send_buffer_);
  for (std::size_t k = 0; k < send_index_.size(); ++k) owned[send_index_[k]] += send_buffer_[k];
}

std::size_t Import::memory_bytes() const {
  return plan_.memory_bytes() + send_index_.capacity() * sizeof(std::uint32_t) +
         send_buffer_.capacity() * sizeof(double);
}

}  // namespace tessera::linalg
