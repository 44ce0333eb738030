// Poisson3D by Jacobi with domain decomposition into migratable chunks, the
// benchmark of the Kaapi / Charm++ fault-tolerance comparison (Besseron,
// Gautier, Jafar, Kalé et al., "Kaapi and Charm++: checkpoint/restart with
// load balancing", Poisson3D). -lap(u) = f on the unit cube, u = 0 on the
// boundary, 7-point stencil, Jacobi sweeps. Manufactured solution:
// u*(x,y,z) = sin(pi x) sin(pi y) sin(pi z), f = lambda_h u* with lambda_h
// the discrete eigenvalue, so u* solves the discrete problem exactly and the
// Jacobi error after k sweeps from 0 is exactly rho^k u*, rho = cos(pi h).
#include "jacobi3d.hpp"

#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tessera/chunks/chunk_array.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/fault_injection.hpp"
#include "tessera/runtime/splitmix64.hpp"
#include "tessera/runtime/trace.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::bench::jacobi {
using namespace tessera::chunks;
using namespace tessera::resilience;

namespace {
constexpr double kPi = 3.14159265358979323846;

// One box of the grid: its interior cells plus one ghost layer per side.
struct Block {
  static constexpr const char* checkpoint_name = "tessera.jacobi3d.block";  // restores across builds
  std::array<int, 3> n{}, lo{};  // interior extent, global index of its first cell
  int work = 1;                  // sweeps per iteration (the imbalanced case repeats them)
  std::vector<double> u, next, f;
  std::array<const double*, 6> ghost{};  // this step's faces from the neighbours, by tag; not shipped
  template <class A>
  void serialize(A& a) {
    a(n, lo, work, u, f);
    next.resize(u.size());  // scratch: not shipped
  }
  std::size_t at(int i, int j, int k) const {
    return (static_cast<std::size_t>(k) * static_cast<std::size_t>(n[1] + 2) + static_cast<std::size_t>(j)) *
               static_cast<std::size_t>(n[0] + 2) + static_cast<std::size_t>(i);
  }
  std::size_t face_cells(int axis) const {
    return static_cast<std::size_t>(n[0]) * static_cast<std::size_t>(n[1]) * static_cast<std::size_t>(n[2]) /
           static_cast<std::size_t>(n[static_cast<std::size_t>(axis)]);
  }
};

// The Jacobi sweep of planes k_first..k_last; the chunks and the plain loop
// run this same function, so their iterates are bit-identical. __restrict:
// u, next and f never overlap, and without it every (short) row pays the
// vectorizer's overlap checks. noinline: inlined into its callers, GCC spills
// the row loop's pointers to the stack.
[[gnu::noinline]] void sweep(const double* __restrict u, double* __restrict next, const double* __restrict f,
                             std::array<int, 3> n, double h2, int k_first, int k_last) {
  const std::size_t sy = static_cast<std::size_t>(n[0] + 2), sz = sy * static_cast<std::size_t>(n[1] + 2);
  for (int k = k_first; k <= k_last; ++k)
    for (int j = 1; j <= n[1]; ++j) {
      const std::size_t row = static_cast<std::size_t>(k) * sz + static_cast<std::size_t>(j) * sy;
      for (std::size_t c = row + 1; c <= row + static_cast<std::size_t>(n[0]); ++c)
        next[c] = (h2 * f[c] + (u[c - 1] + u[c + 1]) + (u[c - sy] + u[c + sy]) + (u[c - sz] + u[c + sz])) * (1.0 / 6.0);
    }
}

// A face of a block is the plane `layer` across `axis` (interior cells
// only); its values run along the lower axis first. face_runs gives the part
// of it lying in plane k as runs: run(first cell, stride, index in the face,
// count), so faces are packed and unpacked plane by plane.
template <class F>
void face_runs(const Block& b, int axis, int layer, int k, F&& run) {
  const std::size_t n0 = static_cast<std::size_t>(b.n[0]), n1 = static_cast<std::size_t>(b.n[1]);
  const std::size_t plane = static_cast<std::size_t>(k - 1);
  if (axis == 2) {
    if (k == layer)
      for (std::size_t j = 0; j < n1; ++j) run(b.at(1, static_cast<int>(j) + 1, k), std::size_t{1}, j * n0, n0);
  } else if (k >= 1 && k <= b.n[2]) {
    if (axis == 0) run(b.at(layer, 1, k), n0 + 2, plane * n1, n1);  // a column: strided
    else run(b.at(1, layer, k), std::size_t{1}, plane * n0, n0);
  }
}
using Faces = std::array<double*, 6>;  // outgoing face buffers by tag, null where no neighbour

// Ghost cells of plane k (0..n+1) from this step's received faces. Tag
// 2*axis+1 came from the - neighbour (its + face): it fills layer 0.
void unpack_ghosts(Block& b, int k) {
  double* u = b.u.data();
  for (int tag = 0; tag < 6; ++tag)
    if (const double* g = b.ghost[static_cast<std::size_t>(tag)])
      face_runs(b, tag / 2, tag % 2 ? 0 : b.n[static_cast<std::size_t>(tag / 2)] + 1, k,
                [&](std::size_t c, std::size_t stride, std::size_t at, std::size_t count) {
                  for (std::size_t x = 0; x < count; ++x) u[c + x * stride] = g[at + x];
                });
}
// Plane k of the boundary of `from` (u or next) into the outgoing faces.
void pack_faces(const Block& b, const double* from, int k, const Faces& out) {
  for (int tag = 0; tag < 6; ++tag)
    if (double* to = out[static_cast<std::size_t>(tag)])
      face_runs(b, tag / 2, tag % 2 ? b.n[static_cast<std::size_t>(tag / 2)] : 1, k,
                [&](std::size_t c, std::size_t stride, std::size_t at, std::size_t count) {
                  for (std::size_t x = 0; x < count; ++x) to[at + x] = from[c + x * stride];
                });
}

double h_of(const Problem& p) { return 1.0 / (p.n + 1); }
double lambda_h(const Problem& p) { return 6.0 * (1.0 - std::cos(kPi * h_of(p))) / (h_of(p) * h_of(p)); }
// sin(pi x) at the grid points from `lo` on: u* is a product of three.
std::vector<double> exact_1d(const Problem& p, int lo, int count) {
  std::vector<double> s(static_cast<std::size_t>(count));
  for (int g = 0; g < count; ++g) s[static_cast<std::size_t>(g)] = std::sin(kPi * (lo + g + 1) * h_of(p));
  return s;
}

Block make_block(const Problem& p, const ChunkGrid& grid, std::uint64_t id) {
  Block b;
  auto ix = grid.index(static_cast<int>(id));
  const std::array<int, 3> dims{grid.di, grid.dj, grid.dk};
  for (std::size_t a = 0; a < 3; ++a) {  // even split, the first `extra` chunks one cell more
    int base = p.n / dims[a], extra = p.n % dims[a];
    b.n[a] = base + (ix[a] < extra ? 1 : 0);
    b.lo[a] = ix[a] * base + std::min(ix[a], extra);
  }
  b.work = work_factor(p.imbalance, (ix[2] + 0.5) / grid.dk);
  std::size_t cells = static_cast<std::size_t>(b.n[0] + 2) * static_cast<std::size_t>(b.n[1] + 2) * static_cast<std::size_t>(b.n[2] + 2);
  b.u.assign(cells, 0.0);
  b.next.assign(cells, 0.0);
  b.f.assign(cells, 0.0);
  auto sx = exact_1d(p, b.lo[0], b.n[0]), sy = exact_1d(p, b.lo[1], b.n[1]), sz = exact_1d(p, b.lo[2], b.n[2]);
  const double lambda = lambda_h(p);
  for (int k = 1; k <= b.n[2]; ++k)
    for (int j = 1; j <= b.n[1]; ++j)
      for (int i = 1; i <= b.n[0]; ++i)
        b.f[b.at(i, j, k)] = lambda * sx[static_cast<std::size_t>(i - 1)] * sy[static_cast<std::size_t>(j - 1)] *
                             sz[static_cast<std::size_t>(k - 1)];
  return b;
}

// One Jacobi iteration of a block. The first sweep goes plane by plane:
// each plane's ghost cells are written just before it is swept and its new
// boundary packed into the outgoing faces just after, while the sweep has
// those cache lines in anyway (done for the whole block at once, each line
// of a strided x-face column costs a second miss). Later sweeps (the
// imbalanced case's extra work) recompute the same values.
void iterate(Block& b, const Problem& p, const Faces& out) {
  const double h2 = h_of(p) * h_of(p);
  for (int k = 1; k <= b.n[2]; ++k) {
    if (k == 1) unpack_ghosts(b, 0);
    unpack_ghosts(b, k);
    if (k == b.n[2]) unpack_ghosts(b, k + 1);
    sweep(b.u.data(), b.next.data(), b.f.data(), b.n, h2, k, k);
    pack_faces(b, b.next.data(), k, out);
  }
  for (int w = 1; w < b.work; ++w) sweep(b.u.data(), b.next.data(), b.f.data(), b.n, h2, 1, b.n[2]);
  b.ghost = {};
  b.u.swap(b.next);
}

// Room for this chunk's faces to its neighbours (tag = 2 * axis + (1 for
// the + side)), filled in place during its next sweep.
Faces face_buffers(ChunkArray<Block>& arr, const ChunkGrid& grid, std::uint64_t id, const Block& b) {
  std::array<Outgoing, 6> messages;
  std::array<int, 6> tags{};
  std::size_t count = 0;
  for (int tag = 0; tag < 6; ++tag)
    if (auto nb = face_neighbour(grid, id, tag / 2, tag % 2 ? 1 : -1); nb >= 0) {
      messages[count] = {static_cast<std::uint64_t>(nb), static_cast<std::uint32_t>(tag), b.face_cells(tag / 2)};
      tags[count++] = tag;
    }
  std::array<std::span<double>, 6> rooms;
  arr.send_buffers<double>(id, std::span(messages.data(), count), rooms);
  Faces out{};
  for (std::size_t m = 0; m < count; ++m) out[static_cast<std::size_t>(tags[m])] = rooms[m].data();
  return out;
}
// Keeps the face for unpack_ghosts (the payload lives until the next exchange).
void receive_face(Block& b, const Message& m) {
  if (m.tag >= 6 || m.count<double>() != b.face_cells(static_cast<int>(m.tag / 2)))
    throw Error("jacobi3d: chunk " + std::to_string(m.to) + " got a face message (tag " + std::to_string(m.tag) + ") of " +
                std::to_string(m.count<double>()) + " values that fits none of its faces");
  b.ghost[m.tag] = reinterpret_cast<const double*>(m.payload.data());
}

// Error, deviation from theory, residual and checksum of one block (ghosts filled).
void measure(const Problem& p, const Block& b, Outcome& o) {
  const double rho_k = std::pow(std::cos(kPi * h_of(p)), p.iterations), inv_h2 = 1.0 / (h_of(p) * h_of(p)), lambda = lambda_h(p);
  const std::size_t sy = static_cast<std::size_t>(b.n[0] + 2), sz = sy * static_cast<std::size_t>(b.n[1] + 2);
  auto sx = exact_1d(p, b.lo[0], b.n[0]), s_y = exact_1d(p, b.lo[1], b.n[1]), s_z = exact_1d(p, b.lo[2], b.n[2]);
  for (int k = 1; k <= b.n[2]; ++k)
    for (int j = 1; j <= b.n[1]; ++j)
      for (int i = 1; i <= b.n[0]; ++i) {
        std::size_t c = b.at(i, j, k);
        int gi = b.lo[0] + i - 1, gj = b.lo[1] + j - 1, gk = b.lo[2] + k - 1;
        double exact = sx[static_cast<std::size_t>(i - 1)] * s_y[static_cast<std::size_t>(j - 1)] * s_z[static_cast<std::size_t>(k - 1)];
        double u = b.u[c];
        double au = (6 * u - (b.u[c - 1] + b.u[c + 1]) - (b.u[c - sy] + b.u[c + sy]) - (b.u[c - sz] + b.u[c + sz])) * inv_h2;
        o.error = std::max(o.error, std::abs(u - exact));
        o.expected_error = std::max(o.expected_error, rho_k * std::abs(exact));
        o.deviation = std::max(o.deviation, std::abs(u - (1 - rho_k) * exact));
        o.residual = std::max(o.residual, std::abs(b.f[c] - au));
        o.expected_residual = std::max(o.expected_residual, lambda * rho_k * std::abs(exact));
        std::uint64_t key = (static_cast<std::uint64_t>(gk) * static_cast<std::uint64_t>(p.n) + static_cast<std::uint64_t>(gj)) *
                                static_cast<std::uint64_t>(p.n) + static_cast<std::uint64_t>(gi);
        std::uint64_t state = key ^ std::bit_cast<std::uint64_t>(u);
        o.checksum += splitmix64(state);
      }
}
// The final ghosts, then error, residual and checksum over every rank. The
// checksum is a sum of per-cell hashes: the same whatever the placement.
void finish(Runtime& rt, const Problem& p, ChunkArray<Block>& arr, Outcome& o) {
  arr.exchange(receive_face);  // untimed: the residual needs the final ghosts
  arr.for_each([&](std::uint64_t, Block& b) {
    for (int k = 0; k <= b.n[2] + 1; ++k) unpack_ghosts(b, k);
    measure(p, b, o);
  });
  double figures[5] = {o.error, o.expected_error, o.deviation, o.residual, o.expected_residual};
  all_reduce(rt.comm(), figures, 5, MPI_MAX);
  o.error = figures[0], o.expected_error = figures[1], o.deviation = figures[2];
  o.residual = figures[3], o.expected_residual = figures[4];
  o.checksum = all_reduce(rt.comm(), o.checksum, MPI_SUM);
}
}  // namespace

