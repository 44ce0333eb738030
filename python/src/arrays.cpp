// DistArray for Python: any Tessera element type behind one class, a
// zero-copy NumPy view of the local block, and the bulk collective forms of
// comm/bulk_access.hpp over NumPy index arrays.
#include <optional>

#include "common.hpp"
#include <bit>
#include <cmath>

#include "tessera/comm/argsort.hpp"
#include "tessera/comm/bulk_access.hpp"

namespace tessera::python {

namespace {

using Indices = py::array_t<std::uint64_t, py::array::c_style>;

std::span<const std::uint64_t> span_of(const Indices& idx) {
  return {idx.data(), static_cast<std::size_t>(idx.size())};
}

// The values argument as a contiguous array of exactly T (the Python layer
// has converted them; a wrong dtype here is a bug there, reported clearly).
template <class T>
std::span<const T> values_of(const py::array& values) {
  if (!py::isinstance<py::array_t<T>>(values) || !(values.flags() & py::array::c_style))
    throw MismatchError("values must be a contiguous array of " + py::cast<std::string>(py::str(static_cast<py::handle>(py::dtype::of<T>()))));
  return {static_cast<const T*>(values.data()), static_cast<std::size_t>(values.size())};
}

template <class T>
void update_with(DistArray<T>& a, std::span<const std::uint64_t> idx, std::span<const T> values, const std::string& op) {
  if (op == "add") return update(a, idx, values, ops::Add{});
  if (op == "min") return update(a, idx, values, ops::Min{});
  if (op == "max") return update(a, idx, values, ops::Max{});
  if (op == "xor") {
    if constexpr (std::is_integral_v<T>) return update(a, idx, values, ops::BitXor{});
    else throw MismatchError("update(op=\"xor\") needs an integer array, not " + element_type_of<T>().name);
  }
  throw ConfigError("update: op must be \"add\", \"min\", \"max\" or \"xor\", not \"" + op + "\"");
}

// An order-preserving map of any element type to 64-bit unsigned keys, so
// that one radix argsort serves them all: signed integers flip their sign
// bit, floats flip every bit when negative and the sign bit otherwise (NaNs
// made positive first, so they sort last, as NumPy puts them).
template <class T>
std::uint64_t radix_key(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    const double d = std::isnan(v) ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(v);
    const auto bits = std::bit_cast<std::uint64_t>(d);
    return bits >> 63 ? ~bits : bits | (std::uint64_t{1} << 63);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(v)) ^ (std::uint64_t{1} << 63);
  } else {
    return static_cast<std::uint64_t>(v);
  }
}

}  // namespace

StorageOptions storage_options(const std::string& storage, const std::string& name, const std::string& dir,
                               bool persist) {
  if (storage == "default" || storage == "heap" || storage == "colocale") {
    if (!name.empty())
      throw ConfigError("name='" + name + "' needs storage=\"shared\" (only a Shared array has a name)");
    // "default": the runtime's choice, Heap or co-locale segments under --colocales.
    return storage == "heap" ? StorageOptions::heap() : storage == "colocale" ? StorageOptions::colocale() : StorageOptions{};
  }
  if (storage != "shared")
    throw ConfigError("storage must be \"default\", \"heap\", \"colocale\" or \"shared\", not \"" + storage + "\"");
  auto o = StorageOptions::shared(name, dir);
  o.persist = persist;
  return o;
}

