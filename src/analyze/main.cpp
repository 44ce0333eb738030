// tessera-analyze: the analysis side of an out-of-process composition. A
// program of its own (its own MPI job, or a single process), linking the
// trilinos/ layer and nothing of the caller's state: it attaches to a
// control segment (storage/control.hpp; its request and reply:
// analyze/protocol.hpp), maps the graph's Shared arrays by
// their metadata paths (one rank per segment: analysis rank r maps segment r),
// builds the operator over the mapped arrays without copying them (Tessera's
// EdgeListMatrix, or Trilinos' EdgeListRowMatrix for Belos and Anasazi),
// runs the requested kind (hitting times; the Fiedler vector or eigenvector
// centrality), writes its vector into the caller's Shared result array and
// posts the caller.
// It serves requests until the caller says shutdown, and leaves (removing
// the control segment) when the caller dies.
//
//   mpirun -n N tessera-analyze --control /dev/shm/NAME.control.seg
//
// Across nodes rank r runs on the node of caller rank r and attaches to that
// node's control segment (the same path on every node).
#include <CLI/CLI.hpp>
#include <sys/stat.h>

#include <atomic>
#include <csignal>
#include <cstring>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "tessera/graph/edge_list.hpp"
#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/hitting_times.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/runtime/wait.hpp"
#include "tessera/analyze/protocol.hpp"
#include "tessera/storage/metadata.hpp"
#include "tessera/trilinos/hitting.hpp"
#include "tessera/trilinos/spectral.hpp"

