// _tessera: the compiled half of the `tessera` Python package. The runtime
// (MPI borrowed from mpi4py or initialised here), error translation, the
// collective agreement on Python-side errors, and attach (no MPI needed).
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <type_traits>

#include "common.hpp"
#include "graph_object.hpp"
#include "tessera/runtime/cancellation.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/comm_counters.hpp"
#include "tessera/runtime/exit_cleanup.hpp"
#include "tessera/runtime/trace.hpp"
#include "tessera/runtime/wait.hpp"
#include "tessera/storage/attach.hpp"

namespace tessera::python {

namespace {
std::unique_ptr<Runtime> g_runtime;

// The Python classes of tessera's error categories (tessera.FormatError, ...),
// handed over by tessera/__init__.py. Strong references kept for the life of
// the process (never released: they must outlive every translation).
constexpr std::size_t kCategories = 9;
std::array<PyObject*, kCategories> g_error_classes{};

PyObject* error_class(ErrorCategory c) {
  auto i = static_cast<std::size_t>(c);
  return i < kCategories && g_error_classes[i] ? g_error_classes[i] : PyExc_RuntimeError;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// Python keeps its own SIGINT handler (KeyboardInterrupt) and any handler a
// user installed; the runtime's cleanup handlers stay only where Python had
// the default action (SIGTERM, SIGHUP: the process would die there anyway,
// now without leaving segments behind).
class KeepPythonSignalHandlers {
 public:
  KeepPythonSignalHandlers() {
    for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], nullptr, &saved_[i]);
  }
  ~KeepPythonSignalHandlers() {
    for (std::size_t i = 0; i < kSignals.size(); ++i)
      if (saved_[i].sa_handler != SIG_DFL) sigaction(kSignals[i], &saved_[i], nullptr);
  }
  KeepPythonSignalHandlers(const KeepPythonSignalHandlers&) = delete;
  KeepPythonSignalHandlers& operator=(const KeepPythonSignalHandlers&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> saved_{};
};

// mpi4py's handle of a communicator: a pointer in Open MPI, an int in MPICH.
template <class Comm>
Comm comm_from_handle(std::uintptr_t handle) {
  if constexpr (std::is_pointer_v<Comm>) return reinterpret_cast<Comm>(handle);
  else return static_cast<Comm>(handle);
}

// The MPI communicator an mpi4py Comm wraps must be this job's world: Tessera
// runs on every rank of MPI_COMM_WORLD.
void check_communicator(std::uintptr_t handle, const std::string& mpi4py_library) {
  if (!mpi4py_library.empty() && trimmed(mpi4py_library) != mpi_library_version())
    throw MismatchError("mpi4py uses another MPI library than Tessera: mpi4py has '" + trimmed(mpi4py_library) +
                        "', Tessera was built with '" + mpi_library_version() +
                        "'; install mpi4py for this MPI (python3-mpi4py, or pip install mpi4py built with its mpicc)");
  MPI_Comm comm = comm_from_handle<MPI_Comm>(handle);
  int result = MPI_UNEQUAL;
  TESSERA_MPI(MPI_Comm_compare(comm, MPI_COMM_WORLD, &result));
  if (result != MPI_IDENT && result != MPI_CONGRUENT)
    throw ConfigError("tessera.Runtime(comm): Tessera runs on all ranks of MPI_COMM_WORLD; this communicator "
                      "holds other ranks or another order (pass MPI.COMM_WORLD or a duplicate of it)");
}

struct PyAttached {
  AttachedArray attached;
};

py::dtype dtype_of(const ElementType& e) {
  if (implied_element_size(e.name) == e.size && e.name.rfind("bytes", 0) != 0) return py::dtype(e.name);
  return py::dtype("V" + std::to_string(e.size));  // opaque structs: raw records of their size
}
}  // namespace

bool runtime_exists() noexcept { return g_runtime != nullptr; }

Runtime& runtime() {
  if (!g_runtime) {
    KeepPythonSignalHandlers keep;
    g_runtime = std::make_unique<Runtime>();
  }
  return *g_runtime;
}

void shutdown_runtime() {
  if (!g_runtime) return;
  shutdown_trilinos();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    // Someone (mpi4py's MPI.Finalize()) ended MPI first: the runtime's
    // communicators cannot be freed any more, so it is left to the OS.
    exit_cleanup::run();
    (void)g_runtime.release();
    return;
  }
  // Arrays still referenced at exit (module globals) lose their segments now,
  // before MPI ends; their destructors later find nothing left to remove.
  exit_cleanup::run();
  g_runtime.reset();
}

}  // namespace tessera::python

