// STREAM (McCalpin) through DistArray: each rank runs the kernels on its local
// span, in Heap and in Shared storage; the baseline is the same loops in one
// process with OpenMP at the same thread count, measured in the same run.
// Each kernel is one variant per storage, timed best of --reps; every kernel
// is idempotent on its inputs, so repeating one keeps STREAM's closed-form
// values (check_stream) exact after each kernel.
#include "tessera/bench/benchmarks.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "plain_stream.hpp"
#include "stream_kernels.hpp"
#include "tessera/array/dist_array.hpp"
#include "tessera/bench/report.hpp"
#include "tessera/bench/verifiers.hpp"
#include "tessera/runtime/collective.hpp"

namespace tessera::bench {

StreamValues StreamValues::after(int kernels_done) {
  StreamValues v{1.0, 2.0, 0.0};
  if (kernels_done > 0) v.c = v.a;
  if (kernels_done > 1) v.b = stream::kScalar * v.c;
  if (kernels_done > 2) v.c = v.a + v.b;
  if (kernels_done > 3) v.a = v.b + stream::kScalar * v.c;
  return v;
}

bool stream_arrays_match(std::span<const double> a, std::span<const double> b, std::span<const double> c,
                         int kernels_done) {
  const StreamValues want = StreamValues::after(kernels_done);
  auto close = [](double got, double expected) { return std::fabs(got - expected) <= 1e-13 * std::fabs(expected); };
  if (a.size() != b.size() || a.size() != c.size()) return false;
  for (std::size_t j = 0; j < a.size(); ++j)
    if (!close(a[j], want.a) || !close(b[j], want.b) || !close(c[j], want.c)) return false;
  return true;
}

Verdict check_stream(Runtime& rt, std::span<const double> a, std::span<const double> b, std::span<const double> c,
                     int kernels_done) {
  int ok = stream_arrays_match(a, b, c, kernels_done) ? 1 : 0;
  ok = all_reduce(rt.comm(), ok, MPI_LAND);
  return {ok != 0, ok ? "all elements hold STREAM's expected values" : "elements differ from STREAM's expected values"};
}

namespace {
// Verifies after kernel k; `ok_on_root` is computed on rank 0 only.
std::string root_verdict(Runtime& rt, bool ok_on_root, bool& ok) {
  ok = broadcast(rt.comm(), ok_on_root ? 1 : 0, 0) != 0;
  return ok ? "all elements hold STREAM's expected values" : "elements differ from STREAM's expected values";
}
}  // namespace

bool run_stream(Runtime& rt, const StreamOptions& o) {
  const int threads = o.baseline_threads > 0 ? o.baseline_threads : rt.size();
  nlohmann::json config{{"elements_per_array", o.elements},
                        {"array_bytes", o.elements * sizeof(double)},
                        {"reps", o.reps},
                        {"baseline_threads", threads}};
  Report report(rt, "stream", config, o.format);
  report.set_baselines({"plain loop", "DistArray heap"});
  auto bytes = [&](int k) { return stream::kBytesPerElement[k] * static_cast<double>(o.elements); };

  // The baseline alone on rank 0 (one process, OpenMP x threads); the other
  // ranks wait in a yielding collective meanwhile, so they take no core from it.
  {
    std::optional<PlainStream> plain;
    if (rt.rank() == 0) plain.emplace(o.elements, threads);
    std::vector<Variant> variants;
    for (int k = 0; k < stream::kKernels; ++k)
      variants.push_back({.group = stream::kKernelNames[k],
                          .variant = "plain loop (OpenMP x" + std::to_string(threads) + ")",
                          .storage = "-",
                          .reps = o.reps,
                          .work = bytes(k),
                          .run = [&plain, k] { plain->run(k); },
                          .verify = [&rt, &plain, k](bool& ok) {
                            return root_verdict(rt, plain && stream_arrays_match(plain->a(), plain->b(), plain->c(), k + 1), ok);
                          },
                          .rank0_only = true});
    run_variants(rt, report, variants, 1e9, "GB/s");
  }
  // One storage at a time, so only three arrays exist at once.
  for (const auto& [name, storage] : {std::pair{"heap", StorageOptions::heap()}, std::pair{"shared", StorageOptions::shared()}}) {
    DistArray<double> A(rt, o.elements, storage), B(rt, o.elements, storage), C(rt, o.elements, storage);
    double *a = A.local().data(), *b = B.local().data(), *c = C.local().data();
    const std::size_t m = A.local().size();
    for (std::size_t j = 0; j < m; ++j) a[j] = 1.0, b[j] = 2.0, c[j] = 0.0;  // first touch by the owner
    std::vector<Variant> variants;
    for (int k = 0; k < stream::kKernels; ++k)
      variants.push_back({.group = stream::kKernelNames[k],
                          .variant = "DistArray",
                          .storage = name,
                          .reps = o.reps,
                          .work = bytes(k),
                          .run = [=] { stream::run_kernel(k, a, b, c, m); },
                          .verify = verify_by([&, k] { return check_stream(rt, A.local(), B.local(), C.local(), k + 1); })});
    run_variants(rt, report, variants, 1e9, "GB/s");
  }
  return report.print();
}

}  // namespace tessera::bench
