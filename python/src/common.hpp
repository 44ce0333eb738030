// Shared pieces of the _tessera extension: the process's one Runtime, NumPy
// views that keep their owner alive, and the dtype dispatch.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>

#include "tessera/array/dist_array.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera::python {

namespace py = pybind11;

// The process's tessera::Runtime: created on first use (MPI initialised unless
// mpi4py or someone else already did), destroyed by shutdown_runtime() from
// an atexit hook, never earlier: MPI cannot start again once finalised.
Runtime& runtime();
bool runtime_exists() noexcept;
void shutdown_runtime();

// The storage a Python caller names: "default" (the runtime's choice: Heap,
// or co-locale segments under --colocales), "heap", "colocale", or "shared"
// (with an optional name, dir and persist). ConfigError for anything else.
StorageOptions storage_options(const std::string& storage, const std::string& name, const std::string& dir,
                               bool persist = false);

// A NumPy view of `data` whose base object is `owner`: the memory lives as
// long as any view does, and nothing is copied.
template <class T>
py::array view_of(std::span<T> data, py::handle owner, bool writable) {
  using Plain = std::remove_const_t<T>;
  py::array out(py::dtype::of<Plain>(), {static_cast<py::ssize_t>(data.size())},
                {static_cast<py::ssize_t>(sizeof(Plain))}, const_cast<Plain*>(data.data()), owner);
  if (!writable) out.attr("flags").attr("writeable") = false;
  return out;
}

// The element types of Tessera arrays, in the order of the variant below.
using ArrayVariant = std::variant<DistArray<std::int8_t>, DistArray<std::uint8_t>, DistArray<std::int16_t>,
                                  DistArray<std::uint16_t>, DistArray<std::int32_t>, DistArray<std::uint32_t>,
                                  DistArray<std::int64_t>, DistArray<std::uint64_t>, DistArray<float>,
                                  DistArray<double>>;

// Calls f(T{}) for the Tessera element type that NumPy dtype `dtype` names;
// MismatchError for any other dtype.
template <class F>
decltype(auto) with_element_type(const py::dtype& dtype, F&& f) {
  const char kind = dtype.kind();
  const auto size = dtype.itemsize();
  if (kind == 'i' && size == 1) return f(std::int8_t{});
  if (kind == 'u' && size == 1) return f(std::uint8_t{});
  if (kind == 'i' && size == 2) return f(std::int16_t{});
  if (kind == 'u' && size == 2) return f(std::uint16_t{});
  if (kind == 'i' && size == 4) return f(std::int32_t{});
  if (kind == 'u' && size == 4) return f(std::uint32_t{});
  if (kind == 'i' && size == 8) return f(std::int64_t{});
  if (kind == 'u' && size == 8) return f(std::uint64_t{});
  if (kind == 'f' && size == 4) return f(float{});
  if (kind == 'f' && size == 8) return f(double{});
  throw MismatchError("dtype " + py::cast<std::string>(py::str(static_cast<const py::handle&>(dtype))) +
                      " is not an element type of Tessera arrays (int8..int64, uint8..uint64, float32, float64)");
}

// A DistArray of any element type, owned by Python.
struct PyArray {
  ArrayVariant array;
};

void bind_arrays(py::module_& m);
void bind_graphs(py::module_& m);
void bind_store(py::module_& m);  // store.cpp: a session's residents saved and restored
// Opens the process's Trilinos session (Kokkos and Tpetra start once per
// process) unless it is open; ends it (if one was opened) before MPI ends.
void open_trilinos_session();
void shutdown_trilinos();

}  // namespace tessera::python
