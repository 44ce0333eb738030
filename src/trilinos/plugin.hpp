// The trilinos/ layer's entry points as libtessera-trilinos.so exports them.
// Programs link the small loader (loader.cpp) instead of Trilinos: Trilinos
// is ten libraries and ~50,000 symbol relocations, which every process paid
// at start-up (the supervisor, mpirun's ranks of `tessera cc`, Python)
// though few commands use it. The loader opens the plugin on first use.
// Both sides are built from this tree by one compiler, so C++ types cross.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "tessera/trilinos/hitting.hpp"
#include "tessera/trilinos/spectral.hpp"

namespace tessera::trilinos::plugin {

// Raised whenever the table's layout changes: a stale plugin is refused.
inline constexpr int kVersion = 2;  // 2: the PackedGraph entry points

struct EntryPoints {
  int version = kVersion;
  std::string (*description)() = nullptr;
  // A Session owned through an opaque pointer: made by open_session, ended by close_session.
  void* (*open_session)(Runtime& rt) = nullptr;
  void (*close_session)(void* session) = nullptr;
  bool (*session_active)() = nullptr;
  RowMatrixMemory (*row_matrix_memory)(const graph::EdgeList& g) = nullptr;
  SpectralResult (*spectral)(const graph::EdgeList& g, const SpectralOptions& options) = nullptr;
  BelosHittingTimes (*belos_hitting_times)(const graph::EdgeList& g, std::span<const std::uint64_t> targets,
                                           const BelosHittingOptions& options) = nullptr;
  SpectralResult (*spectral_packed)(const graph::PackedGraph& g, const SpectralOptions& options) = nullptr;
  BelosHittingTimes (*belos_hitting_times_packed)(const graph::PackedGraph& g, std::span<const std::uint64_t> targets,
                                                  const BelosHittingOptions& options) = nullptr;
};

inline constexpr const char* kFileName = "libtessera-trilinos.so";
inline constexpr const char* kEntrySymbol = "tessera_trilinos_entry_points";

}  // namespace tessera::trilinos::plugin
