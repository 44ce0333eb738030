// Vector: a distributed vector of doubles on a row Map, with the reductions
// Krylov solvers need. Reductions are collective over the map's runtime and
// yield the core while they wait.
#pragma once
#include <span>

#include "tessera/array/dist_array.hpp"

namespace tessera::linalg {

class Vector {
 public:
  // Collective.
  explicit Vector(const Map& rows, const StorageOptions& storage = {}) : data_(rows, storage) {}
  Vector(Runtime& rt, const Distribution& rows, const StorageOptions& storage = {}) : data_(rt, rows, storage) {}

  Runtime& runtime() const noexcept { return data_.runtime(); }
  const Map& map() const noexcept { return data_.map(); }
  const Distribution& distribution() const noexcept { return data_.distribution(); }
  std::uint64_t size() const noexcept { return data_.size(); }
  std::span<double> local() noexcept { return data_.local(); }
  std::span<const double> local() const noexcept { return data_.local(); }
  DistArray<double>& array() noexcept { return data_; }
  const DistArray<double>& array() const noexcept { return data_; }

  void fill(double value);
  void assign(const Vector& x);           // this = x
  void scale(double a);                   // this = a * this
  void axpy(double a, const Vector& x);   // this += a * x
  void xpay(const Vector& x, double a);   // this = x + a * this
  double dot(const Vector& x) const;
  double norm2() const;
  double norm_inf() const;

 private:
  void check_same(const Vector& x) const;
  DistArray<double> data_;
};

}  // namespace tessera::linalg