void bind_arrays(py::module_& m) {
  py::class_<PyArray>(m, "_DistArray")
      .def(py::init([](std::uint64_t n, py::dtype dtype, const std::string& storage, const std::string& name,
                       const std::string& dir, bool persist, std::optional<std::vector<std::uint64_t>> sizes) {
             Runtime& rt = runtime();
             auto options = storage_options(storage, name, dir, persist);
             Distribution d = sizes ? Distribution::weighted_block(*sizes) : Distribution::block(n, rt.size());
             return with_element_type(dtype, [&](auto t) {
               using T = decltype(t);
               return std::make_unique<PyArray>(PyArray{ArrayVariant(std::in_place_type<DistArray<T>>, rt, d, options)});
             });
           }),
           py::arg("n"), py::arg("dtype"), py::arg("storage") = "default", py::arg("name") = "", py::arg("dir") = "",
           py::arg("persist") = false, py::arg("sizes") = std::nullopt)
      .def_property_readonly("size", [](const PyArray& a) { return std::visit([](auto& x) { return x.size(); }, a.array); })
      .def_property_readonly("dtype", [](const PyArray& a) {
        return std::visit([](auto& x) { return py::dtype::of<typename std::decay_t<decltype(x)>::value_type>(); }, a.array);
      })
      .def_property_readonly("local_range", [](const PyArray& a) {
        return std::visit([](auto& x) { return py::make_tuple(x.local_begin(), x.local_end()); }, a.array);
      })
      .def_property_readonly("offsets", [](const PyArray& a) {
        return std::visit([](auto& x) { return x.distribution().offsets(); }, a.array);
      })
      .def_property_readonly("distribution", [](const PyArray& a) {
        return std::visit([](auto& x) { return x.distribution().kind(); }, a.array);
      })
      .def_property_readonly("storage", [](const PyArray& a) {
        return std::visit([](auto& x) { return std::string(storage_kind_name(x.storage_kind())); },
                          a.array);
      })
      .def_property_readonly("metadata_path", [](const PyArray& a) {
        return std::visit([](auto& x) { return x.metadata_path(); }, a.array);
      })
      .def("owner", [](const PyArray& a, std::uint64_t i) {
        return std::visit([&](auto& x) { x.distribution().check(i); return x.owner(i); }, a.array);
      })
      .def_property_readonly("local_address", [](PyArray& a) {  // for zero-copy checks
        return std::visit([](auto& x) { return reinterpret_cast<std::uintptr_t>(x.local().data()); }, a.array);
      })
      .def("local", [](py::object self) {
        auto& a = self.cast<PyArray&>();
        return std::visit([&](auto& x) { return view_of(x.local(), self, true); }, a.array);
      })
      .def("gather", [](PyArray& a, const Indices& idx) {
        return std::visit(
            [&](auto& x) -> py::array {
              using T = typename std::decay_t<decltype(x)>::value_type;
              py::array_t<T> out(static_cast<py::ssize_t>(idx.size()));
              std::span<T> slots(out.mutable_data(), static_cast<std::size_t>(out.size()));
              py::gil_scoped_release other_threads_may_run;  // no Python object is touched below
              gather(x, span_of(idx), slots);
              return out;
            },
            a.array);
      })
      .def("scatter", [](PyArray& a, const Indices& idx, const py::array& values) {
        std::visit(
            [&](auto& x) {
              using T = typename std::decay_t<decltype(x)>::value_type;
              auto vals = values_of<T>(values);
              py::gil_scoped_release other_threads_may_run;
              scatter(x, span_of(idx), vals);
            },
            a.array);
      })
      .def("update", [](PyArray& a, const Indices& idx, const py::array& values, const std::string& op) {
        std::visit(
            [&](auto& x) {
              using T = typename std::decay_t<decltype(x)>::value_type;
              auto vals = values_of<T>(values);
              py::gil_scoped_release other_threads_may_run;
              update_with(x, span_of(idx), vals, op);
            },
            a.array);
      })
      .def("argsort", [](const PyArray& a, int digit_bits) {
        return std::visit(
            [&](auto& x) {
              ArgsortOptions options;
              options.digit_bits = digit_bits;
              py::gil_scoped_release other_threads_may_run;
              if constexpr (std::is_same_v<typename std::decay_t<decltype(x)>::value_type, std::uint64_t>) {
                return std::make_unique<PyArray>(PyArray{ArrayVariant(argsort(x, options))});
              } else {  // keys of another type: their order-preserving 64-bit image
                DistArray<std::uint64_t> keys(runtime(), x.distribution());
                auto in = x.local();
                auto out = keys.local();
                for (std::size_t i = 0; i < in.size(); ++i) out[i] = radix_key(in[i]);
                return std::make_unique<PyArray>(PyArray{ArrayVariant(argsort(keys, options))});
              }
            },
            a.array);
      });
}

}  // namespace tessera::python
