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
#include "tessera/runtime/splitmix64.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::bench::jacobi {
using namespace tessera::chunks;

namespace {
constexpr double kPi = 3.14159265358979323846;

// One box of the grid: its interior cells plus one ghost layer per side.
struct Block {
  std::array<int, 3> n{}, lo{};  // interior extent, global index of its first cell
  int work = 1;                  // sweeps per iteration (the imbalanced case repeats them)
  std::vector<double> u, next, f;
  template <class A>
  void serialize(A& a) {
    a(n, lo, work, u, f);
    next.resize(u.size());  // scratch: not shipped
  }
  std::size_t at(int i, int j, int k) const {
    return (static_cast<std::size_t>(k) * static_cast<std::size_t>(n[1] + 2) + static_cast<std::size_t>(j)) *
               static_cast<std::size_t>(n[0] + 2) + static_cast<std::size_t>(i);
  }
};

// The Jacobi sweep; the chunks and the plain loop run this same function, so
// their iterates are bit-identical. __restrict: u, next and f never overlap,
// and without it every (short) row pays the vectorizer's overlap checks.
void sweep(const double* __restrict u, double* __restrict next, const double* __restrict f, std::array<int, 3> n,
           double h2) {
  const std::size_t sy = static_cast<std::size_t>(n[0] + 2), sz = sy * static_cast<std::size_t>(n[1] + 2);
  for (int k = 1; k <= n[2]; ++k)
    for (int j = 1; j <= n[1]; ++j) {
      const std::size_t row = static_cast<std::size_t>(k) * sz + static_cast<std::size_t>(j) * sy;
      for (std::size_t c = row + 1; c <= row + static_cast<std::size_t>(n[0]); ++c)
        next[c] = (h2 * f[c] + (u[c - 1] + u[c + 1]) + (u[c - sy] + u[c + sy]) + (u[c - sz] + u[c + sz])) * (1.0 / 6.0);
    }
}

// Visits the cells of the plane `layer` across `axis`, interior rows only,
// in an order both sides of a face share.
template <class F>
void for_face(const Block& b, int axis, int layer, F&& visit) {
  const std::size_t a1 = axis == 0 ? 1 : 0, a2 = axis == 2 ? 1 : 2;
  const std::array<std::size_t, 3> stride{1, static_cast<std::size_t>(b.n[0] + 2),
                                          static_cast<std::size_t>(b.n[0] + 2) * static_cast<std::size_t>(b.n[1] + 2)};
  // Bounds and strides in locals: the visitor's stores could alias the block.
  const std::size_t s1 = stride[a1], s2 = stride[a2], ny = static_cast<std::size_t>(b.n[a2]), nx = static_cast<std::size_t>(b.n[a1]);
  std::size_t k = 0, plane = static_cast<std::size_t>(layer) * stride[static_cast<std::size_t>(axis)];
  for (std::size_t y = 1; y <= ny; ++y) {
    std::size_t c = plane + y * s2 + s1;
    for (std::size_t x = 0; x < nx; ++x, c += s1) visit(c, k++);
  }
}

double h_of(const Problem& p) { return 1.0 / (p.n + 1); }
double exact_1d(const Problem& p, int g) { return std::sin(kPi * (g + 1) * h_of(p)); }
double lambda_h(const Problem& p) { return 6.0 * (1.0 - std::cos(kPi * h_of(p))) / (h_of(p) * h_of(p)); }

Block make_block(const Problem& p, const ChunkGrid& grid, std::uint64_t id) {
  Block b;
  auto ix = grid.index(static_cast<int>(id));
  const std::array<int, 3> dims{grid.di, grid.dj, grid.dk};
  for (std::size_t a = 0; a < 3; ++a) {  // even split, the first `extra` chunks one cell more
    int base = p.n / dims[a], extra = p.n % dims[a];
    b.n[a] = base + (ix[a] < extra ? 1 : 0);
    b.lo[a] = ix[a] * base + std::min(ix[a], extra);
  }
  if (p.imbalance && ix[2] < (grid.dk + 3) / 4) b.work = 8;
  std::size_t cells = static_cast<std::size_t>(b.n[0] + 2) * static_cast<std::size_t>(b.n[1] + 2) * static_cast<std::size_t>(b.n[2] + 2);
  b.u.assign(cells, 0.0);
  b.next.assign(cells, 0.0);
  b.f.assign(cells, 0.0);
  for (int k = 1; k <= b.n[2]; ++k)
    for (int j = 1; j <= b.n[1]; ++j)
      for (int i = 1; i <= b.n[0]; ++i)
        b.f[b.at(i, j, k)] = lambda_h(p) * exact_1d(p, b.lo[0] + i - 1) * exact_1d(p, b.lo[1] + j - 1) *
                             exact_1d(p, b.lo[2] + k - 1);
  return b;
}

void iterate(Block& b, const Problem& p) {
  for (int w = 0; w < b.work; ++w) sweep(b.u.data(), b.next.data(), b.f.data(), b.n, h_of(p) * h_of(p));
  b.u.swap(b.next);
}

// Ghost faces: a chunk sends its boundary planes to its face neighbours
// (tag = face: 2 * axis + (1 for the + side)); they land in the opposite ghost plane.
void send_faces(ChunkArray<Block>& arr, const ChunkGrid& grid, std::uint64_t id, const Block& b) {
  for (int face = 0; face < 6; ++face) {
    int axis = face / 2, side = face % 2;
    auto nb = face_neighbour(grid, id, axis, side ? 1 : -1);
    if (nb < 0) continue;
    auto na = static_cast<std::size_t>(axis);
    auto out = arr.send_buffer<double>(id, static_cast<std::uint64_t>(nb), static_cast<std::uint32_t>(face),
                                       static_cast<std::size_t>(b.n[0] * b.n[1] * b.n[2] / b.n[na]));
    const double* u = b.u.data();
    double* to = out.data();
    for_face(b, axis, side ? b.n[na] : 1, [u, to](std::size_t c, std::size_t k) { to[k] = u[c]; });
  }
}
void receive_face(Block& b, const Message& m) {
  int axis = static_cast<int>(m.tag / 2), side = static_cast<int>(m.tag % 2);
  const std::byte* in = m.payload.data();
  double* u = b.u.data();
  for_face(b, axis, side ? 0 : b.n[static_cast<std::size_t>(axis)] + 1,
           [u, in](std::size_t c, std::size_t k) { std::memcpy(u + c, in + sizeof(double) * k, sizeof(double)); });
}

// Error, deviation from theory, residual and checksum of one block (ghosts filled).
void measure(const Problem& p, const Block& b, Outcome& o) {
  double rho_k = std::pow(std::cos(kPi * h_of(p)), p.iterations), inv_h2 = 1.0 / (h_of(p) * h_of(p));
  const std::size_t sy = static_cast<std::size_t>(b.n[0] + 2), sz = sy * static_cast<std::size_t>(b.n[1] + 2);
  for (int k = 1; k <= b.n[2]; ++k)
    for (int j = 1; j <= b.n[1]; ++j)
      for (int i = 1; i <= b.n[0]; ++i) {
        std::size_t c = b.at(i, j, k);
        int gi = b.lo[0] + i - 1, gj = b.lo[1] + j - 1, gk = b.lo[2] + k - 1;
        double exact = exact_1d(p, gi) * exact_1d(p, gj) * exact_1d(p, gk), u = b.u[c];
        double au = (6 * u - (b.u[c - 1] + b.u[c + 1]) - (b.u[c - sy] + b.u[c + sy]) - (b.u[c - sz] + b.u[c + sz])) * inv_h2;
        o.error = std::max(o.error, std::abs(u - exact));
        o.expected_error = std::max(o.expected_error, rho_k * std::abs(exact));
        o.deviation = std::max(o.deviation, std::abs(u - (1 - rho_k) * exact));
        o.residual = std::max(o.residual, std::abs(b.f[c] - au));
        o.expected_residual = std::max(o.expected_residual, lambda_h(p) * rho_k * std::abs(exact));
        std::uint64_t key = (static_cast<std::uint64_t>(gk) * static_cast<std::uint64_t>(p.n) + static_cast<std::uint64_t>(gj)) *
                                static_cast<std::uint64_t>(p.n) + static_cast<std::uint64_t>(gi);
        std::uint64_t state = key ^ std::bit_cast<std::uint64_t>(u);
        o.checksum += splitmix64(state);
      }
}
}  // namespace