int work_factor(bool imbalance, double z) {
  return imbalance ? 1 + static_cast<int>(std::lround(7 * std::clamp((0.625 - z) / 0.5, 0.0, 1.0))) : 1;
}

Outcome run_chunked(Runtime& rt, const Problem& p, const ChunkGrid& grid, const Placement& placement, const Balancing& lb) {
  ChunkArray<Block> arr(rt.comm(), static_cast<std::size_t>(grid.count()), [&](std::uint64_t id) { return make_block(p, grid, id); }, placement);
  Outcome o;
  std::uint64_t state = lb.seed;
  barrier(rt.comm());
  auto t0 = std::chrono::steady_clock::now();
  double cpu0 = thread_cpu_seconds();
  auto steady0 = t0;
  const double idle0 = trace::idle_seconds();
  double idle_steady0 = idle0;
  // Each chunk sends its new faces right after its sweep, while they are in
  // cache; the next step delivers them just before the neighbour's sweep.
  arr.for_each([&](std::uint64_t id, Block& b) {
    auto out = face_buffers(arr, grid, id, b);
    for (int k = 1; k <= b.n[2]; ++k) pack_faces(b, b.u.data(), k, out);
  });
  arr.measurements().reset();  // start-up, not a step: the growing outboxes would weigh on the chunks that grew them
  for (int it = 1; it <= p.iterations; ++it) {
    trace::Span traced(trace::Category::round, "Jacobi iteration");
    traced.arg("iteration", it);
    arr.exchange_and_compute(receive_face, [&](std::uint64_t id, Block& b) { iterate(b, p, face_buffers(arr, grid, id, b)); });
    arr.end_step();
    if (lb.print_measurements && it == lb.at_iteration)
      std::fputs(arr.measurements().summary(rt.comm(), arr.placement(), 0).c_str(), stderr);
    if (it == lb.at_iteration) {
      o.chunk_loads = arr.measurements().gather_loads(rt.comm());
      o.placement_before = arr.placement();
      if (lb.strategy != Strategy::none) o.balancing.push_back(arr.at_sync(lb.strategy, lb.hops));
      barrier(rt.comm());
      steady0 = std::chrono::steady_clock::now();
      idle_steady0 = trace::idle_seconds();
    }
    if (lb.scramble_every > 0 && it % lb.scramble_every == 0) {
      Placement next(arr.size());
      for (auto& r : next) r = static_cast<int>(splitmix64(state) % static_cast<std::uint64_t>(rt.size()));
      arr.migrate(next);
    }
  }
  auto t1 = std::chrono::steady_clock::now();
  double seconds = std::chrono::duration<double>(t1 - t0).count(), steady = std::chrono::duration<double>(t1 - steady0).count();
  o.seconds_per_iteration = all_reduce(rt.comm(), seconds, MPI_MAX) / p.iterations;
  const int after = lb.at_iteration >= 1 && lb.at_iteration < p.iterations ? p.iterations - lb.at_iteration : p.iterations;
  o.steady_seconds_per_iteration = all_reduce(rt.comm(), steady, MPI_MAX) / after;
  o.cpu_seconds_per_iteration = all_reduce(rt.comm(), thread_cpu_seconds() - cpu0, MPI_MAX) / p.iterations;
  const double idle1 = trace::idle_seconds(), before = seconds - steady;
  if (steady0 != t0 && before > 0) o.idle_share_before = all_gather(rt.comm(), (idle_steady0 - idle0) / before);
  o.idle_share_after = all_gather(rt.comm(), steady > 0 ? (idle1 - idle_steady0) / steady : 0.0);
  finish(rt, p, arr, o);
  return o;
}

