#include "tessera/linalg/row_matrix.hpp"

#include <algorithm>
#include <cmath>

#include "tessera/comm/bulk_exchange.hpp"
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

Import::Import(const Map& rows, const GhostSet& ghosts, std::size_t gap) : comm_(rows.comm()) {
  const auto P = static_cast<std::size_t>(rows.ranks());
  std::vector<std::uint64_t> want(P, 0);
  for (auto id : ghosts.ids()) ++want[static_cast<std::size_t>(rows.owner(id))];  // sorted ids: grouped by owner
  std::vector<std::uint64_t> asked;
  auto requested = comm::exchange<std::uint64_t>(comm_, ghosts.ids(), want, asked);
  const std::uint64_t base = rows.local_begin();
  send_index_.resize(requested.size());
  for (std::size_t k = 0; k < requested.size(); ++k) {
    if (requested[k] < base || requested[k] >= rows.local_end())
      throw RangeError("rank asked for index " + std::to_string(requested[k]) + " it does not own");
    send_index_[k] = static_cast<std::uint32_t>(requested[k] - base);
  }
  send_counts_.resize(P), send_displ_.resize(P), recv_counts_.resize(P), recv_displ_.resize(P);
  int s = 0, r = 0;
  for (std::size_t p = 0; p < P; ++p) {
    send_counts_[p] = static_cast<int>(asked[p]);
    recv_counts_[p] = static_cast<int>(want[p]);
    send_displ_[p] = s;
    recv_displ_[p] = r + (static_cast<int>(p) > rows.rank() ? static_cast<int>(gap) : 0);
    s += send_counts_[p], r += recv_counts_[p];
  }
  send_buffer_.resize(send_index_.size());
}

void Import::gather(std::span<const double> owned, std::span<double> ghost_values) const {
  if (comm_ == MPI_COMM_NULL) return;
  for (std::size_t k = 0; k < send_index_.size(); ++k) send_buffer_[k] = owned[send_index_[k]];
  all_to_all_v(comm_, send_buffer_.data(), send_counts_.data(), send_displ_.data(), ghost_values.data(),
               recv_counts_.data(), recv_displ_.data());
}

void Import::scatter_add(std::span<const double> ghost_contributions, std::span<double> owned) const {
  if (comm_ == MPI_COMM_NULL) return;
  all_to_all_v(comm_, ghost_contributions.data(), recv_counts_.data(), recv_displ_.data(), send_buffer_.data(),
               send_counts_.data(), send_displ_.data());
  for (std::size_t k = 0; k < send_index_.size(); ++k) owned[send_index_[k]] += send_buffer_[k];
}

std::size_t Import::memory_bytes() const {
  return send_index_.capacity() * sizeof(std::uint32_t) + send_buffer_.capacity() * sizeof(double) +
         4 * send_counts_.size() * sizeof(int);
}

}  // namespace tessera::linalg
