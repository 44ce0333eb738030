// The trilinos/ layer when Tessera is built without Trilinos: every entry
// point says so, so callers (the CLI's --solver belos) need no #ifdef.
#include "tessera/trilinos/hitting.hpp"
#include "tessera/trilinos/spectral.hpp"

namespace tessera::trilinos {

namespace {
[[noreturn]] void not_built() {
  throw ConfigError("this Tessera was built without Trilinos, so --solver belos is not available: use --solver "
                    "tessera, or install Trilinos (scripts/setup.sh) and rebuild with -DTESSERA_WITH_TRILINOS=ON");
}
}  // namespace

bool available() noexcept { return false; }
std::string description() { return "not built (configured without Trilinos)"; }

struct Session::State {};
Session::Session(Runtime&) { not_built(); }
Session::~Session() = default;
bool Session::active() noexcept { return false; }

RowMatrixMemory row_matrix_memory(const graph::EdgeList&) { not_built(); }

SpectralResult spectral(const graph::EdgeList&, const SpectralOptions&) { not_built(); }

BelosHittingTimes belos_hitting_times(const graph::EdgeList&, std::span<const std::uint64_t>, const BelosHittingOptions&) {
  not_built();
}

SpectralResult spectral(const graph::PackedGraph&, const SpectralOptions&) { not_built(); }

BelosHittingTimes belos_hitting_times(const graph::PackedGraph&, std::span<const std::uint64_t>,
                                      const BelosHittingOptions&) {
  not_built();
}

}  // namespace tessera::trilinos