using namespace tessera;
using namespace tessera::python;

PYBIND11_MODULE(_tessera, m) {
  m.doc() = "Tessera's compiled core; use the `tessera` package";

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const tessera::Error& e) {
      PyErr_SetString(error_class(e.category()), e.what());
    }
  });

  m.def("_set_error_classes", [](py::dict classes) {
    const std::array<std::pair<ErrorCategory, const char*>, kCategories> names{{
        {ErrorCategory::generic, "generic"}, {ErrorCategory::mpi, "mpi"}, {ErrorCategory::system, "system"},
        {ErrorCategory::format, "format"},   {ErrorCategory::mismatch, "mismatch"}, {ErrorCategory::range, "range"},
        {ErrorCategory::config, "config"},   {ErrorCategory::peer, "peer"},
        {ErrorCategory::cancelled, "cancelled"}}};
    for (auto [category, name] : names) {
      py::object cls = classes[name];
      g_error_classes[static_cast<std::size_t>(category)] = cls.inc_ref().ptr();
    }
  });

  m.def(
      "_start",
      [](std::uintptr_t comm_handle, const std::string& mpi4py_library) {
        int initialized = 0;
        MPI_Initialized(&initialized);
        if (comm_handle != 0) {
          if (!initialized) throw ConfigError("tessera.Runtime(comm): MPI is not initialised, yet a communicator was given");
          check_communicator(comm_handle, mpi4py_library);
        }
        Runtime& rt = runtime();
        return py::make_tuple(rt.rank(), rt.size(), rt.job_id(), rt.node().size, rt.node().count);
      },
      py::arg("comm_handle") = 0, py::arg("mpi4py_library") = "");
  m.def("_shutdown", &shutdown_runtime);
  m.def("_running", &runtime_exists);
  m.def("mpi_library_version", &mpi_library_version, "The MPI library Tessera was built with");
  m.def("_barrier", [] { barrier(runtime().comm()); });

  // Tracing (tessera.trace, a session's trace=): collective start and stop,
  // phases named from Python, and the communication counts.
  m.def(
      "_trace_start",
      [](const std::string& path, std::size_t buffer_mb, const std::string& command) {
        trace::Options o = trace::options_from_environment();
        o.path = path;
        if (buffer_mb > 0) o.buffer_bytes = buffer_mb << 20;
        o.command = command;
        trace::start(runtime(), o);
      },
      py::arg("path"), py::arg("buffer_mb") = 0, py::arg("command") = "");
  m.def("_trace_stop", [] { return trace::stop(runtime()); });
  m.def("_trace_active", [] { return trace::active(); });
  m.def("_trace_name_thread", [](const std::string& name) { trace::name_thread(trace::intern(name)); });
  // A phase from Python (or, with wait=True, idle time: a session waiting
  // for its next command); end() or the with-block's end records it.
  py::class_<trace::Span>(m, "_TracePhase")
      .def(py::init([](const std::string& name, bool wait) {
             return std::make_unique<trace::Span>(wait ? trace::Category::wait : trace::Category::phase,
                                                  trace::recording() ? trace::intern(name) : nullptr);
           }),
           py::arg("name"), py::arg("wait") = false)
      .def("end", &trace::Span::end)
      .def("__enter__", [](trace::Span& s) -> trace::Span& { return s; }, py::return_value_policy::reference)
      .def("__exit__", [](trace::Span& s, py::args) { s.end(); });
  m.def("_comm_stats", [] { return gather_comm_counters_json(runtime()); },
        "Every rank's communication counts as JSON on rank 0 (collective); '' elsewhere");
  m.def("_comm_stats_local", [] { return comm_counters_json(runtime()); });
  m.def("_comm_stats_clear", [] { runtime().comm_counters().clear(); });

  // An analyst's session (tessera/session): every array made with default
  // storage is Shared, vertex ranges on 1024-element boundaries, so a client
  // maps each result as one array.
  m.def("_session_layout", [](bool shared_by_default, std::uint64_t alignment) {
    runtime().set_shared_by_default(shared_by_default);
    runtime().set_range_alignment(alignment);
  });
  // A session's Ctrl-C: cancellation points communicate once enabled (on
  // every rank, at start); rank 0's socket thread requests, the main thread
  // clears before each command (runtime/cancellation.hpp).
  m.def("_session_cancellation", [] { enable_cancellation(runtime().comm()); });
  m.def("_session_cancel", [](bool request) { request ? request_cancellation() : clear_cancellation(); });
  // Collective: rank 0's bytes on every rank. The session's ranks wait here
  // between commands, for hours perhaps: they sleep (up to 5 ms a poll, the
  // GIL released) instead of spinning or yielding in a tight loop.
  m.def("_session_broadcast", [](py::bytes message) {
    std::string text = runtime().rank() == 0 ? std::string(message) : std::string();
    {
      py::gil_scoped_release unlocked;
      std::uint64_t length = text.size();
      MPI_Request req;
      TESSERA_MPI(MPI_Ibcast(&length, 1, MPI_UINT64_T, 0, runtime().comm(), &req));
      long sleep_ns = 20'000;
      trace::Wait idle("session: waiting for a command");  // the ranks between commands
      for (;;) {
        int done = 0;
        TESSERA_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done) break;
        idle.started_waiting();
        timespec ts{0, sleep_ns};
        nanosleep(&ts, nullptr);
        sleep_ns = std::min(sleep_ns * 2, 5'000'000L);
      }
      text.resize(length);
      if (length > 0) broadcast(runtime().comm(), text.data(), text.size(), 0);
    }
    return py::bytes(text);
  });

  // Collective: every rank reports whether its local step failed (category
  // -1: no); if any did, every rank raises the lowest failing rank's error,
  // the failing ranks their own.
  m.def("_agree", [](int category, const std::string& message) {
    agree(runtime().comm(), [&] {
      if (category >= 0) throw_error(static_cast<ErrorCategory>(category), message);
    });
  });
  // Collective sum/min/max of one int64 or float64 per rank.
  m.def("_allreduce_int", [](std::int64_t v, const std::string& op) {
    return all_reduce<std::int64_t>(runtime().comm(), v, op == "min" ? MPI_MIN : op == "max" ? MPI_MAX : MPI_SUM);
  });
  m.def("_allgather_int", [](std::int64_t v) { return all_gather(runtime().comm(), v); });
  m.def("_allreduce_float", [](double v, const std::string& op) {
    return all_reduce<double>(runtime().comm(), v, op == "min" ? MPI_MIN : op == "max" ? MPI_MAX : MPI_SUM);
  });

  py::class_<PyAttached>(m, "_Attached")
      .def_property_readonly("length", [](const PyAttached& a) { return a.attached.length(); })
      .def_property_readonly("element_type", [](const PyAttached& a) { return a.attached.element().name; })
      .def_property_readonly("element_size", [](const PyAttached& a) { return a.attached.element().size; })
      .def_property_readonly("writable", [](const PyAttached& a) { return a.attached.writable(); })
      .def("segments", [](py::object self) {
        const auto& a = self.cast<const PyAttached&>();
        py::list views;
        py::dtype dt = dtype_of(a.attached.element());
        for (std::size_t s = 0; s < a.attached.segment_count(); ++s) {
          const auto& seg = a.attached.segment(s);
          py::array v(dt, {static_cast<py::ssize_t>(seg.count)}, {static_cast<py::ssize_t>(a.attached.element().size)},
                      seg.data, self);
          if (!a.attached.writable()) v.attr("flags").attr("writeable") = false;
          views.append(v);
        }
        return views;
      })
      .def("whole", [](py::object self) {
        // The whole array as one view (opened contiguous): no copy.
        const auto& a = self.cast<const PyAttached&>();
        py::dtype dt = dtype_of(a.attached.element());
        static std::byte empty[16];
        std::byte* data = a.attached.contiguous_data() ? a.attached.contiguous_data() : empty;
        if (!a.attached.contiguous_data() && a.attached.length() != 0)
          throw MismatchError("whole(): the array was attached segment by segment");
        py::array v(dt, {static_cast<py::ssize_t>(a.attached.length())},
                    {static_cast<py::ssize_t>(a.attached.element().size)}, data, self);
        if (!a.attached.writable()) v.attr("flags").attr("writeable") = false;
        return v;
      })
      .def("begins", [](const PyAttached& a) {
        py::list out;
        for (std::size_t s = 0; s < a.attached.segment_count(); ++s) out.append(a.attached.segment(s).begin);
        return out;
      });
  m.def(
      "_attach",
      [](const std::string& path, bool writable, bool contiguous) {
        const Access access = writable ? Access::read_write : Access::read_only;
        return std::make_unique<PyAttached>(
            PyAttached{contiguous ? AttachedArray::open_contiguous(path, access) : AttachedArray::open(path, access)});
      },
      py::arg("path"), py::arg("writable"), py::arg("contiguous") = false);

  bind_arrays(m);
  bind_graphs(m);
  bind_pipeline(m);
  bind_analyses(m);
  bind_store(m);
}
