// libtessera-trilinos.so's one exported symbol: the table of the layer's
// entry points (plugin.hpp), over the implementations built beside it.
#include "plugin.hpp"

#include <memory>

namespace tessera::trilinos::plugin {
namespace {

void* open_session(Runtime& rt) {
  // Ownership crosses the library boundary as a plain pointer; close_session takes it back.
  return std::make_unique<Session>(rt).release();
}

void close_session(void* session) { std::unique_ptr<Session>(static_cast<Session*>(session)).reset(); }

const EntryPoints kEntryPoints{
    .version = kVersion,
    .description = [] { return trilinos::description(); },
    .open_session = open_session,
    .close_session = close_session,
    .session_active = [] { return Session::active(); },
    .row_matrix_memory = [](const graph::EdgeList& g) { return trilinos::row_matrix_memory(g); },
    .spectral = [](const graph::EdgeList& g, const SpectralOptions& o) { return trilinos::spectral(g, o); },
    .belos_hitting_times = [](const graph::EdgeList& g, std::span<const std::uint64_t> t,
                              const BelosHittingOptions& o) { return trilinos::belos_hitting_times(g, t, o); },
    .spectral_packed = [](const graph::PackedGraph& g, const SpectralOptions& o) { return trilinos::spectral(g, o); },
    .belos_hitting_times_packed = [](const graph::PackedGraph& g, std::span<const std::uint64_t> t,
                                     const BelosHittingOptions& o) { return trilinos::belos_hitting_times(g, t, o); },
};

}  // namespace
}  // namespace tessera::trilinos::plugin

extern "C" __attribute__((visibility("default"))) const tessera::trilinos::plugin::EntryPoints*
tessera_trilinos_entry_points() {
  return &tessera::trilinos::plugin::kEntryPoints;
}
