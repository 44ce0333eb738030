// Bulk collective forms over index arrays, after Arkouda's `A[idx]`,
// `A[idx] = v` and `A[idx] op= v`: each rank passes its own array of global
// indices into a DistArray (any length, empty included) and the operation
// runs through one aggregator.
//
//   gather(array, indices, out)             out[k] = array[indices[k]]
//   gather(array, indices)                  the same, into a new vector
//   scatter(array, indices, values)         array[indices[k]] = values[k]
//   update(array, indices, values, op)      array[indices[k]] = op(array[indices[k]], values[k])
//
// Collective: every rank of the array's runtime calls the same form, whatever
// its share. Indices are checked first, on every rank: an index outside
// [0, array.size()) or a length mismatch throws on every rank together (the
// failing rank its own RangeError / MismatchError naming the index and its
// position, the others the same category "on rank k: ..."), before anything
// is written. On return the operation is complete and visible on every rank.
//
// Duplicates: update folds every value in (the reduction should commute:
// arrival order is not fixed); scatter leaves one of the values written to
// that element, unspecified which; gather reads the same value for each.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/comm/aggregators.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera {

namespace detail {

// Throws on every rank when the indices or the value count of any rank are
// wrong. One small collective; `operation` names the call in the message.
inline void check_bulk_arguments(MPI_Comm comm, const char* operation, std::uint64_t array_size,
                                 std::span<const std::uint64_t> indices, std::size_t values,
                                 const char* values_name) {
  agree(comm, [&] {
    if (values != indices.size())
      throw MismatchError(std::string(operation) + ": " + std::to_string(indices.size()) + " indices but " +
                          std::to_string(values) + " " + values_name + " (one each)");
    for (std::size_t k = 0; k < indices.size(); ++k)
      if (indices[k] >= array_size)
        throw RangeError(std::string(operation) + ": index " + std::to_string(indices[k]) + " (position " +
                         std::to_string(k) + " of this rank's indices) is out of range [0, " +
                         std::to_string(array_size) + ")");
  });
}

}  // namespace detail

// out[k] = array[indices[k]] for every k of this rank's indices.
template <class T>
void gather(const DistArray<T>& array, std::span<const std::uint64_t> indices, std::span<std::type_identity_t<T>> out,
            const AggregationOptions& options = {}) {
  detail::check_bulk_arguments(array.runtime().comm(), "gather", array.size(), indices, out.size(), "output slots");
  SrcAggregator<T> reads(array, options);
  reads.get(indices, std::span<T>(out));  // the typed loop, own elements through the self lane
}  // the aggregator's scope end flushes: every value has arrived

template <class T>
std::vector<T> gather(const DistArray<T>& array, std::span<const std::uint64_t> indices,
                      const AggregationOptions& options = {}) {
  std::vector<T> out(indices.size());
  gather(array, indices, std::span<T>(out), options);
  return out;
}

// array[indices[k]] = values[k] for every k of this rank's indices.
template <class T>
void scatter(DistArray<T>& array, std::span<const std::uint64_t> indices,
             std::span<const std::type_identity_t<T>> values, const AggregationOptions& options = {}) {
  detail::check_bulk_arguments(array.runtime().comm(), "scatter", array.size(), indices, values.size(), "values");
  DstAggregator<T> writes(array, options);
  writes.put(indices, values);  // the typed loop, own elements through the self lane
}

// array[indices[k]] = op(array[indices[k]], values[k]) for every k of this
// rank's indices; `op` as for UpdateAggregator (ops::Add, Min, Max, BitXor,
// Replace, or a user functor or lambda).
template <class T, class Op = ops::Add>
void update(DistArray<T>& array, std::span<const std::uint64_t> indices,
            std::span<const std::type_identity_t<T>> values, Op op = {}, const AggregationOptions& options = {}) {
  detail::check_bulk_arguments(array.runtime().comm(), "update", array.size(), indices, values.size(), "values");
  UpdateAggregator<T, Op> updates(array, std::move(op), options);
  updates.update(indices, values);  // as scatter
}

}  // namespace tessera