namespace {
// The checkpoint after iteration `it`: the problem's shape (rank 0) and the
// blocks; its stall (slowest rank) and the largest rank's bytes go to o.
void commit_checkpoint(Runtime& rt, Checkpoint& ck, const std::vector<std::int64_t>& shape, ChunkArray<Block>& arr,
                       int it, Outcome& o) {
  const auto c0 = std::chrono::steady_clock::now();
  auto w = ck.begin(static_cast<std::uint64_t>(it));
  w.add("problem", std::span<const std::int64_t>(shape).first(rt.rank() == 0 ? shape.size() : 0));
  w.add("blocks", arr);
  const std::uint64_t bytes = w.bytes();
  w.commit();
  const double stall = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
  o.checkpoint_seconds.push_back(all_reduce(rt.comm(), stall, MPI_MAX));
  o.checkpoint_bytes_per_rank = std::max(o.checkpoint_bytes_per_rank, all_reduce(rt.comm(), bytes, MPI_MAX));
}
}  // namespace

Outcome run_recoverable(Runtime& rt, const Problem& p, const ChunkGrid& grid, const Recovery& recovery,
                        std::uint64_t* resumed_from) {
  CheckpointOptions options = recovery.checkpoint;
  if (options.name.empty()) options.name = "jacobi3d";
  Checkpoint ck(rt, options);
  // What the checkpoint must match: a restart with another problem is refused.
  const std::vector<std::int64_t> shape{p.n, grid.di, grid.dj, grid.dk, p.imbalance ? 1 : 0};
  std::uint64_t start = 0;
  Outcome o;
  auto r0 = std::chrono::steady_clock::now();
  auto found = ck.latest();
  if (rt.rank() == 0 && !found.skipped.empty()) std::fprintf(stderr, "%s\n", found.message().c_str());
  // Built in one expression: a ChunkArray is not movable.
  ChunkArray<Block> arr = [&]() -> ChunkArray<Block> {
    if (found) {
      auto r = ck.restore(*found.info);
      auto saved = r.read<std::int64_t>("problem", 0, shape.size());
      if (saved != shape)
        throw ConfigError("jacobi3d: checkpoint " + found.info->path + " is of another problem (n, chunk grid or "
                          "imbalance differ); remove it or give another directory");
      start = found.info->step;
      return r.read_chunks<Block>("blocks");
    }
    return ChunkArray<Block>(rt.comm(), static_cast<std::size_t>(grid.count()),
                             [&](std::uint64_t id) { return make_block(p, grid, id); }, Placement{});
  }();
  if (resumed_from) *resumed_from = start;
  const double restore = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
  if (found) o.restore_seconds = all_reduce(rt.comm(), restore, MPI_MAX);
  barrier(rt.comm());
  auto t0 = std::chrono::steady_clock::now();
  double cpu0 = thread_cpu_seconds();
  // The faces of the iterate we start from (restored or initial), as run_chunked.
  arr.for_each([&](std::uint64_t id, Block& b) {
    auto out = face_buffers(arr, grid, id, b);
    for (int k = 1; k <= b.n[2]; ++k) pack_faces(b, b.u.data(), k, out);
  });
  for (int it = static_cast<int>(start) + 1; it <= p.iterations; ++it) {
    trace::Span traced(trace::Category::round, "Jacobi iteration");
    traced.arg("iteration", it);
    arr.exchange_and_compute(receive_face, [&](std::uint64_t id, Block& b) { iterate(b, p, face_buffers(arr, grid, id, b)); });
    arr.end_step();
    if (recovery.every > 0 && it % recovery.every == 0 && it < p.iterations) commit_checkpoint(rt, ck, shape, arr, it, o);
    FaultInjection::at_step(rt.rank(), static_cast<std::uint64_t>(it));
  }
  const int done = std::max(1, p.iterations - static_cast<int>(start));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  o.seconds_per_iteration = o.steady_seconds_per_iteration = all_reduce(rt.comm(), seconds, MPI_MAX) / done;
  o.cpu_seconds_per_iteration = all_reduce(rt.comm(), thread_cpu_seconds() - cpu0, MPI_MAX) / done;
  finish(rt, p, arr, o);
  if (recovery.remove_at_end)
    ck.remove();
  else
    ck.finish_drain();  // the last checkpoint complete at every level for the next run
  return o;
}

Outcome run_plain(const Problem& p) {
  Block b = make_block(p, ChunkGrid{1, 1, 1}, 0);
  auto t0 = std::chrono::steady_clock::now();
  double cpu0 = thread_cpu_seconds();
  for (int it = 1; it <= p.iterations; ++it) {  // the textbook loop: whole sweeps, no faces
    sweep(b.u.data(), b.next.data(), b.f.data(), b.n, h_of(p) * h_of(p), 1, b.n[2]);
    b.u.swap(b.next);
  }
  Outcome o;
  o.seconds_per_iteration = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / p.iterations;
  o.cpu_seconds_per_iteration = (thread_cpu_seconds() - cpu0) / p.iterations;
  measure(p, b, o);
  return o;
}

}  // namespace tessera::bench::jacobi
