// The operator interfaces of the linear-algebra layer, after Tpetra's
// Operator / RowMatrix split: a LinearOperator can be applied and has a
// diagonal (enough for Jacobi-preconditioned CG); a RowMatrix also exposes its
// rows, transpose product, row sums and norms. Square matrices whose rows and
// columns share one Map (a graph's vertex ranges and its runtime): an
// operator reaches its communicator through its row map.
//
// Import is the exchange plan of a matrix: which ghost entries (columns owned
// elsewhere) this rank reads, and which owned entries it sends to whom. Its
// size is O(ghosts), never O(entries).
#pragma once
#include <span>
#include <vector>

#include "tessera/array/ghost_set.hpp"
#include "tessera/comm/request_reply.hpp"
#include "tessera/linalg/vector.hpp"

namespace tessera::linalg {

// Whether an operator keeps the buffers its product needs from one product to
// the next (it is applied every iteration: no allocation per product) or
// frees them after each (it is applied now and then, beside another solver
// whose own vectors need the memory in between).
enum class ProductBuffers { kept, released };

class LinearOperator {
 public:
  virtual ~LinearOperator() = default;
  virtual const Map& row_map() const = 0;
  const Distribution& row_distribution() const { return row_map().distribution(); }
  Runtime& runtime() const { return row_map().runtime(); }
  // y = alpha * A x + beta * y (beta == 0 ignores y's old contents, even NaN).
  virtual void apply(const Vector& x, Vector& y, double alpha = 1.0, double beta = 0.0) const = 0;
  virtual void diagonal(Vector& d) const = 0;
  // Collective. ||A||_inf (the largest absolute row sum) or an upper bound
  // on it: for a symmetric A it bounds ||A||_2, which the backward error of a
  // solve needs (conjugate_gradient's convergence test).
  virtual double norm_inf() const = 0;
};

class RowMatrix : public LinearOperator {
 public:
  std::uint64_t global_rows() const { return row_distribution().size(); }
  std::uint64_t local_rows() const { return row_map().local_size(); }
  virtual std::uint64_t global_entries() const = 0;
  virtual std::uint64_t local_entries() const = 0;
  // y = alpha * A^T x + beta * y
  virtual void apply_transpose(const Vector& x, Vector& y, double alpha = 1.0, double beta = 0.0) const = 0;
  virtual void row_sums(Vector& s) const = 0;
  virtual double frobenius_norm() const = 0;
  // The largest absolute row sum, read row by row through copy_row.
  double norm_inf() const override;
  // Entries in local row `local_row`.
  virtual std::size_t row_length(std::uint64_t local_row) const = 0;
  // Copies local row `local_row`'s global column ids and values into the
  // front of `columns` and `values` (after Tpetra's getGlobalRowCopy) and
  // returns the row length; RangeError if the spans are shorter than that.
  virtual std::size_t copy_row(std::uint64_t local_row, std::span<std::uint64_t> columns,
                               std::span<double> values) const = 0;
  // The longest local row (sizes the buffers of copy_row).
  std::size_t max_row_length() const;
  // Bytes this object allocated beyond the data it was built over.
  virtual std::size_t extra_memory_bytes() const = 0;
};

// RangeError unless `columns` and `values` hold `length` entries (copy_row).
void check_row_buffers(std::size_t length, std::span<std::uint64_t> columns, std::span<double> values);

class Import {
 public:
  Import() = default;
  // Collective. `ghosts` are global indices owned by other ranks under `rows`.
  Import(const Map& rows, const GhostSet& ghosts);
  // ghost_values[j] = owned value of ghosts.ids()[j] on its owner.
  void gather(std::span<const double> owned, std::span<double> ghost_values) const;
  // owned[i] += every rank's contribution to it (the reverse of gather).
  void scatter_add(std::span<const double> ghost_contributions, std::span<double> owned) const;
  std::size_t memory_bytes() const;

 private:
  comm::RequestPlan<std::uint64_t> plan_;  // the ghost ids asked of their owners (their requests handed over)
  std::vector<std::uint32_t> send_index_;  // owned offsets asked for, in the order the requests arrived
  mutable std::vector<double> send_buffer_;
};

}  // namespace tessera::linalg