Outcome run_chunked(Runtime& rt, const Problem& p, const ChunkGrid& grid, const Placement& placement, const Balancing& lb) {
  ChunkArray<Block> arr(rt.comm(), static_cast<std::size_t>(grid.count()), [&](std::uint64_t id) { return make_block(p, grid, id); }, placement);
  Outcome o;
  std::uint64_t state = lb.seed;
  barrier(rt.comm());
  auto t0 = std::chrono::steady_clock::now();
  double cpu0 = thread_cpu_seconds();
  // Each chunk sends its new faces right after its sweep, while they are in
  // cache; the next step delivers them just before the neighbour's sweep.
  arr.for_each([&](std::uint64_t id, Block& b) { send_faces(arr, grid, id, b); });
  for (int it = 1; it <= p.iterations; ++it) {
    arr.exchange_and_compute(receive_face, [&](std::uint64_t id, Block& b) {
      iterate(b, p);
      send_faces(arr, grid, id, b);
    });
    arr.end_step();
    if (lb.print_measurements && it == lb.at_iteration)
      std::fputs(arr.measurements().summary(rt.comm(), arr.placement(), 0).c_str(), stderr);
    if (lb.strategy != Strategy::none && it == lb.at_iteration) o.balancing.push_back(arr.at_sync(lb.strategy, lb.hops));
    if (lb.scramble_every > 0 && it % lb.scramble_every == 0) {
      Placement next(arr.size());
      for (auto& r : next) r = static_cast<int>(splitmix64(state) % static_cast<std::uint64_t>(rt.size()));
      arr.migrate(next);
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  o.seconds_per_iteration = all_reduce(rt.comm(), seconds, MPI_MAX) / p.iterations;
  o.cpu_seconds_per_iteration = all_reduce(rt.comm(), thread_cpu_seconds() - cpu0, MPI_MAX) / p.iterations;
  arr.exchange(receive_face);  // untimed: the residual needs the final ghosts
  arr.for_each([&](std::uint64_t, Block& b) { measure(p, b, o); });
  double figures[5] = {o.error, o.expected_error, o.deviation, o.residual, o.expected_residual};
  all_reduce(rt.comm(), figures, 5, MPI_MAX);
  o.error = figures[0], o.expected_error = figures[1], o.deviation = figures[2];
  o.residual = figures[3], o.expected_residual = figures[4];
  o.checksum = all_reduce(rt.comm(), o.checksum, MPI_SUM);
  return o;
}

Outcome run_plain(const Problem& p) {
  Block b = make_block(p, ChunkGrid{1, 1, 1}, 0);
  auto t0 = std::chrono::steady_clock::now();
  double cpu0 = thread_cpu_seconds();
  for (int it = 1; it <= p.iterations; ++it) iterate(b, p);
  Outcome o;
  o.seconds_per_iteration = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / p.iterations;
  o.cpu_seconds_per_iteration = (thread_cpu_seconds() - cpu0) / p.iterations;
  measure(p, b, o);
  return o;
}

}  // namespace tessera::bench::jacobi