namespace {

using namespace tessera;
using control::ControlSegment;
using control::Side;
namespace proto = analyze::protocol;

struct Args {
  std::string control;
  double wait_for_control = 0;  // s to wait for the control segment to appear
  double timeout = 3600;        // s to wait for a request
  double period = 0.1;          // s between liveness checks of the caller
  bool quiet = false;
};

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// A Shared array the request names: it must exist, hold `type`, and have one
// segment per rank of this job. Read by rank 0 only: across nodes the
// metadata file lies in the directory of the caller's rank 0 (beside analysis
// rank 0), while every rank opens its own segment in its own node's directory.
SharedArrayMetadata check_array(Runtime& rt, const std::string& role, const std::string& path, const char* type,
                                const char* or_type = nullptr) {
  const std::string suffix = ".json";
  if (path.size() <= suffix.size() || path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0)
    throw FormatError("the request names '" + path + "' as the " + role +
                      " array: not a Shared array metadata path (NAME.json)");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw FormatError("the request names " + path + " as the " + role +
                      " array, but it does not exist (removed, or another directory than the analysis sees?)");
  auto m = SharedArrayMetadata::read(path);
  if (m.element.name != type && !(or_type && m.element.name == or_type))
    throw MismatchError("the request names " + path + " as the " + role + " array, which must hold " + type +
                        (or_type ? std::string(" or ") + or_type : std::string()) + " elements, but it holds " +
                        m.element.name);
  if (m.segments.size() != static_cast<std::size_t>(rt.size()))
    throw MismatchError(path + " has " + std::to_string(m.segments.size()) + " segments and this analysis job " +
                        std::to_string(rt.size()) + " ranks: one rank per segment is needed");
  return m;
}

std::vector<std::uint64_t> broadcast_offsets(Runtime& rt, std::vector<std::uint64_t> offsets) {
  std::uint64_t n = broadcast(rt.comm(), static_cast<std::uint64_t>(offsets.size()), 0);
  offsets.resize(n);
  broadcast(rt.comm(), offsets.data(), offsets.size(), 0);
  return offsets;
}

Distribution ranges_of(const std::vector<std::uint64_t>& offsets) {
  std::vector<std::uint64_t> sizes;
  for (std::size_t r = 0; r + 1 < offsets.size(); ++r) sizes.push_back(offsets[r + 1] - offsets[r]);
  return Distribution::weighted_block(sizes);
}

StorageOptions existing(const std::string& path, bool writable) {
  auto slash = path.rfind('/');
  std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
  auto o = StorageOptions::existing(file.substr(0, file.size() - 5), directory_of(path));
  o.open_writable = writable;
  return o;
}

// A request's array path: a bare file name lies beside the control segment
// (as this process sees it: a container may mount the directory elsewhere).
void resolve(char (&field)[proto::kPathBytes], const std::string& control_path) {
  std::string path = field;
  if (path.empty() || path.find('/') != std::string::npos) return;
  path = directory_of(control_path) + "/" + path;
  if (path.size() >= proto::kPathBytes) throw FormatError("array path " + path + " is too long");
  std::snprintf(field, proto::kPathBytes, "%s", path.c_str());
}

// A spectral request on the mapped graph: Anasazi on a RowMatrix over the
// edge arrays; the unit-norm vector into `result`; rank 0 fills `reply`.
void solve_spectral(Runtime& rt, const graph::EdgeList& g, const proto::Request& req, bool quiet,
                    DistArray<double>& result, const AnonymousMemoryMeter& heap, proto::Reply& reply) {
  const bool fiedler = req.analysis == static_cast<std::uint32_t>(proto::Analysis::fiedler);
  if (!trilinos::available())
    throw ConfigError(std::string("the ") + proto::analysis_name(req.analysis) +
                      " analysis needs Anasazi, and this tessera-analyze was built without Trilinos (" +
                      trilinos::description() + ")");
  trilinos::SpectralOptions so;
  so.what = fiedler ? trilinos::SpectralWhat::fiedler : trilinos::SpectralWhat::centrality;
  so.tolerance = req.tolerance;
  so.max_iterations = req.max_iterations;
  if (rt.rank() == 0 && !quiet)
    std::fprintf(stderr, "tessera-analyze: %s on %llu vertices, %llu edges (mapped, not copied) by Anasazi %s on a "
                 "Tpetra RowMatrix over the edge arrays\n", fiedler ? "Fiedler vector" : "eigenvector centrality",
                 static_cast<unsigned long long>(g.vertices()), static_cast<unsigned long long>(g.edges()),
                 trilinos::to_string(so.method));
  auto r = trilinos::spectral(g, so);
  const std::uint64_t growth = heap.growth_bytes();
  auto out = result.local();
  std::copy(r.vector.begin(), r.vector.end(), out.begin());
  if (rt.rank() == 0) {
    reply.iterations = r.iterations;
    reply.converged = r.converged ? 1 : 0;
    reply.solve_seconds = r.seconds;
    reply.matrix_extra_bytes = r.matrix_extra_bytes;
    reply.anonymous_growth_bytes = growth;
    reply.lambda = r.lambda;
    reply.next_lambda = r.next_lambda;
    reply.eigen_residual = r.residual;
    reply.eigen_method = static_cast<std::uint32_t>(r.method == trilinos::EigenMethod::lobpcg
                                                        ? proto::EigenMethod::lobpcg
                                                        : proto::EigenMethod::krylov_schur);
  }
}

// One request on the mapped arrays; rank 0 fills `reply`.
void solve(Runtime& rt, ControlSegment& ctl, proto::Request req, bool quiet, proto::Reply& reply) {
  for (auto* field : {&req.offsets, &req.dst, &req.weight, &req.result}) resolve(*field, ctl.path());
  AnonymousMemoryMeter heap(rt.comm());  // mapping the arrays adds none: they are files
  std::vector<std::uint64_t> edge_offsets, row_offsets, vertex_offsets;
  bool weighted = req.weight[0] != 0;
  int narrow = 0;
  agree(rt.comm(), [&] {
    if (rt.rank() != 0) return;
    auto offsets_meta = check_array(rt, "row offsets", req.offsets, "uint64");
    auto dst_meta = check_array(rt, "destination", req.dst, "uint32", "uint64");
    std::optional<SharedArrayMetadata> weight_meta;
    if (weighted) weight_meta = check_array(rt, "weight", req.weight, "float64");
    auto result_meta = check_array(rt, "result", req.result, "float64");
    if (weight_meta && weight_meta->offsets != dst_meta.offsets)
      throw MismatchError("the request's destination and weight arrays are distributed differently");
    if (result_meta.length != req.vertices)
      throw MismatchError("the result array " + std::string(req.result) + " has " + std::to_string(result_meta.length) +
                          " elements for a graph of " + std::to_string(req.vertices) + " vertices");
    if (offsets_meta.length != req.vertices + static_cast<std::uint64_t>(rt.size()))
      throw MismatchError("the row offsets array " + std::string(req.offsets) + " has " +
                          std::to_string(offsets_meta.length) + " elements for " + std::to_string(req.vertices) +
                          " vertices on " + std::to_string(rt.size()) + " ranks (one more a rank)");
    edge_offsets = dst_meta.offsets;
    row_offsets = offsets_meta.offsets;
    vertex_offsets = result_meta.offsets;
    narrow = dst_meta.element.name == "uint32";
  });
  narrow = broadcast(rt.comm(), narrow, 0);
  const auto edge_ranges = ranges_of(broadcast_offsets(rt, edge_offsets));
  const auto row_ranges = ranges_of(broadcast_offsets(rt, row_offsets));
  const auto vertex_ranges = ranges_of(broadcast_offsets(rt, vertex_offsets));
  // Mapped in place: nothing is copied (existing storage, read-only edges).
  DistArray<std::uint64_t> offsets(rt, row_ranges, existing(req.offsets, false));
  graph::IdArray dst = graph::with_id_type(narrow ? graph::IdWidth::narrow : graph::IdWidth::wide,
                                           [&](auto zero) -> graph::IdArray {
                                             return DistArray<decltype(zero)>(rt, edge_ranges, existing(req.dst, false));
                                           });
  std::optional<DistArray<double>> weight;
  if (weighted) weight.emplace(rt, edge_ranges, existing(req.weight, false));
  DistArray<double> result(rt, vertex_ranges, existing(req.result, true));
  auto g = graph::EdgeList::adopt(req.vertices, false, vertex_ranges, std::move(offsets), std::move(dst),
                                  std::move(weight));
  if (proto::spectral(req.analysis)) return solve_spectral(rt, g, req, quiet, result, heap, reply);

  std::vector<std::uint64_t> targets(req.targets, req.targets + req.target_count);
  linalg::HittingOptions o;
  o.cg.tolerance = req.tolerance;
  o.cg.max_iterations = req.max_iterations;
  o.connected = req.connected != 0;
  const bool belos = req.solver == static_cast<std::uint32_t>(proto::Solver::belos);
  const auto preconditioner = req.preconditioner == static_cast<std::uint32_t>(proto::Preconditioner::relaxation)
                                  ? trilinos::Preconditioner::relaxation
                                  : trilinos::Preconditioner::diagonal;
  const std::string method = belos ? "Belos CG + Ifpack2 Jacobi (" + std::string(trilinos::to_string(preconditioner)) +
                                         ") on a Tpetra RowMatrix over the edge arrays"
                                   : "Tessera's CG";
  if (rt.rank() == 0 && !quiet)
    std::fprintf(stderr, "tessera-analyze: hitting times to %u target(s) on %llu vertices, %llu edges (mapped, not "
                 "copied) with %s\n", req.target_count, static_cast<unsigned long long>(g.vertices()),
                 static_cast<unsigned long long>(g.edges()), method.c_str());
  std::optional<linalg::HittingTimes> h;
  std::uint64_t extra = 0;
  int belos_solves = 0;
  if (belos) {
    trilinos::BelosHittingOptions bo;
    bo.hitting = o;
    bo.preconditioner = preconditioner;
    auto r = trilinos::belos_hitting_times(g, targets, bo);
    extra = r.matrix_extra_bytes;
    belos_solves = r.belos_solves;
    h.emplace(std::move(r.result));
  } else {
    linalg::EdgeListMatrix matrix(g);
    h.emplace(linalg::hitting_times(g, matrix, targets, o));
    extra = all_reduce<std::uint64_t>(rt.comm(), matrix.extra_memory_bytes(), MPI_SUM);
  }
  const std::uint64_t growth = heap.growth_bytes();
  auto times = h->times.local();
  auto out = result.local();
  std::copy(times.begin(), times.end(), out.begin());
  if (rt.rank() == 0) {
    reply.iterations = h->solve.iterations;
    reply.converged = h->solve.converged ? 1 : 0;
    reply.solve_status = static_cast<std::uint32_t>(h->solve.status);
    reply.rounds = h->solve.rounds;
    reply.relative_residual = h->solve.relative_residual;
    reply.backward_error = h->solve.backward_error;
    std::snprintf(reply.solve_reason, sizeof(reply.solve_reason), "%s", h->solve.reason.c_str());
    reply.solve_seconds = h->solve.seconds;
    reply.setup_seconds = h->setup_seconds;
    reply.unreachable = h->unreachable;
    reply.targets = h->targets;
    reply.matrix_extra_bytes = extra;
    reply.belos_solves = belos_solves;
    reply.anonymous_growth_bytes = growth;
  }
}

// Set while this rank is attached: where its SIGTERM handler records the
// signal, so the caller can tell a rank mpirun stopped (because another rank
// died) from the rank that failed first.
std::atomic<std::uint32_t*> g_stopped_word{nullptr};
struct sigaction g_previous_sigterm {};

void on_sigterm(int sig) {
  if (std::uint32_t* w = g_stopped_word.load()) std::atomic_ref<std::uint32_t>(*w).store(static_cast<std::uint32_t>(sig));
  if (g_previous_sigterm.sa_handler != SIG_DFL && g_previous_sigterm.sa_handler != SIG_IGN &&
      !(g_previous_sigterm.sa_flags & SA_SIGINFO)) {
    g_previous_sigterm.sa_handler(sig);  // the exit cleanup's, which re-raises
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

class StoppedRecord {
 public:
  StoppedRecord(ControlSegment& ctl, int rank) {
    g_stopped_word.store(&proto::payload(ctl).stopped[rank]);
    struct sigaction sa {};
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, &g_previous_sigterm);
  }
  StoppedRecord(const StoppedRecord&) = delete;
  StoppedRecord& operator=(const StoppedRecord&) = delete;
  ~StoppedRecord() {
    ::sigaction(SIGTERM, &g_previous_sigterm, nullptr);
    g_stopped_word.store(nullptr);
  }
};

int serve(Runtime& rt, const Args& a) {
  const bool root = rt.rank() == 0;
  // Across nodes each node has its own control segment (the same path): the
  // lowest analysis rank of each node writes to it (reply, failure, removal).
  const bool writer = rt.node().rank == 0;
  std::unique_ptr<ControlSegment> ctl;
  // Once this rank has its segment, an error anywhere is also its node's callers'.
  auto fail_all = [&](const Error& e) {
    if (ctl) ctl->fail(Side::analysis, static_cast<int>(e.category()), e.what());
  };
  try {
    agree(rt.comm(), [&] {
      auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(a.wait_for_control);
      for (;;) {
        struct stat st {};
        if (::stat(a.control.c_str(), &st) == 0 || std::chrono::steady_clock::now() >= until) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ctl = proto::open(a.control);
    });
    agree(rt.comm(), [&] { ctl->attach(Side::analysis, rt.rank(), "tessera-analyze"); });
  } catch (const Error& e) {
    fail_all(e);
    throw;
  }
  StoppedRecord stopped(*ctl, rt.rank());
  if (ctl->ranks() != rt.size()) {
    std::string msg = "the caller runs " + std::to_string(ctl->ranks()) + " rank(s), one Shared segment per array each, "
                      "and this tessera-analyze job has " + std::to_string(rt.size()) +
                      ": start it with mpirun -n " + std::to_string(ctl->ranks()) + " (one rank per segment)";
    if (writer) ctl->fail(Side::analysis, static_cast<int>(ErrorCategory::mismatch), msg);
    throw MismatchError(msg);
  }
  // Analysis rank r maps segment r of each array, which exists only on the
  // node of caller rank r: this rank must have attached to that node's segment.
  try {
    agree(rt.comm(), [&] {
      const proto::Placement placement = proto::read_placement(*ctl);
      if (placement.serves[rt.rank()] == 0) {
        std::string served;
        for (int r = 0; r < rt.size(); ++r)
          if (placement.serves[r]) served += (served.empty() ? "" : ", ") + std::to_string(r);
        throw MismatchError("analysis rank " + std::to_string(rt.rank()) + " runs on host " + rt.node().hostname +
                            ", but caller rank " + std::to_string(rt.rank()) +
                            ", whose Shared segments it maps, runs on another node (the control segment " +
                            a.control + " there serves caller rank(s) " + served + " on " +
                            proto::node_name(placement) + "): start analysis rank r on the node of caller rank r, "
                            "one mpirun app context per node, as the caller prints (mpirun -n K --host HOST:K "
                            "tessera-analyze --control PATH : -n K --host HOST2:K ...)");
      }
    });
  } catch (const Error& e) {
    fail_all(e);
    throw;
  }
  // Seen before posting ready: a request posted right after is not missed.
  std::uint32_t seen = ctl->load(Side::analysis, rt.rank());
  ctl->post(Side::caller, rt.rank());
  if (root && !a.quiet)
    std::fprintf(stderr, "tessera-analyze: attached to %s as %d rank(s) on %d node(s); caller %s\n", a.control.c_str(),
                 rt.size(), rt.node().count, control::describe(ctl->peer(Side::caller, 0)).c_str());

  for (;;) {
    const std::int64_t t_wait = control::monotonic_ns();
    agree(rt.comm(), [&] {
      seen = ctl->wait(Side::analysis, rt.rank(), seen, a.period, [&] {
        int dead = ctl->first_dead(Side::caller);
        if (dead >= 0) {
          auto p = ctl->peer(Side::caller, dead);
          std::string msg = "the caller (" + control::describe(p) + ", rank " + std::to_string(dead) +
                            ") died while this analysis waited for its request; removing its control segment " +
                            a.control + " (its arrays stay until 'tessera shm gc')";
          if (writer) ctl->remove();
          throw PeerError(msg);
        }
        if (static_cast<double>(control::monotonic_ns() - t_wait) * 1e-9 > a.timeout) {
          char buf[96];
          std::snprintf(buf, sizeof(buf), "no request from the caller within %g s", a.timeout);
          std::string msg = buf;
          if (writer) ctl->fail(Side::analysis, static_cast<int>(ErrorCategory::peer), msg);
          throw PeerError(msg);
        }
      });
      if (ctl->failed())
        throw_error(static_cast<ErrorCategory>(ctl->error_category()), "the caller gave up: " + ctl->message());
    });
    if (root) proto::payload(*ctl).reply.analysis_woke_ns = control::monotonic_ns();
    proto::Request req{};
    proto::Reply reply{};
    try {
      agree(rt.comm(), [&] { req = proto::read_request(*ctl); });
      if (req.analysis == static_cast<std::uint32_t>(proto::Analysis::shutdown)) return 0;
      if (root) std::memcpy(&reply, &proto::payload(*ctl).reply, sizeof(reply));
      solve(rt, *ctl, req, a.quiet, reply);
    } catch (const Error& e) {
      // Agreed on every rank: each node's writer tells its callers, then every rank leaves.
      if (writer) ctl->fail(Side::analysis, static_cast<int>(e.category()), e.what());
      throw;
    }
    // Rank 0's reply to every node's caller.
    if (root) {
      reply.status = static_cast<std::uint32_t>(proto::Status::ok);
      reply.result_posted_ns = control::monotonic_ns();
    }
    broadcast(rt.comm(), &reply, 1, 0);
    if (writer) std::memcpy(&proto::payload(*ctl).reply, &reply, sizeof(reply));
    barrier(rt.comm());  // every rank's results and every node's reply are written
    ctl->post(Side::caller, rt.rank());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessera-analyze: the analysis side of `tessera pipeline --analysis process|container` (Trilinos on "
               "the caller's Shared arrays, no copy)", "tessera-analyze"};
  Args a;
  app.add_option("--control", a.control, "The caller's control segment (DIR/NAME.control.seg)")->required();
  app.add_option("--wait-for-control", a.wait_for_control, "Seconds to wait for the control segment to appear")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--timeout", a.timeout, "Seconds to wait for a request")->check(CLI::PositiveNumber);
  app.add_option("--period", a.period, "Seconds between checks that the caller is alive")
      ->check(CLI::Range(0.001, 60.0));
  app.add_flag("-q,--quiet", a.quiet, "No progress lines");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  tessera::Runtime rt(argc, argv);
  int code = 0;
  try {
    // Kokkos/Tpetra once for the process, when built (after the Runtime, gone before it).
    std::optional<tessera::trilinos::Session> session;
    if (tessera::trilinos::available()) session.emplace(rt);
    code = serve(rt, a);
  } catch (const std::exception& e) {
    // Errors are agreed on every rank: rank 0 says it once.
    if (rt.rank() == 0) std::fprintf(stderr, "tessera-analyze: error: %s\n", e.what());
    code = 1;
  }
  return code;
}
